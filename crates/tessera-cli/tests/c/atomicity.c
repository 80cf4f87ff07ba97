/* MPI-IO atomic mode checks, in the manner of ROMIO's atomicity test, and a randomized checker.
 *
 *   atomicity FILE romio [contig|vector|sieve]
 *       Rank 0 writes a region of ints, all one value, while every other rank reads it; each
 *       read must be all the old value or all the new one. `vector` uses a strided filetype,
 *       `sieve` the same with ROMIO's data sieving asked for by hints.
 *   atomicity FILE views
 *       One atomic write per rank through two views whose bytes interleave with the other
 *       ranks': a vector (blocks of 64 ints, every 4 x 64, from rank x 64) and a 3-D subarray
 *       (rank's 4x4x8 block of an 8x8x8 cube of ints on a 2x2x1 grid, C order). Run with
 *       TESSERA_ATOMIC_TRACE=1, the locks printed are the exact byte ranges.
 *   atomicity FILE random ROUNDS SEED [expect-mix]
 *       Each round a random strided shape (vector filetype of random block length, gap, count
 *       and displacement) is written in full with a base value, then every rank, at random,
 *       writes its own value over the whole shape or reads it. Every read must hold one value
 *       throughout (the base or one writer's). Every fourth round all ranks write and read the
 *       shape collectively. With `expect-mix` (atomicity not kept), the rounds go on until a
 *       read mixes two writes (a read of one stale value does not count), and finding one is
 *       success.
 * Prints "atomicity <mode>: ok" (or "... mixed read after N rounds") on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "atomicity rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Whether all `n` ints hold one value; the first differing index in *at. */
static int uniform(const int *buf, long n, long *at) {
    for (long i = 1; i < n; i++)
        if (buf[i] != buf[0]) {
            *at = i;
            return 0;
        }
    return 1;
}

