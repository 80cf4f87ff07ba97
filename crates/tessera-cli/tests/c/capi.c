/* Tests of the C API (tessera.h, libtessera.so), built against the installed header and
 * pkg-config file. Exit status 0 when every check holds; otherwise the failed check on stderr.
 *
 *   capi errors DIR                    every bad input gets -1/NULL, the right errno and a
 *                                      message naming the problem; nothing crashes
 *   capi write FILE RANK NRANKS MODEL  N-1 strided pwrite of this rank's blocks, published by
 *                                      the model's own call (commit, session close, sync)
 *   capi read FILE NRANKS MODEL        reads the whole file and checks every byte
 *   capi hold FILE                     takes an exclusive lock on [0, 100), prints "locked",
 *                                      writes "held" under it and keeps it until stdin closes
 *   capi trylock FILE PID              a non-blocking lock fails with EAGAIN naming PID; a
 *                                      blocking one waits, then sees the holder's write */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <unistd.h>

#define XFER 10007
#define COUNT 12

static int failures;

#define EXPECT(cond, ...)                                                         \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "capi:%d: %s: ", __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, " (errno %d, message '%s')\n", errno, tessera_errmsg()); \
            failures++;                                                           \
        }                                                                         \
    } while (0)

/* The last call failed with `err` and a message containing `words`. */
static int failed_with(int err, const char *words) {
    return errno == err && strstr(tessera_errmsg(), words) != NULL;
}

static unsigned char byte_at(long long off) { return (unsigned char)((off * 131 + 7) % 251); }

static tessera_model model_arg(const char *name) {
    int m = tessera_model_from_name(name);
    if (m < 0) {
        fprintf(stderr, "capi: %s\n", tessera_errmsg());
        exit(2);
    }
    return (tessera_model)m;
}

static tessera_client *connect_or_die(void) {
    tessera_client *fs = tessera_connect(NULL, -1);
    if (!fs) {
        fprintf(stderr, "capi: connect: %s\n", tessera_errmsg());
        exit(2);
    }
    return fs;
}

