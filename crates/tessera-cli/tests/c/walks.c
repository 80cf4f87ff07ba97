/* The glibc functions that resolve and walk paths internally, called as programs call them.
 * Output is one line per result, with the tree's root replaced by "ROOT", so a run on a local
 * tree and a run on the same tree in Tessera print the same text.
 *
 *   walks realpath PATH...         realpath and canonicalize_file_name of each path
 *   walks scandir DIR              scandir with a filter (no "x*") and alphasort; scandirat
 *   walks glob PATTERN FLAGS       glob (FLAGS: letters m=GLOB_MARK o=GLOB_ONLYDIR
 *                                  n=GLOB_NOCHECK s=GLOB_NOSORT b=GLOB_BRACE)
 *   walks nftw DIR FLAGS           nftw (FLAGS: letters p=PHYS d=DEPTH c=CHDIR
 *                                  a=ACTIONRETVAL, skipping "skip*" subtrees and the
 *                                  siblings after "stop_here")
 *   walks ftw DIR                  ftw
 *   walks pfind DIR                what pfind does: realpath, then opendir/readdir, d_type,
 *                                  lstat of each entry
 *   walks fts OPTIONS ROOT...      fts_open/fts_read/fts_close, entries sorted by name
 *                                  (OPTIONS: letters P=PHYSICAL L=LOGICAL C=COMFOLLOW
 *                                  N=NOSTAT S=SEEDOT X=XDEV), "skip*" directories skipped
 *                                  with fts_set, fts_children of the first root
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;
static size_t root_len;
static int action_retval;

/* `path` with the root replaced by "ROOT" (in one of four buffers: a line shows two). */
static const char *shown(const char *path) {
    static char bufs[4][PATH_MAX + 8];
    static int next;
    char *buf = bufs[next++ % 4];
    if (root_len && strncmp(path, root, root_len) == 0) {
        snprintf(buf, PATH_MAX + 8, "ROOT%s", path + root_len);
        return buf;
    }
    return path;
}

static int keep(const struct dirent *e) { return e->d_name[0] != 'x'; }

static int visit(const char *path, const struct stat *st, int type, struct FTW *f) {
    const char *kind[] = {"F", "D", "DNR", "NS", "SL", "DP", "SLN"};
    long size = (type == FTW_F) ? (long)st->st_size : -1;
    printf("%s %d %s base=%s size=%ld", kind[type], f->level, shown(path), path + f->base, size);
    if (type == FTW_F && getenv("WALKS_CHDIR")) {
        /* Under FTW_CHDIR the working directory is the entry's: its name opens. */
        int fd = open(path + f->base, O_RDONLY);
        printf(" open-by-name=%s", fd >= 0 ? "ok" : strerror(errno));
        if (fd >= 0) close(fd);
    }
    printf("\n");
    if (action_retval) {
        if (strncmp(path + f->base, "skip", 4) == 0) return FTW_SKIP_SUBTREE;
        if (strcmp(path + f->base, "stop_here") == 0) return FTW_SKIP_SIBLINGS;
    }
    return 0;
}

static int visit_old(const char *path, const struct stat *st, int type) {
    const char *kind[] = {"F", "D", "DNR", "NS", "SL", "DP", "SLN"};
    printf("%s %s\n", kind[type], shown(path));
    (void)st;
    return 0;
}

static void pfind(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("opendir %s: %s\n", shown(dir), strerror(errno));
        return;
    }
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0) exit(3);
        struct stat st;
        if (lstat(p, &st) != 0) {
            printf("lstat %s: %s\n", shown(p), strerror(errno));
            free(p);
            continue;
        }
        char t = e->d_type == DT_DIR ? 'd' : e->d_type == DT_REG ? 'f' : e->d_type == DT_LNK ? 'l' : '?';
        char s = S_ISDIR(st.st_mode) ? 'd' : S_ISREG(st.st_mode) ? 'f' : S_ISLNK(st.st_mode) ? 'l' : '?';
        /* Sorted at the end: directory order differs between file systems. */
        char *line;
        if (asprintf(&line, "%c%c %s %ld", t, s, shown(p), S_ISREG(st.st_mode) ? (long)st.st_size : 0L) < 0) exit(3);
        names = realloc(names, (n + 1) * sizeof *names);
        names[n++] = line;
        if (e->d_type == DT_DIR) pfind(p);
        free(p);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        puts(names[i]);
        free(names[i]);
    }
    free(names);
}

static int by_name(const FTSENT **a, const FTSENT **b) {
    return strcmp((*a)->fts_name, (*b)->fts_name);
}

