/* An unmodified POSIX program for the interposer tests.
 *   strided write FILE RANK NRANKS XFER COUNT   N-1 strided pwrite of this rank's blocks
 *   strided verify FILE NRANKS XFER COUNT        read the whole file back and check every byte
 *   strided stdio FILE                           fopen/fprintf/fwrite/fseek/ftell/fread/fclose
 * Exit status 0 on success; a message on stderr otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char byte_at(long long off) { return (unsigned char)((off * 131 + 7) % 251); }

static int fail(const char *what) {
    fprintf(stderr, "strided: %s: %s\n", what, strerror(errno));
    return 1;
}

static int do_write(const char *path, int rank, int nranks, long xfer, long count) {
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return fail("open");
    unsigned char *buf = malloc(xfer);
    for (long i = 0; i < count; i++) {
        long long off = ((long long)i * nranks + rank) * xfer;
        for (long k = 0; k < xfer; k++) buf[k] = byte_at(off + k);
        if (pwrite(fd, buf, xfer, off) != xfer) return fail("pwrite");
    }
    if (fsync(fd) != 0) return fail("fsync");
    if (close(fd) != 0) return fail("close");
    free(buf);
    return 0;
}

static int do_verify(const char *path, int nranks, long xfer, long count) {
    long long size = (long long)nranks * xfer * count;
    struct stat st;
    if (stat(path, &st) != 0) return fail("stat");
    if (st.st_size != size) {
        fprintf(stderr, "strided: size %lld, expected %lld\n", (long long)st.st_size, size);
        return 1;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail("open");
    unsigned char buf[65536];
    long long off = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) return fail("read");
        if (n == 0) break;
        for (ssize_t k = 0; k < n; k++)
            if (buf[k] != byte_at(off + k)) {
                fprintf(stderr, "strided: byte %lld is %u, expected %u\n", off + k, buf[k], byte_at(off + k));
                return 1;
            }
        off += n;
    }
    if (off != size) {
        fprintf(stderr, "strided: read %lld bytes, expected %lld\n", off, size);
        return 1;
    }
    return close(fd) == 0 ? 0 : fail("close");
}

static int do_stdio(const char *path) {
    FILE *f = fopen(path, "w+");
    if (!f) return fail("fopen");
    for (int i = 0; i < 1000; i++) fprintf(f, "line %d\n", i);
    long end = ftell(f);
    if (fseek(f, 0, SEEK_SET) != 0) return fail("fseek");
    char line[64];
    if (!fgets(line, sizeof line, f) || strcmp(line, "line 0\n") != 0) {
        fprintf(stderr, "strided: first line is '%s'\n", line);
        return 1;
    }
    if (fseek(f, -9, SEEK_END) != 0 || !fgets(line, sizeof line, f) || strcmp(line, "line 999\n") != 0) {
        fprintf(stderr, "strided: last line is '%s'\n", line);
        return 1;
    }
    int fd = fileno(f);
    struct stat st;
    if (fflush(f) != 0 || fstat(fd, &st) != 0) return fail("fflush/fstat");
    if (st.st_size != end) {
        fprintf(stderr, "strided: fstat size %lld, ftell said %ld\n", (long long)st.st_size, end);
        return 1;
    }
    if (fclose(f) != 0) return fail("fclose");
    /* Append mode writes at the end, whatever the position. */
    f = fopen(path, "a");
    if (!f) return fail("fopen a");
    fputs("tail\n", f);
    if (fclose(f) != 0) return fail("fclose a");
    f = fopen(path, "r");
    if (!f) return fail("fopen r");
    char *all = malloc(end + 64);
    size_t n = fread(all, 1, end + 64, f);
    fclose(f);
    if ((long)n != end + 5 || memcmp(all + end, "tail\n", 5) != 0) {
        fprintf(stderr, "strided: appended file has %zu bytes\n", n);
        return 1;
    }
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "write"))
        return do_write(argv[2], atoi(argv[3]), atoi(argv[4]), atol(argv[5]), atol(argv[6]));
    if (argc == 6 && !strcmp(argv[1], "verify"))
        return do_verify(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]));
    if (argc == 3 && !strcmp(argv[1], "stdio")) return do_stdio(argv[2]);
    fprintf(stderr, "usage: strided write FILE RANK NRANKS XFER COUNT | verify FILE NRANKS XFER COUNT | stdio FILE\n");
    return 2;
}