static int do_errors(const char *dir) {
    char path[4096], other[4096];
    snprintf(path, sizeof path, "%s/errors", dir);
    snprintf(other, sizeof other, "%s/missing", dir);
    unsigned char buf[64] = {0};
    struct tessera_stat st;

    EXPECT(tessera_version() == TESSERA_VERSION, "version %d", tessera_version());
    EXPECT(tessera_errmsg() != NULL && tessera_errmsg()[0] == '\0', "fresh message");

    /* Models by name and number. */
    EXPECT(tessera_model_from_name("MPIIO") == TESSERA_MODEL_MPIIO, "mpiio by name");
    EXPECT(tessera_model_from_name("bogus") == -1 && failed_with(EINVAL, "bogus"), "bad name");
    EXPECT(tessera_model_from_name(NULL) == -1 && failed_with(EFAULT, "NULL"), "NULL name");
    EXPECT(strcmp(tessera_model_name(TESSERA_MODEL_COMMIT), "commit") == 0, "model name");
    EXPECT(tessera_model_name((tessera_model)42) == NULL, "name of a non-model");

    /* Connecting to an instance that does not exist names it. */
    EXPECT(tessera_connect("/nonexistent/instance", -1) == NULL &&
               strstr(tessera_errmsg(), "/nonexistent/instance") != NULL,
           "connect to a missing instance");
    EXPECT(tessera_connect(NULL, -7) == NULL && failed_with(EINVAL, "negative"), "node -7");
    EXPECT(tessera_connect(NULL, 1000) == NULL && failed_with(EINVAL, "does not exist"),
           "node 1000");

    /* NULL handles and pointers. */
    EXPECT(tessera_open(NULL, path, O_RDONLY, 0, 0) == NULL &&
               failed_with(EINVAL, "client is NULL"), "open without client");
    EXPECT(tessera_read(NULL, buf, 1) == -1 && failed_with(EINVAL, "file is NULL"), "read NULL");
    EXPECT(tessera_commit(NULL) == -1 && failed_with(EINVAL, "tessera_commit"), "commit NULL");
    EXPECT(tessera_close(NULL) == 0, "close(NULL) is a no-op");
    EXPECT(tessera_disconnect(NULL) == 0, "disconnect(NULL) is a no-op");

    tessera_client *fs = connect_or_die();
    EXPECT(tessera_open(fs, NULL, O_RDONLY, 0, 0) == NULL && failed_with(EFAULT, "path is NULL"),
           "NULL path");
    EXPECT(tessera_stat(fs, dir, NULL) == -1 && failed_with(EFAULT, "st is NULL"), "NULL st");
    EXPECT(tessera_stat(fs, NULL, &st) == -1 && failed_with(EFAULT, "path is NULL"),
           "stat of a NULL path");
    EXPECT(tessera_mkdir(fs, NULL, 0755) == -1 && failed_with(EFAULT, "path is NULL"),
           "mkdir of a NULL path");
    EXPECT(tessera_stat(fs, dir, &st) == 0 && st.kind == TESSERA_KIND_DIR, "stat dir");

    /* Paths and flags. */
    EXPECT(tessera_open(fs, "/etc/passwd", O_RDONLY, 0, 0) == NULL && errno == EXDEV,
           "path outside the mount");
    EXPECT(tessera_open(fs, other, O_RDONLY, 0, 0) == NULL && errno == ENOENT, "missing file");
    EXPECT(tessera_open(fs, path, O_ACCMODE, 0, 0) == NULL && failed_with(EINVAL, "access mode"),
           "bad access mode");
    EXPECT(tessera_open(fs, path, O_RDWR | O_CREAT, 0644, (tessera_model)9) == NULL &&
               failed_with(EINVAL, "not a tessera_model"), "bad model");
    EXPECT(tessera_open(fs, dir, O_RDONLY | O_DIRECTORY, 0, 0) == NULL &&
               failed_with(EINVAL, "tessera_stat"), "O_DIRECTORY");

    tessera_file *w = tessera_open(fs, path, O_WRONLY | O_CREAT, 0600, TESSERA_MODEL_COMMIT);
    EXPECT(w != NULL, "create");
    if (!w) return 1;
    EXPECT(tessera_open(fs, path, O_RDWR | O_CREAT | O_EXCL, 0600, 0) == NULL && errno == EEXIST,
           "O_EXCL on an existing file");
    EXPECT(tessera_file_model(w) == TESSERA_MODEL_COMMIT, "model of the handle");

    /* Buffers, offsets, whence. */
    EXPECT(tessera_pwrite(w, NULL, 10, 0) == -1 && failed_with(EFAULT, "buf is NULL"), "NULL buf");
    EXPECT(tessera_write(w, NULL, 10) == -1 && failed_with(EFAULT, "buf is NULL"), "write NULL");
    EXPECT(tessera_pread(w, NULL, 4, 0) == -1 && failed_with(EFAULT, "buf is NULL"),
           "read into NULL");
    EXPECT(tessera_pwrite(w, NULL, 0, 0) == 0, "zero-length write with NULL");
    EXPECT(tessera_pwrite(w, buf, 10, -1) == -1 && failed_with(EINVAL, "negative"), "offset -1");
    EXPECT(tessera_seek(w, 0, 7) == -1 && failed_with(EINVAL, "whence 7"), "whence 7");
    EXPECT(tessera_seek(w, -5, SEEK_SET) == -1 && errno == EINVAL, "seek to -5");
    EXPECT(tessera_read(w, buf, 1) == -1 && errno == EBADF, "read on a write-only handle");

    /* Primitives on ranges this process never wrote or attached. */
    memset(buf, 'x', sizeof buf);
    EXPECT(tessera_pwrite(w, buf, 64, 0) == 64, "pwrite");
    EXPECT(tessera_attach(w, 0, 100) == -1 && failed_with(EINVAL, "never written"),
           "attach of unwritten bytes");
    EXPECT(tessera_detach(w, 0, 10) == -1 && failed_with(EINVAL, "not attached"),
           "detach of unattached bytes");
    EXPECT(tessera_attach(w, 0, 64) == 0, "attach");
    EXPECT(tessera_query(w, 0, 64, NULL, 5) == -1 && failed_with(EFAULT, "out is NULL"),
           "query into NULL");
    EXPECT(tessera_query(w, 0, 64, NULL, 0) == 1, "query count only");
    struct tessera_extent ext[2];
    EXPECT(tessera_query(w, 10, 20, ext, 2) == 1 && ext[0].start == 10 && ext[0].end == 30,
           "query of a sub-range");
    EXPECT(tessera_lock(w, 0, 10, 5, 0) == -1 && failed_with(EINVAL, "kind 5"), "lock kind 5");
    EXPECT(tessera_close(w) == 0, "close");

    /* Locality: the 64 attached bytes are in this process's node's burst buffer. */
    struct tessera_location loc[4];
    int64_t seen_at = 0;
    EXPECT(tessera_locate(fs, path, 0, UINT64_MAX, loc, 4, &seen_at) == 1 && loc[0].start == 0 &&
               loc[0].end == 64 && loc[0].node >= 0 &&
               loc[0].residence == TESSERA_IN_BURST_BUFFER && loc[0].host[0] != 0 &&
               strchr(loc[0].addr, ':') != NULL && seen_at > 0,
           "locate of the written bytes");
    EXPECT(tessera_locate(fs, path, 8, 100, loc, 4, NULL) == 1 && loc[0].start == 8 &&
               loc[0].end == 64, "locate of a range, cut at the size");
    EXPECT(tessera_locate(fs, path, 0, 10, NULL, 2, NULL) == -1 && failed_with(EFAULT, "out"),
           "locate into NULL");
    EXPECT(tessera_locate(NULL, path, 0, 10, loc, 4, NULL) == -1 && errno == EINVAL,
           "locate without a client");
    EXPECT(tessera_locate(fs, dir, 0, 10, loc, 4, NULL) == -1 &&
               failed_with(EISDIR, "directory"), "locate of a directory");

    /* A failed call leaves the message; a successful one does not clear it. */
    EXPECT(tessera_unlink(fs, other) == -1 && errno == ENOENT, "unlink missing");
    EXPECT(tessera_stat(fs, path, &st) == 0 && st.size == 64 && st.mode == 0600, "stat file");
    EXPECT(strstr(tessera_errmsg(), "missing") != NULL, "message kept after success");

    /* The namespace calls. */
    char sub[4096], moved[4096];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(moved, sizeof moved, "%s/moved", dir);
    EXPECT(tessera_mkdir(fs, sub, 0755) == 0, "mkdir");
    EXPECT(tessera_mkdir(fs, sub, 0755) == -1 && errno == EEXIST, "mkdir twice");
    EXPECT(tessera_rename(fs, path, moved) == 0, "rename");
    EXPECT(tessera_stat(fs, path, &st) == -1 && errno == ENOENT, "old name gone");
    /* A batch: the renamed file (its inode may now live apart from its name) and a missing
     * path, which fails alone. */
    const char *batch[2] = {moved, other};
    struct tessera_placement placed[2];
    EXPECT(tessera_locate_many(fs, batch, 2, placed) == 0 && placed[0].error == 0 &&
               placed[0].size == 64 && placed[0].best_bytes == 64 && placed[0].hosts == 1 &&
               placed[0].best_host[0] != 0 && placed[1].error == ENOENT,
           "batch locate");
    EXPECT(tessera_locate_many(fs, NULL, 2, placed) == -1 && failed_with(EFAULT, "paths"),
           "batch locate of NULL paths");
    EXPECT(tessera_unlink(fs, moved) == 0, "unlink");
    EXPECT(tessera_rmdir(fs, sub) == 0, "rmdir");
    EXPECT(tessera_rmdir(fs, dir) == 0, "rmdir of the emptied dir");
    tessera_disconnect(fs);
    if (failures == 0) printf("errors: ok\n");
    return failures != 0;
}

