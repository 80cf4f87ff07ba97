/* A C program on Tessera's C API: write a strided checkpoint, publish it, see where its
 * bytes live, read it back, and flush it to the parallel file system.
 *
 *     cc -o example example.c $(pkg-config --cflags --libs tessera)
 *     ./example /tessera/example      (the instance of `tessera start`; TESSERA_INSTANCE names another)
 *
 * Every failure prints tessera_errmsg(), which says what was wrong and how to fix it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>

#define BLOCK 4096
#define BLOCKS 64

static int fail(const char *what) {
    fprintf(stderr, "example: %s: %s\n", what, tessera_errmsg());
    return 1;
}

static unsigned char byte_at(uint64_t off) { return (unsigned char)((off * 31 + 11) % 253); }

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tessera/example";
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt", dir);

    tessera_client *fs = tessera_connect(NULL, -1);
    if (!fs) return fail("connect");
    if (tessera_mkdir(fs, dir, 0755) != 0 && errno != EEXIST) return fail("mkdir");

    /* Write every other block (a strided pattern), then the rest, under the commit model. */
    tessera_file *f = tessera_open(fs, path, O_RDWR | O_CREAT | O_TRUNC, 0644,
                                   TESSERA_MODEL_COMMIT);
    if (!f) return fail("open for writing");
    unsigned char buf[BLOCK];
    for (int pass = 0; pass < 2; pass++) {
        for (int b = pass; b < BLOCKS; b += 2) {
            uint64_t off = (uint64_t)b * BLOCK;
            for (int k = 0; k < BLOCK; k++) buf[k] = byte_at(off + k);
            if (tessera_pwrite(f, buf, BLOCK, (int64_t)off) != BLOCK) return fail("pwrite");
        }
    }
    if (tessera_commit(f) != 0) return fail("commit");

    /* Who holds the bytes now: this process, on its node. */
    struct tessera_extent ext[8];
    int64_t n = tessera_query_file(f, ext, 8);
    if (n < 0) return fail("query");
    for (int64_t i = 0; i < n && i < 8; i++)
        printf("extent [%" PRIu64 ", %" PRIu64 ") on node %u, client %" PRIu64 "\n", ext[i].start,
               ext[i].end, ext[i].node, ext[i].client);
    if (tessera_close(f) != 0) return fail("close");

    /* Read it back through a session handle, sequentially. */
    f = tessera_open(fs, path, O_RDONLY, 0, TESSERA_MODEL_SESSION);
    if (!f) return fail("open for reading");
    struct tessera_stat st;
    if (tessera_fstat(f, &st) != 0) return fail("fstat");
    printf("size %" PRIu64 ", model %s\n", st.size, tessera_model_name(tessera_file_model(f)));
    uint64_t off = 0;
    for (;;) {
        ssize_t got = tessera_read(f, buf, sizeof buf);
        if (got < 0) return fail("read");
        if (got == 0) break;
        for (ssize_t k = 0; k < got; k++)
            if (buf[k] != byte_at(off + k)) {
                fprintf(stderr, "example: byte %" PRIu64 " is wrong\n", off + k);
                return 1;
            }
        off += got;
    }
    if (off != (uint64_t)BLOCK * BLOCKS) {
        fprintf(stderr, "example: read %" PRIu64 " bytes\n", off);
        return 1;
    }
    printf("verified %" PRIu64 " bytes\n", off);

    /* To the parallel file system, atomically. */
    int64_t flushed = tessera_flush_file(f);
    if (flushed < 0) return fail("flush");
    printf("flushed %" PRId64 " bytes\n", flushed);
    if (tessera_close(f) != 0) return fail("close");

    /* A mistake, and what the library says about it. */
    if (!tessera_open(fs, "/tessera/no/such/dir/file", O_RDONLY, 0, TESSERA_MODEL_DEFAULT))
        printf("expected error: %s\n", tessera_errmsg());
    tessera_disconnect(fs);
    return 0;
}
