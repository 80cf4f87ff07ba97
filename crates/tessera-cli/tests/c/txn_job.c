/* An unmodified MPI-IO program for TESSERA_TXN=job: every rank writes its block of FILE (every
 * byte VERSION) with one collective write, and closes the file.
 *
 *   txn_job FILE VERSION BLOCK            then MPI_Finalize
 *   txn_job FILE VERSION BLOCK OPTIONS    OPTIONS, comma-separated:
 *     trunc   empty the file first (MPI_File_set_size 0, as HDF5 does for H5F_ACC_TRUNC)
 *     ckpt    write FILE.tmp instead, and rank 0 renames it over FILE after the close
 *     crash   the last rank dies before MPI_Finalize
 *     dirty   every rank dies right after the write, before the close publishes it
 *
 * Exit status 0 on success; a message on stderr and MPI_Abort otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 4) {
        fprintf(stderr, "usage: txn_job FILE VERSION BLOCK [crash]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int version = atoi(argv[2]);
    long block = atol(argv[3]);
    const char *options = argc > 4 ? argv[4] : "";
    char target[4096];
    snprintf(target, sizeof target, "%s%s", argv[1], strstr(options, "ckpt") ? ".tmp" : "");
    char *buf = malloc(block);
    memset(buf, version, block);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, target, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh) != MPI_SUCCESS) {
        fprintf(stderr, "txn_job rank %d: open %s failed\n", rank, target);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strstr(options, "trunc") && MPI_File_set_size(fh, 0) != MPI_SUCCESS) {
        fprintf(stderr, "txn_job rank %d: set_size failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (MPI_File_write_at_all(fh, (MPI_Offset)rank * block, buf, (int)block, MPI_BYTE,
                              MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        fprintf(stderr, "txn_job rank %d: write failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strstr(options, "dirty"))
        abort();
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (strstr(options, "ckpt") && rank == 0 && rename(target, argv[1]) != 0) {
        perror("txn_job: rename");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (strstr(options, "crash") && rank == nranks - 1)
        abort();
    free(buf);
    MPI_Finalize();
    if (rank == 0)
        printf("txn_job: finalized\n");
    return 0;
}