static int do_write(const char *path, int rank, int nranks, tessera_model model) {
    tessera_client *fs = connect_or_die();
    tessera_file *f = tessera_open(fs, path, O_WRONLY | O_CREAT, 0644, model);
    if (!f) return fprintf(stderr, "capi: open: %s\n", tessera_errmsg()), 1;
    unsigned char *buf = malloc(XFER);
    for (int i = 0; i < COUNT; i++) {
        long long off = ((long long)i * nranks + rank) * XFER;
        for (int k = 0; k < XFER; k++) buf[k] = byte_at(off + k);
        if (tessera_pwrite(f, buf, XFER, off) != XFER)
            return fprintf(stderr, "capi: pwrite: %s\n", tessera_errmsg()), 1;
    }
    int rc = 0;
    switch (model) {
    case TESSERA_MODEL_COMMIT: rc = tessera_commit(f); break;
    case TESSERA_MODEL_SESSION: rc = tessera_session_close(f); break;
    case TESSERA_MODEL_MPIIO: rc = tessera_sync(f); break;
    default: break;
    }
    if (rc != 0) return fprintf(stderr, "capi: publish: %s\n", tessera_errmsg()), 1;
    printf("written\n");
    fflush(stdout);
    free(buf);
    /* Stays open until told to go: readers must see the data through the model's call, not
     * through close. */
    char line[16];
    if (fgets(line, sizeof line, stdin) == NULL) {}
    tessera_close(f);
    tessera_disconnect(fs);
    return 0;
}

