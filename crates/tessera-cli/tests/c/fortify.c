/* Built with -O2 -D_FORTIFY_SOURCE=2: each call below compiles to glibc's checked entry point
 * (__read_chk, __pread64_chk, ...), given the size of an 8-byte buffer. Asking for N bytes
 * where N > 8 must abort with "*** buffer overflow detected ***"; N <= 8 must work.
 *
 *   fortify FUNCTION PATH N
 *     read, pread, pread64: of the file at PATH; readlink, readlinkat: of the link at PATH;
 *     getcwd, getwd: in the directory PATH; realpath: of PATH into the 8-byte buffer.
 */
#define _GNU_SOURCE
#define _LARGEFILE64_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fortify FUNCTION PATH N\n");
        return 2;
    }
    const char *fn = argv[1], *path = argv[2];
    size_t n = strtoul(argv[3], NULL, 10);
    char buf[8];
    long r;
    if (!strcmp(fn, "read") || !strcmp(fn, "pread") || !strcmp(fn, "pread64")) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            perror("open");
            return 3;
        }
        if (!strcmp(fn, "read"))
            r = read(fd, buf, n);
        else if (!strcmp(fn, "pread"))
            r = pread(fd, buf, n, 0);
        else
            r = pread64(fd, buf, n, 0);
    } else if (!strcmp(fn, "readlink")) {
        r = readlink(path, buf, n);
    } else if (!strcmp(fn, "readlinkat")) {
        r = readlinkat(AT_FDCWD, path, buf, n);
    } else if (!strcmp(fn, "getcwd") || !strcmp(fn, "getwd")) {
        if (chdir(path) != 0) {
            perror("chdir");
            return 3;
        }
        char *p;
        if (!strcmp(fn, "getcwd")) {
            p = getcwd(buf, n);
        } else {
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
            p = getwd(buf);
        }
        r = p ? (long)strlen(p) : -1;
    } else if (!strcmp(fn, "realpath")) {
        /* The buffer is smaller than PATH_MAX whatever N says: always an overflow. */
        char *p = realpath(path, buf);
        r = p ? 0 : -1;
    } else {
        fprintf(stderr, "unknown function %s\n", fn);
        return 2;
    }
    printf("%s returned %ld\n", fn, r);
    return 0;
}
