/* MPI-IO shared file pointers and ordered calls, as ROMIO's shared_fp test uses them: every rank
 * writes its block with MPI_File_write_shared, and after a plain barrier every rank reads a
 * block back with MPI_File_read_shared (each block is read by exactly one rank); then every rank
 * writes with MPI_File_write_ordered and reads back its own block, in rank order, with
 * MPI_File_read_ordered. No MPI_File_sync anywhere: the standard lets a write be unseen, but
 * programs (and ROMIO's test) expect what a local disk gives.
 *
 *   shared_fp FILE
 *
 * Prints "shared_fp: ok" on rank 0; a message and MPI_Abort otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 1024

static void check(int rc, const char *what, int rank) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "shared_fp rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Whether buf holds one whole block of some rank written with `salt`; its rank, or -1. */
static int block_of(const int *buf, int nranks, int salt) {
    int r = (buf[0] - salt) / COUNT;
    if (r < 0 || r >= nranks)
        return -1;
    for (int i = 0; i < COUNT; i++)
        if (buf[i] != salt + r * COUNT + i)
            return -1;
    return r;
}

int main(int argc, char **argv) {
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2) {
        fprintf(stderr, "usage: shared_fp FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int *buf = malloc(COUNT * sizeof(int));
    MPI_File fh;
    MPI_Status st;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh),
          "open", rank);

    /* Shared pointer: blocks land in whatever order the ranks get there. */
    for (int i = 0; i < COUNT; i++)
        buf[i] = rank * COUNT + i;
    check(MPI_File_write_shared(fh, buf, COUNT, MPI_INT, &st), "write_shared", rank);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared", rank);
    check(MPI_File_read_shared(fh, buf, COUNT, MPI_INT, &st), "read_shared", rank);
    int got = block_of(buf, nranks, 0);
    if (got < 0) {
        fprintf(stderr, "shared_fp rank %d: read_shared returned no whole block (first int %d)\n",
                rank, buf[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int *seen = calloc(nranks, sizeof(int));
    int *all = malloc(nranks * sizeof(int));
    MPI_Allgather(&got, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++)
        seen[all[r]]++;
    for (int r = 0; r < nranks; r++)
        if (seen[r] != 1) {
            if (rank == 0)
                fprintf(stderr, "shared_fp: rank %d's block was read %d times\n", r, seen[r]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }

    /* Ordered: rank r's block is the r-th, and reads come back the same way. */
    const int salt = 1 << 24;
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared", rank);
    for (int i = 0; i < COUNT; i++)
        buf[i] = salt + rank * COUNT + i;
    check(MPI_File_write_ordered(fh, buf, COUNT, MPI_INT, &st), "write_ordered", rank);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared", rank);
    for (int i = 0; i < COUNT; i++)
        buf[i] = -1;
    check(MPI_File_read_ordered(fh, buf, COUNT, MPI_INT, &st), "read_ordered", rank);
    if (block_of(buf, nranks, salt) != rank) {
        fprintf(stderr, "shared_fp rank %d: read_ordered did not return its block (first int %d)\n",
                rank, buf[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(MPI_File_close(&fh), "close", rank);
    free(buf);
    free(seen);
    free(all);
    MPI_Finalize();
    if (rank == 0)
        printf("shared_fp: ok\n");
    return 0;
}