static int do_read(const char *path, int nranks, tessera_model model) {
    tessera_client *fs = connect_or_die();
    tessera_file *f = tessera_open(fs, path, O_RDONLY, 0, model);
    if (!f) return fprintf(stderr, "capi: open: %s\n", tessera_errmsg()), 1;
    if (model == TESSERA_MODEL_MPIIO && tessera_sync(f) != 0)
        return fprintf(stderr, "capi: sync: %s\n", tessera_errmsg()), 1;
    long long size = (long long)nranks * XFER * COUNT;
    struct tessera_stat st;
    if (tessera_fstat(f, &st) != 0 || (long long)st.size != size)
        return fprintf(stderr, "capi: size %" PRIu64 ", expected %lld\n", st.size, size), 1;
    unsigned char *buf = malloc(size);
    long long got = 0;
    while (got < size) {
        ssize_t n = tessera_read(f, buf + got, size - got);
        if (n <= 0) return fprintf(stderr, "capi: read at %lld: %s\n", got, tessera_errmsg()), 1;
        got += n;
    }
    for (long long k = 0; k < size; k++)
        if (buf[k] != byte_at(k))
            return fprintf(stderr, "capi: byte %lld is %u, expected %u\n", k, buf[k], byte_at(k)), 1;
    if (tessera_read(f, buf, 1) != 0) return fprintf(stderr, "capi: data past the end\n"), 1;
    printf("verified %lld bytes\n", size);
    free(buf);
    tessera_close(f);
    tessera_disconnect(fs);
    return 0;
}

static int do_hold(const char *path) {
    tessera_client *fs = connect_or_die();
    tessera_file *f = tessera_open(fs, path, O_RDWR | O_CREAT, 0644, TESSERA_MODEL_SESSION);
    if (!f || tessera_lock(f, 0, 100, TESSERA_LOCK_EXCLUSIVE, 0) != 0)
        return fprintf(stderr, "capi: hold: %s\n", tessera_errmsg()), 1;
    if (tessera_pwrite(f, "held", 4, 0) != 4) return 1;
    printf("locked\n");
    fflush(stdout);
    char line[16];
    if (fgets(line, sizeof line, stdin) == NULL) {}
    return tessera_close(f) != 0;
}

static int do_trylock(const char *path, const char *pid) {
    tessera_client *fs = connect_or_die();
    tessera_file *f = tessera_open(fs, path, O_RDWR, 0, TESSERA_MODEL_SESSION);
    if (!f) return fprintf(stderr, "capi: open: %s\n", tessera_errmsg()), 1;
    EXPECT(tessera_lock(f, 50, 10, TESSERA_LOCK_SHARED, 0) == -1 && failed_with(EAGAIN, pid),
           "conflicting lock");
    EXPECT(tessera_lock(f, 100, 10, TESSERA_LOCK_EXCLUSIVE, 0) == 0, "disjoint lock");
    printf("refused\n");
    fflush(stdout);
    /* Waits until the holder closes, then sees what it wrote under the lock. */
    EXPECT(tessera_lock(f, 0, 100, TESSERA_LOCK_EXCLUSIVE, 1) == 0, "blocking lock");
    char got[5] = {0};
    EXPECT(tessera_pread(f, got, 4, 0) == 4 && strcmp(got, "held") == 0, "read '%s'", got);
    EXPECT(tessera_unlock(f, 0, 0) == 0, "unlock");
    tessera_close(f);
    tessera_disconnect(fs);
    if (failures == 0) printf("waited\n");
    return failures != 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "errors") == 0) return do_errors(argv[2]);
    if (argc == 6 && strcmp(argv[1], "write") == 0)
        return do_write(argv[2], atoi(argv[3]), atoi(argv[4]), model_arg(argv[5]));
    if (argc == 5 && strcmp(argv[1], "read") == 0)
        return do_read(argv[2], atoi(argv[3]), model_arg(argv[4]));
    if (argc == 3 && strcmp(argv[1], "hold") == 0) return do_hold(argv[2]);
    if (argc == 4 && strcmp(argv[1], "trylock") == 0) return do_trylock(argv[2], argv[3]);
    fprintf(stderr, "usage: capi errors DIR | write FILE RANK NRANKS MODEL | read FILE NRANKS "
                    "MODEL | hold FILE | trylock FILE PID\n");
    return 2;
}
