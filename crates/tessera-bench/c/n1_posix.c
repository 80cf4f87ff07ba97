/* One process of an N-1 strided checkpoint through plain POSIX calls, for comparing the ways
 * a program reaches Tessera (interposer, FUSE mount) with direct I/O on the local disk.
 *
 *   n1_posix write|read PATH RANK PROCS BLOCK BLOCKS [direct]
 *
 * write: block i of this rank goes to offset (i * PROCS + RANK) * BLOCK, then fsync and close.
 * read:  the blocks of rank (RANK + 1) % PROCS are read back and checked (a restart on shifted
 *        ranks). With `direct`, the file is opened O_DIRECT and the buffer page-aligned. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pattern(long long owner, long long block, long long i) {
    return (unsigned char)(owner * 131 + block * 7 + i);
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: n1_posix write|read PATH RANK PROCS BLOCK BLOCKS [direct]\n");
        return 2;
    }
    int writing = strcmp(argv[1], "write") == 0;
    const char *path = argv[2];
    long long rank = atoll(argv[3]), procs = atoll(argv[4]);
    size_t block = (size_t)atoll(argv[5]);
    long long blocks = atoll(argv[6]);
    int direct = argc > 7 && strcmp(argv[7], "direct") == 0;
    int flags = writing ? O_WRONLY | O_CREAT : O_RDONLY;
    if (direct)
        flags |= O_DIRECT;
    int fd = open(path, flags, 0644);
    if (fd < 0) {
        fprintf(stderr, "n1_posix: open %s: %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char *buf;
    if (posix_memalign((void **)&buf, 4096, block) != 0)
        return 1;
    long long owner = writing ? rank : (rank + 1) % procs;
    for (long long b = 0; b < blocks; b++) {
        off_t at = (off_t)(b * procs + owner) * (off_t)block;
        if (writing) {
            for (size_t i = 0; i < block; i++)
                buf[i] = pattern(owner, b, (long long)i);
            if (pwrite(fd, buf, block, at) != (ssize_t)block) {
                fprintf(stderr, "n1_posix: pwrite at %lld: %s\n", (long long)at, strerror(errno));
                return 1;
            }
        } else {
            if (pread(fd, buf, block, at) != (ssize_t)block) {
                fprintf(stderr, "n1_posix: pread at %lld: %s\n", (long long)at, strerror(errno));
                return 1;
            }
            for (size_t i = 0; i < block; i += 4093)
                if (buf[i] != pattern(owner, b, (long long)i)) {
                    fprintf(stderr, "n1_posix: wrong byte at %lld\n", (long long)at + (long long)i);
                    return 1;
                }
        }
    }
    if (writing && fsync(fd) != 0) {
        fprintf(stderr, "n1_posix: fsync: %s\n", strerror(errno));
        return 1;
    }
    if (close(fd) != 0) {
        fprintf(stderr, "n1_posix: close: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
