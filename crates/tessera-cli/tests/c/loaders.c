/* Code stored in Tessera, loaded the ways programs load it.
 *
 *   loaders dlopen LIB             dlopen and dlmopen LIB, call its answer()
 *   loaders execveat DIR NAME      execveat(DIR's descriptor, NAME): the program runs
 *   loaders fexecve PROGRAM        open PROGRAM, fexecve its descriptor
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    if (!strcmp(argv[1], "dlopen")) {
        void *h = dlopen(argv[2], RTLD_NOW);
        if (!h) {
            printf("dlopen: %s\n", dlerror());
            return 1;
        }
        int (*answer)(void) = (int (*)(void))dlsym(h, "answer");
        printf("dlopen answer %d\n", answer ? answer() : -1);
        void *m = dlmopen(LM_ID_NEWLM, argv[2], RTLD_NOW);
        int (*again)(void) = m ? (int (*)(void))dlsym(m, "answer") : NULL;
        printf("dlmopen answer %d\n", again ? again() : -1);
        return 0;
    }
    if (!strcmp(argv[1], "execveat") && argc == 4) {
        int d = open(argv[2], O_RDONLY | O_DIRECTORY);
        char *args[] = {argv[3], "from-execveat", NULL};
        execveat(d, argv[3], args, environ, 0);
        perror("execveat");
        return 1;
    }
    if (!strcmp(argv[1], "fexecve")) {
        int fd = open(argv[2], O_RDONLY);
        char *args[] = {argv[2], "from-fexecve", NULL};
        fexecve(fd, args, environ);
        perror("fexecve");
        return 1;
    }
    return 2;
}
