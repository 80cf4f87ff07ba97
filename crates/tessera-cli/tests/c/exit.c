/* Writes to a Tessera file and ends without closing it, in one of several ways.
 *
 *   exit PATH MODE     MODE: return | exit | _exit | stdio | fork | kill
 *
 * Lines are 10 bytes ("line 0042\n"); 100 of them, except `fork`: 4 children write 50 each
 * through the descriptor they inherited, with pwrite at their own offsets. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void line(char *buf, int i) { snprintf(buf, 11, "line %04d\n", i); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PATH return|exit|_exit|stdio|fork|kill\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *mode = argv[2];
    char buf[16];
    if (strcmp(mode, "stdio") == 0) {
        FILE *f = fopen(path, "w");
        if (!f) { perror("fopen"); return 1; }
        for (int i = 0; i < 100; i++) fprintf(f, "line %04d\n", i);
        return 0; /* exit flushes the stream; nobody calls fclose */
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    if (strcmp(mode, "fork") == 0) {
        for (int c = 0; c < 4; c++) {
            pid_t p = fork();
            if (p < 0) { perror("fork"); return 1; }
            if (p == 0) {
                for (int l = 0; l < 50; l++) {
                    line(buf, c * 50 + l);
                    if (pwrite(fd, buf, 10, (off_t)(c * 50 + l) * 10) != 10) { perror("pwrite"); _exit(1); }
                }
                if (c % 2) _exit(0);
                exit(0);
            }
        }
        int st, bad = 0;
        while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        return bad;
    }
    for (int i = 0; i < 100; i++) {
        line(buf, i);
        if (write(fd, buf, 10) != 10) { perror("write"); return 1; }
    }
    if (strcmp(mode, "exit") == 0) exit(0);
    if (strcmp(mode, "_exit") == 0) _exit(0);
    if (strcmp(mode, "kill") == 0) raise(SIGKILL);
    return 0;
}