static void romio_style(const char *path, const char *variant) {
    const int n = 1 << 14, rounds = 20;
    int *buf = malloc(sizeof(int) * n);
    MPI_Info info;
    MPI_Info_create(&info);
    if (strcmp(variant, "sieve") == 0) {
        MPI_Info_set(info, "romio_ds_read", "enable");
        MPI_Info_set(info, "romio_ds_write", "enable");
    }
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh), "open");
    MPI_Info_free(&info);
    if (strcmp(variant, "contig") != 0) {
        /* Blocks of 64 ints every 128: the holes are never touched. */
        MPI_Datatype vec;
        check(MPI_Type_vector(n / 64, 64, 128, MPI_INT, &vec), "vector");
        check(MPI_Type_commit(&vec), "commit");
        check(MPI_File_set_view(fh, 0, MPI_INT, vec, "native", MPI_INFO_NULL), "set_view");
        MPI_Type_free(&vec);
    }
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    for (int i = 0; i < n; i++) buf[i] = 0;
    if (rank == 0) check(MPI_File_write_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE), "write old");
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            for (int i = 0; i < n; i++) buf[i] = r + 1;
            check(MPI_File_write_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE), "write new");
        } else {
            check(MPI_File_read_at(fh, 0, buf, n, MPI_INT, MPI_STATUS_IGNORE), "read");
            long at = 0;
            if (!uniform(buf, n, &at) || (buf[0] != r && buf[0] != r + 1)) {
                fprintf(stderr,
                        "atomicity rank %d: %s round %d: read int %ld = %d, int 0 = %d (want all %d "
                        "or all %d)\n", rank, variant, r, at, buf[at], buf[0], r, r + 1);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    check(MPI_File_close(&fh), "close");
    free(buf);
    if (rank == 0) printf("atomicity romio %s: ok\n", variant);
}

/* A shape: `count` blocks of `blen` ints, `blen + gap` apart, from byte `disp`. */
struct shape {
    int blen, gap, count, disp, writers;
};

static MPI_Datatype view_of(MPI_File fh, const struct shape *s) {
    MPI_Datatype vec;
    check(MPI_Type_vector(s->count, s->blen, s->blen + s->gap, MPI_INT, &vec), "vector");
    check(MPI_Type_commit(&vec), "commit");
    check(MPI_File_set_view(fh, s->disp, MPI_INT, vec, "native", MPI_INFO_NULL), "set_view");
    return vec;
}

static void randomized(const char *path, int rounds, unsigned seed, int expect_mix) {
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open");
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    srand(seed);
    int mixes = 0, r = 0;
    int limit = expect_mix ? rounds * 20 : rounds;
    for (r = 0; r < limit; r++) {
        struct shape s;
        if (rank == 0) {
            s.blen = 1 + rand() % 64;
            s.gap = rand() % 64;
            s.count = 1 + rand() % 128;
            s.disp = 4 * (rand() % 1024);
            s.writers = rand();
        }
        MPI_Bcast(&s, 5, MPI_INT, 0, MPI_COMM_WORLD);
        long n = (long)s.blen * s.count;
        int *buf = malloc(sizeof(int) * n);
        MPI_Datatype vec = view_of(fh, &s);
        int base = 1000000 + r * 1000;
        if (rank == 0) {
            for (long i = 0; i < n; i++) buf[i] = base;
            check(MPI_File_write_at(fh, 0, buf, (int)n, MPI_INT, MPI_STATUS_IGNORE), "base write");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        int collective = !expect_mix && r % 4 == 3;
        int writer = collective || ((s.writers >> rank) & 1);
        int mine = base + 1 + rank;
        if (writer) {
            for (long i = 0; i < n; i++) buf[i] = mine;
            if (collective)
                check(MPI_File_write_at_all(fh, 0, buf, (int)n, MPI_INT, MPI_STATUS_IGNORE),
                      "collective write");
            else
                check(MPI_File_write_at(fh, 0, buf, (int)n, MPI_INT, MPI_STATUS_IGNORE), "write");
        }
        if (!writer || collective) {
            if (collective) {
                MPI_Barrier(MPI_COMM_WORLD);
                check(MPI_File_read_at_all(fh, 0, buf, (int)n, MPI_INT, MPI_STATUS_IGNORE),
                      "collective read");
            } else {
                check(MPI_File_read_at(fh, 0, buf, (int)n, MPI_INT, MPI_STATUS_IGNORE), "read");
            }
            long at = 0;
            int mixed = !uniform(buf, n, &at);
            int stale = !mixed && (buf[0] < base || buf[0] > base + nranks);
            if ((mixed || stale) && !expect_mix) {
                fprintf(stderr,
                        "atomicity rank %d: round %d (%d blocks of %d ints, gap %d, at %d): "
                        "read int %ld = %d, int 0 = %d: %s\n",
                        rank, r, s.count, s.blen, s.gap, s.disp, at, buf[at], buf[0],
                        mixed ? "a mix of writes" : "no write of this round");
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            mixes += mixed;
        }
        MPI_Type_free(&vec);
        free(buf);
        int total = 0;
        MPI_Allreduce(&mixes, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (expect_mix && total > 0) {
            if (rank == 0) printf("atomicity random: mixed read after %d rounds\n", r + 1);
            break;
        }
    }
    check(MPI_File_close(&fh), "close");
    if (expect_mix && r == limit) {
        if (rank == 0) fprintf(stderr, "atomicity random: no mixed read in %d rounds\n", limit);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    if (!expect_mix && rank == 0) printf("atomicity random: ok\n");
}

static void views(const char *path) {
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open");
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    int *buf = calloc(1024, sizeof(int));
    MPI_Datatype vec, cube;
    check(MPI_Type_vector(16, 64, 4 * 64, MPI_INT, &vec), "vector");
    check(MPI_Type_commit(&vec), "commit");
    check(MPI_File_set_view(fh, (MPI_Offset)rank * 64 * 4, MPI_INT, vec, "native", MPI_INFO_NULL),
          "set_view vector");
    check(MPI_File_write_at(fh, 0, buf, 1024, MPI_INT, MPI_STATUS_IGNORE), "vector write");
    int sizes[3] = {8, 8, 8}, sub[3] = {4, 4, 8}, starts[3] = {4 * (rank / 2 % 2), 4 * (rank % 2), 0};
    check(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &cube), "subarray");
    check(MPI_Type_commit(&cube), "commit");
    check(MPI_File_set_view(fh, 1 << 20, MPI_INT, cube, "native", MPI_INFO_NULL), "set_view cube");
    check(MPI_File_write_at(fh, 0, buf, 128, MPI_INT, MPI_STATUS_IGNORE), "cube write");
    MPI_Type_free(&vec);
    MPI_Type_free(&cube);
    check(MPI_File_close(&fh), "close");
    free(buf);
    if (rank == 0) printf("atomicity views: ok\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc == 3 && strcmp(argv[2], "views") == 0) {
        views(argv[1]);
    } else if (argc >= 4 && strcmp(argv[2], "romio") == 0) {
        romio_style(argv[1], argv[3]);
    } else if (argc >= 5 && strcmp(argv[2], "random") == 0) {
        randomized(argv[1], atoi(argv[3]), (unsigned)atoi(argv[4]),
                   argc == 6 && strcmp(argv[5], "expect-mix") == 0);
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: atomicity FILE romio contig|vector|sieve | "
                            "atomicity FILE random ROUNDS SEED [expect-mix]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
