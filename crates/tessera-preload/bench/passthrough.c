/* Pass-through cost of the interposer: open, read 4 KiB, close of a local file, N times;
 * prints microseconds per iteration. Run with and without LD_PRELOAD (scripts/bench-preload.sh). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[2]); char buf[4096]; struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) { int fd = open(argv[1], O_RDONLY); if (fd < 0 || read(fd, buf, sizeof buf) < 0) return 1; close(fd); }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1000.0);
    return 0;
}