static int fts_walk(const char *opts, char **roots) {
    int options = 0;
    if (strchr(opts, 'P')) options |= FTS_PHYSICAL;
    if (strchr(opts, 'L')) options |= FTS_LOGICAL;
    if (strchr(opts, 'C')) options |= FTS_COMFOLLOW;
    if (strchr(opts, 'N')) options |= FTS_NOSTAT;
    if (strchr(opts, 'S')) options |= FTS_SEEDOT;
    if (strchr(opts, 'X')) options |= FTS_XDEV;
    FTS *fts = fts_open(roots, options | FTS_NOCHDIR, by_name);
    if (!fts) {
        printf("fts_open: %s\n", strerror(errno));
        return 0;
    }
    const char *info[] = {"?", "D", "DC", "DEFAULT", "DNR", "DOT", "DP", "ERR", "F", "INIT", "NS", "NSOK", "SL", "SLNONE", "W"};
    /* The roots' entries, before the first read. */
    for (FTSENT *c = fts_children(fts, 0); c; c = c->fts_link)
        printf("root child %s\n", info[c->fts_info]);
    FTSENT *e;
    int first = 1;
    while ((e = fts_read(fts))) {
        long size = e->fts_info == FTS_F ? (long)e->fts_statp->st_size : -1;
        printf("%s %d %s name=%s size=%ld errno=%s parent-level=%d", info[e->fts_info], e->fts_level,
               shown(e->fts_path), e->fts_name, size, e->fts_errno ? strerror(e->fts_errno) : "0",
               e->fts_parent ? e->fts_parent->fts_level : -9);
        /* glibc's entries share one path buffer: the ancestor is named by its level. */
        if (e->fts_info == FTS_DC) printf(" cycle-level=%d", e->fts_cycle->fts_level);
        printf("\n");
        if (e->fts_info == FTS_D && first) {
            first = 0;
            int n = 0;
            /* Skipped before the walk reaches them: glibc passes them over. */
            for (FTSENT *c = fts_children(fts, 0); c; c = c->fts_link, n++)
                if (strncmp(c->fts_name, "skip", 4) == 0) fts_set(fts, c, FTS_SKIP);
            printf("children of the first directory: %d\n", n);
        }
        if (e->fts_info == FTS_D && strncmp(e->fts_name, "skip", 4) == 0) fts_set(fts, e, FTS_SKIP);
        if (e->fts_info == FTS_SL && strcmp(e->fts_name, "la") == 0) fts_set(fts, e, FTS_FOLLOW);
    }
    printf("fts_read end: %s\n", errno ? strerror(errno) : "0");
    printf("fts_close: %d\n", fts_close(fts));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: walks MODE ARGS (see the source)\n");
        return 2;
    }
    root = getenv("WALKS_ROOT");
    root_len = root ? strlen(root) : 0;
    const char *mode = argv[1];
    if (!strcmp(mode, "realpath")) {
        for (int i = 2; i < argc; i++) {
            char buf[PATH_MAX];
            char *r = realpath(argv[i], buf);
            printf("realpath %s: %s\n", shown(argv[i]), r ? shown(r) : strerror(errno));
            char *c = canonicalize_file_name(argv[i]);
            printf("canonicalize %s: %s\n", shown(argv[i]), c ? shown(c) : strerror(errno));
            free(c);
        }
        return 0;
    }
    if (!strcmp(mode, "scandir")) {
        struct dirent **list;
        int n = scandir(argv[2], &list, keep, alphasort);
        if (n < 0) {
            printf("scandir: %s\n", strerror(errno));
        } else {
            printf("scandir %d\n", n);
            for (int i = 0; i < n; i++) {
                printf("%s %d\n", list[i]->d_name, list[i]->d_type);
                free(list[i]);
            }
            free(list);
        }
        n = scandirat(AT_FDCWD, argv[2], &list, NULL, versionsort);
        if (n < 0) {
            printf("scandirat: %s\n", strerror(errno));
        } else {
            printf("scandirat %d\n", n);
            for (int i = 0; i < n; i++) free(list[i]);
            free(list);
        }
        return 0;
    }
    if (!strcmp(mode, "glob")) {
        int flags = 0;
        const char *f = argc > 3 ? argv[3] : "";
        if (strchr(f, 'm')) flags |= GLOB_MARK;
        if (strchr(f, 'o')) flags |= GLOB_ONLYDIR;
        if (strchr(f, 'n')) flags |= GLOB_NOCHECK;
        if (strchr(f, 'b')) flags |= GLOB_BRACE;
        glob_t g;
        int r = glob(argv[2], flags, NULL, &g);
        printf("glob %s: %d\n", shown(argv[2]), r);
        if (r == 0)
            for (size_t i = 0; i < g.gl_pathc; i++) printf("%s\n", shown(g.gl_pathv[i]));
        if (r == 0 || r == GLOB_NOMATCH) globfree(&g);
        return 0;
    }
    if (!strcmp(mode, "nftw")) {
        int flags = 0;
        const char *f = argc > 3 ? argv[3] : "";
        if (strchr(f, 'p')) flags |= FTW_PHYS;
        if (strchr(f, 'd')) flags |= FTW_DEPTH;
        if (strchr(f, 'c')) flags |= FTW_CHDIR;
        if (strchr(f, 'a')) flags |= FTW_ACTIONRETVAL, action_retval = 1;
        char before[PATH_MAX], after[PATH_MAX];
        if (!getcwd(before, sizeof before)) return 3;
        int r = nftw(argv[2], visit, 16, flags);
        printf("nftw: %d%s%s\n", r, r < 0 ? " " : "", r < 0 ? strerror(errno) : "");
        if (!getcwd(after, sizeof after)) return 3;
        printf("cwd kept: %s\n", strcmp(before, after) ? "no" : "yes");
        return 0;
    }
    if (!strcmp(mode, "ftw")) {
        int r = ftw(argv[2], visit_old, 16);
        printf("ftw: %d\n", r);
        return 0;
    }
    if (!strcmp(mode, "pfind")) {
        char *start = realpath(argv[2], NULL);
        if (!start) {
            printf("realpath %s: %s\n", shown(argv[2]), strerror(errno));
            return 1;
        }
        printf("start %s\n", shown(start));
        pfind(start);
        free(start);
        return 0;
    }
    if (!strcmp(mode, "fts")) return fts_walk(argv[2], argv + 3);
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
