/* Calls that cannot act on a file in Tessera, each given a path or descriptor of one that
 * exists: one line per call, "NAME ERRNO-NAME" (or "NAME ok"), for the test to check that none
 * answers ENOENT and each answers what docs/interposer.md says.
 *
 *   refusals FILE DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/swap.h>
#include <unistd.h>

static const char *name_of(int e) {
    switch (e) {
    case ENOENT: return "ENOENT";
    case ENOTSUP: return "ENOTSUP";
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case ENOTTY: return "ENOTTY";
    default: return strerror(e);
    }
}

static void show(const char *what, int r) {
    printf("%s %s\n", what, r == -1 ? name_of(errno) : "ok");
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *file = argv[1], *dir = argv[2];
    show("chroot", chroot(dir));
    show("mount", mount("none", dir, "tmpfs", 0, NULL));
    show("umount", umount(dir));
    show("swapon", swapon(file, 0));
    show("acct", acct(file));
    int in = inotify_init1(IN_CLOEXEC);
    show("inotify_add_watch", inotify_add_watch(in, file, IN_MODIFY));
    struct {
        unsigned int bytes;
        int type;
        unsigned char h[128];
    } handle = {.bytes = 128};
    int mnt;
    show("name_to_handle_at", name_to_handle_at(AT_FDCWD, file, (void *)&handle, &mnt, 0));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int r = posix_spawn_file_actions_addopen(&fa, 3, file, O_RDONLY, 0);
    printf("posix_spawn_file_actions_addopen %s\n", r ? name_of(r) : "ok");
    r = posix_spawn_file_actions_addchdir_np(&fa, dir);
    printf("posix_spawn_file_actions_addchdir_np %s\n", r ? name_of(r) : "ok");
    posix_spawn_file_actions_destroy(&fa);
    int fd = open(file, O_RDONLY);
    errno = 0;
    int tty = isatty(fd);
    printf("isatty %d %s\n", tty, name_of(errno));
    char buf[64];
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    show("getdents64", (int)getdents64(dfd, buf, sizeof buf));
    close(dfd);
    show("readahead", (int)readahead(fd, 0, 4096));
    errno = 0;
    key_t k = ftok(file, 7);
    printf("ftok %s\n", k == -1 ? name_of(errno) : "ok");
    close(fd);
    return 0;
}
