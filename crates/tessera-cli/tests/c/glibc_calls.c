/* glibc functions that reach files through glibc's internal calls, each used as programs use
 * it, in the directory given: one line per call with its result, so a run on the local disk and
 * a run in Tessera can be compared line by line.
 *
 *   glibc_calls DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

static char path_buf[8][4096];
static int next_buf;

static const char *at(const char *dir, const char *name) {
    char *p = path_buf[next_buf++ % 8];
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

static void result(const char *what, int r) {
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

static long mtime(const char *p, int follow) {
    struct stat st;
    if ((follow ? stat(p, &st) : lstat(p, &st)) != 0) return -errno;
    return (long)st.st_mtime;
}

static void touch(const char *p, const char *text) {
    FILE *f = fopen(p, "w");
    if (!f) {
        printf("fopen %s: %s\n", p, strerror(errno));
        exit(3);
    }
    fputs(text, f);
    fclose(f);
}

static void show_file(const char *what, const char *p) {
    char buf[256] = {0};
    int fd = open(p, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    printf("%s: %s\n", what, n >= 0 ? buf : strerror(errno));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: glibc_calls DIR\n");
        return 2;
    }
    const char *d = argv[1];
    setvbuf(stdout, NULL, _IONBF, 0);

    /* remove: a file, then a directory, then what is no longer there. */
    touch(at(d, "f"), "x");
    if (mkdir(at(d, "sub"), 0755) != 0) return 3;
    result("remove file", remove(at(d, "f")));
    result("remove dir", remove(at(d, "sub")));
    result("remove missing", remove(at(d, "f")));

    /* The time setters of glibc's that call utimensat inside. */
    touch(at(d, "t"), "x");
    struct utimbuf ub = {.actime = 1000000000, .modtime = 1100000000};
    result("utime", utime(at(d, "t"), &ub));
    printf("mtime after utime: %ld\n", mtime(at(d, "t"), 1));
    struct timeval tv[2] = {{1200000000, 5}, {1300000000, 7}};
    result("utimes", utimes(at(d, "t"), tv));
    printf("mtime after utimes: %ld\n", mtime(at(d, "t"), 1));
    int fd = open(at(d, "t"), O_RDONLY);
    tv[1].tv_sec = 1400000000;
    result("futimes", futimes(fd, tv));
    close(fd);
    printf("mtime after futimes: %ld\n", mtime(at(d, "t"), 1));
    tv[1].tv_sec = 1500000000;
    result("futimesat", futimesat(AT_FDCWD, at(d, "t"), tv));
    printf("mtime after futimesat: %ld\n", mtime(at(d, "t"), 1));
    if (symlink("t", at(d, "lt")) != 0) return 3;
    tv[1].tv_sec = 1600000000;
    result("lutimes", lutimes(at(d, "lt"), tv));
    printf("link mtime after lutimes: %ld, target's %ld\n", mtime(at(d, "lt"), 0), mtime(at(d, "t"), 1));
    tv[0].tv_usec = 2000000;
    result("utimes with a bad tv_usec", utimes(at(d, "t"), tv));

    /* lchmod: a file's mode changes; a link has none (glibc's answer on Linux). */
    result("lchmod of a file", lchmod(at(d, "t"), 0600));
    struct stat lst;
    printf("mode after lchmod: %o\n", stat(at(d, "t"), &lst) == 0 ? lst.st_mode & 0777 : 0);
    result("lchmod of a link", lchmod(at(d, "lt"), 0600));

    /* mkdtemp: a private directory with a fresh name. */
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/tmpXXXXXX", d);
    char *made = mkdtemp(tmpl);
    struct stat st;
    printf("mkdtemp: %s", made ? "ok" : strerror(errno));
    if (made && stat(made, &st) == 0)
        printf(", a directory: %s, mode %o, X replaced: %s", S_ISDIR(st.st_mode) ? "yes" : "no",
               st.st_mode & 0777, strstr(made, "XXXXXX") ? "no" : "yes");
    printf("\n");
    snprintf(tmpl, sizeof tmpl, "%s/badtemplate", d);
    printf("mkdtemp without X: %s\n", mkdtemp(tmpl) ? "ok" : strerror(errno));

    /* freopen: stdout into a file, and another stream onto a file. */
    fflush(stdout);
    int saved = dup(1);
    if (!freopen(at(d, "out"), "w", stdout)) {
        dprintf(saved, "freopen stdout: %s\n", strerror(errno));
        return 3;
    }
    printf("into the file\n");
    fflush(stdout);
    dup2(saved, 1);
    if (!freopen("/dev/stdout", "w", stdout)) return 3;
    setvbuf(stdout, NULL, _IONBF, 0);
    show_file("freopen stdout wrote", at(d, "out"));
    FILE *f = fopen(at(d, "first"), "w");
    FILE *g = freopen(at(d, "second"), "w", f);
    printf("freopen a stream: %s\n", g ? "ok" : errno == ENOTSUP ? "refused" : strerror(errno));
    fputs("second", g ? g : f);
    fclose(g ? g : f);

    /* The working directory by name. */
    if (chdir(d) != 0) return 3;
    char *cwd = get_current_dir_name();
    printf("get_current_dir_name is the directory: %s\n", cwd && !strcmp(cwd, d) ? "yes" : "no");
    free(cwd);
    char wd[4096];
    printf("getcwd is the directory: %s\n", getcwd(wd, sizeof wd) && !strcmp(wd, d) ? "yes" : "no");

    /* lockf: take, test, release. */
    fd = open(at(d, "t"), O_RDWR);
    result("lockf F_TLOCK", lockf(fd, F_TLOCK, 0));
    result("lockf F_TEST", lockf(fd, F_TEST, 0));
    result("lockf F_ULOCK", lockf(fd, F_ULOCK, 0));
    result("lockf bad command", lockf(fd, 99, 0));

    /* pathconf and the syncs. */
    printf("pathconf NAME_MAX: %ld\n", pathconf(at(d, "t"), _PC_NAME_MAX));
    printf("fpathconf NAME_MAX: %ld\n", fpathconf(fd, _PC_NAME_MAX));
    errno = 0;
    long r = pathconf(at(d, "missing"), _PC_NAME_MAX);
    printf("pathconf of a missing file: %ld %s\n", r, strerror(errno));
    result("syncfs", syncfs(fd));
    result("sync_file_range", sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
    close(fd);

    /* splice between a pipe and a file, both ways. */
    int p[2];
    if (pipe(p) != 0) return 3;
    if (write(p[1], "spliced", 7) != 7) return 3;
    fd = open(at(d, "sp"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    printf("splice pipe to file: %zd\n", splice(p[0], NULL, fd, NULL, 7, 0));
    loff_t off = 0;
    printf("splice file to pipe: %zd\n", splice(fd, &off, p[1], NULL, 7, 0));
    char got[8] = {0};
    printf("read back %zd: %s, offset %ld\n", read(p[0], got, 7), got, (long)off);
    close(fd);

    /* A FIFO: made on the local disk, refused with a reason in Tessera (never ENOENT). */
    int fifo = mkfifo(at(d, "fifo"), 0644);
    printf("mkfifo: %s\n", fifo == 0 ? "ok" : errno == ENOENT ? "ENOENT" : "refused");
    return 0;
}
