/* POSIX asynchronous I/O on a Tessera file (through the interposer) and a local file in the
 * same lists. Exit status 0 when every check holds.
 *
 *   aio TESSERA_FILE LOCAL_FILE */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, what)                                                         \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "aio:%d: %s (errno %d)\n", __LINE__, what, errno);     \
            failures++;                                                            \
        }                                                                          \
    } while (0)

static void wait_for(struct aiocb *cb) {
    const struct aiocb *list[1] = {cb};
    while (aio_error(cb) == EINPROGRESS) aio_suspend(list, 1, NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int t = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    int l = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT(t >= 0 && l >= 0, "open");
    char a[8192], b[8192], back[8192];
    for (int i = 0; i < 8192; i++) {
        a[i] = (char)(i * 7);
        b[i] = (char)(i * 11 + 1);
    }

    /* One write each, polled with aio_error and aio_suspend, collected with aio_return. */
    struct aiocb w = {.aio_fildes = t, .aio_buf = a, .aio_nbytes = 8192, .aio_offset = 4096};
    w.aio_sigevent.sigev_notify = SIGEV_NONE;
    EXPECT(aio_write(&w) == 0, "aio_write tessera");
    wait_for(&w);
    EXPECT(aio_error(&w) == 0, "aio_error after the write");
    EXPECT(aio_return(&w) == 8192, "aio_return of the write");

    /* A list with both files, waited for by lio_listio itself. */
    struct aiocb lw = {.aio_fildes = l, .aio_buf = b, .aio_nbytes = 8192, .aio_offset = 0,
                       .aio_lio_opcode = LIO_WRITE};
    struct aiocb tw = {.aio_fildes = t, .aio_buf = b, .aio_nbytes = 4096, .aio_offset = 0,
                       .aio_lio_opcode = LIO_WRITE};
    struct aiocb *list[3] = {&lw, NULL, &tw};
    EXPECT(lio_listio(LIO_WAIT, list, 3, NULL) == 0, "lio_listio LIO_WAIT");
    EXPECT(aio_return(&lw) == 8192 && aio_return(&tw) == 4096, "list results");

    /* Read the Tessera file back asynchronously: [0, 4096) from the list, then the first
     * write. The local file too, in the same list. */
    struct aiocb tr = {.aio_fildes = t, .aio_buf = back, .aio_nbytes = 8192, .aio_offset = 4096,
                       .aio_lio_opcode = LIO_READ};
    char lback[8192];
    struct aiocb lr = {.aio_fildes = l, .aio_buf = lback, .aio_nbytes = 8192, .aio_offset = 0,
                       .aio_lio_opcode = LIO_READ};
    struct aiocb *rlist[2] = {&tr, &lr};
    EXPECT(lio_listio(LIO_NOWAIT, rlist, 2, NULL) == 0, "lio_listio LIO_NOWAIT");
    wait_for(&tr);
    wait_for(&lr);
    EXPECT(aio_return(&tr) == 8192 && memcmp(back, a, 8192) == 0, "tessera read back");
    EXPECT(aio_return(&lr) == 8192 && memcmp(lback, b, 8192) == 0, "local read back");
    struct aiocb tr0 = {.aio_fildes = t, .aio_buf = back, .aio_nbytes = 4096, .aio_offset = 0};
    EXPECT(aio_read(&tr0) == 0, "aio_read");
    wait_for(&tr0);
    EXPECT(aio_return(&tr0) == 4096 && memcmp(back, b, 4096) == 0, "first block");
    EXPECT(aio_cancel(t, NULL) == AIO_ALLDONE, "aio_cancel");
    struct aiocb fs = {.aio_fildes = t};
    EXPECT(aio_fsync(O_SYNC, &fs) == 0, "aio_fsync");
    wait_for(&fs);
    EXPECT(aio_return(&fs) == 0, "aio_fsync result");

    /* Failures: a read on a write-only descriptor fails in aio_error, and the list that
     * carries it fails with EIO; an unsupported notification fails at submission. */
    int wo = open(argv[1], O_WRONLY);
    struct aiocb bad = {.aio_fildes = wo, .aio_buf = back, .aio_nbytes = 10, .aio_offset = 0,
                        .aio_lio_opcode = LIO_READ};
    EXPECT(aio_read(&bad) == 0, "submission of a bad read");
    EXPECT(aio_error(&bad) == EBADF && aio_return(&bad) == -1, "bad read's outcome");
    struct aiocb *blist[1] = {&bad};
    EXPECT(lio_listio(LIO_WAIT, blist, 1, NULL) == -1 && errno == EIO, "list with a bad read");
    EXPECT(aio_error(&bad) == EBADF, "the bad read's own error");
    aio_return(&bad);
    struct aiocb th = {.aio_fildes = t, .aio_buf = back, .aio_nbytes = 10, .aio_offset = 0};
    th.aio_sigevent.sigev_notify = SIGEV_THREAD;
    EXPECT(aio_read(&th) == -1 && errno == ENOTSUP, "SIGEV_THREAD");

    /* The file as the kernel-free path sees it. */
    EXPECT(pread(t, back, 8192, 4096) == 8192 && memcmp(back, a, 8192) == 0, "pread");
    close(wo);
    close(t);
    close(l);
    if (failures == 0) printf("aio: ok\n");
    return failures != 0;
}
