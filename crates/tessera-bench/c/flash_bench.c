/* A FLASH-IO-like checkpoint through parallel HDF5 in MPI-IO atomic mode (Aarestad et al.'s second
 * experiment), run through the interposer, whose TESSERA_ATOMIC_LOCKS picks the lock strategy.
 *
 *   flash_bench FILE BLOCKS
 *       Every rank holds BLOCKS blocks of 8x8x8 cells with 4 guard cells on each side, 24
 *       variables per cell, laid out as FLASH keeps them (unk[block][z][y][x][var]: the
 *       variables interleaved). The checkpoint writes one data set per variable, of shape
 *       [total blocks][8][8][8] doubles, as FLASH does: the interior cells of the variable
 *       are copied out of unk, then written. The blocks are dealt round-robin (global block b
 *       belongs to rank b mod P, as a space-filling curve interleaves them), so each write
 *       is, in the file, one 4 KiB piece every P x 4 KiB. The file is then read back (into
 *       the copy, then into unk) and checked.
 *
 * Rank 0 prints `atomic_bench flash ranks=P bytes=B write_s=W read_s=R` (the slowest rank's
 * times over the data-set writes and reads).
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 8
#define NG 4
#define NT (NX + 2 * NG)
#define NVAR 24

static int rank, nranks;

static void fail(const char *what) {
    fprintf(stderr, "flash_bench rank %d: %s failed\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static double value(long gblock, int v, int z, int y, int x) {
    return (double)((((gblock * NVAR + v) * NX + z) * NX + y) * NX + x);
}

static double slowest(double t) {
    double m = 0;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: flash_bench FILE BLOCKS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int nb = atoi(argv[2]);
    if (nb <= 0) {
        if (rank == 0) fprintf(stderr, "flash_bench: BLOCKS must be a positive count, not %s\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long total = (long)nb * nranks;
    size_t cells = (size_t)nb * NT * NT * NT * NVAR;
    double *unk = malloc(cells * sizeof(double));
    for (int b = 0; b < nb; b++)
        for (int z = 0; z < NT; z++)
            for (int y = 0; y < NT; y++)
                for (int x = 0; x < NT; x++)
                    for (int v = 0; v < NVAR; v++) {
                        int inner = z >= NG && z < NG + NX && y >= NG && y < NG + NX && x >= NG &&
                                    x < NG + NX;
                        unk[((((size_t)b * NT + z) * NT + y) * NT + x) * NVAR + v] =
                            inner ? value((long)b * nranks + rank, v, z - NG, y - NG, x - NG) : -1;
                    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) fail("H5Fcreate");
    if (H5Fset_mpi_atomicity(file, 1) < 0) fail("H5Fset_mpi_atomicity");
    hsize_t fdims[4] = {(hsize_t)total, NX, NX, NX};
    hid_t fspace = H5Screate_simple(4, fdims, NULL);
    /* This rank's blocks: every nranks-th from `rank`. */
    hsize_t start[4] = {(hsize_t)rank, 0, 0, 0}, stride[4] = {(hsize_t)nranks, 1, 1, 1};
    hsize_t count[4] = {(hsize_t)nb, 1, 1, 1}, block[4] = {1, NX, NX, NX};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, stride, count, block);
    /* The copy of one variable's interior cells: [nb][8][8][8], contiguous. */
    hsize_t mdims[4] = {(hsize_t)nb, NX, NX, NX};
    hid_t mspace = H5Screate_simple(4, mdims, NULL);
    double *var = malloc((size_t)nb * NX * NX * NX * sizeof(double));
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    /* Collective calls, each rank's part one MPI-IO access through a derived type (HDF5 breaks
     * a strided selection into one access per piece otherwise). */
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    H5Pset_dxpl_mpio_collective_opt(dxpl, H5FD_MPIO_INDIVIDUAL_IO);
    hid_t dsets[NVAR];
    for (int v = 0; v < NVAR; v++) {
        char name[16];
        snprintf(name, sizeof name, "var%02d", v);
        hid_t all = H5Screate_simple(4, fdims, NULL);
        dsets[v] = H5Dcreate2(file, name, H5T_NATIVE_DOUBLE, all, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
        H5Sclose(all);
        if (dsets[v] < 0) fail("H5Dcreate2");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int v = 0; v < NVAR; v++) {
        size_t k = 0;
        for (int b = 0; b < nb; b++)
            for (int z = 0; z < NX; z++)
                for (int y = 0; y < NX; y++)
                    for (int x = 0; x < NX; x++)
                        var[k++] = unk[((((size_t)b * NT + z + NG) * NT + y + NG) * NT + x + NG) *
                                           NVAR + v];
        if (H5Dwrite(dsets[v], H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, var) < 0) fail("H5Dwrite");
    }
    double w = slowest(MPI_Wtime() - t0);
    for (size_t i = 0; i < cells; i++) unk[i] = -2;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int v = 0; v < NVAR; v++) {
        if (H5Dread(dsets[v], H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, var) < 0) fail("H5Dread");
        size_t k = 0;
        for (int b = 0; b < nb; b++)
            for (int z = 0; z < NX; z++)
                for (int y = 0; y < NX; y++)
                    for (int x = 0; x < NX; x++)
                        unk[((((size_t)b * NT + z + NG) * NT + y + NG) * NT + x + NG) * NVAR + v] =
                            var[k++];
    }
    double r = slowest(MPI_Wtime() - t0);
    for (int b = 0; b < nb; b++)
        for (int z = 0; z < NX; z++)
            for (int y = 0; y < NX; y++)
                for (int x = 0; x < NX; x++)
                    for (int v = 0; v < NVAR; v++) {
                        double got = unk[((((size_t)b * NT + z + NG) * NT + y + NG) * NT + x + NG) *
                                             NVAR + v];
                        double want = value((long)b * nranks + rank, v, z, y, x);
                        if (got != want) {
                            fprintf(stderr, "flash_bench rank %d: block %d var %d cell (%d,%d,%d) "
                                            "reads %g, wrote %g\n", rank, b, v, z, y, x, got, want);
                            MPI_Abort(MPI_COMM_WORLD, 3);
                        }
                    }
    for (int v = 0; v < NVAR; v++) H5Dclose(dsets[v]);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    H5Fclose(file);
    free(unk);
    free(var);
    if (rank == 0)
        printf("atomic_bench flash ranks=%d bytes=%ld write_s=%.6f read_s=%.6f\n", nranks,
               total * NX * NX * NX * NVAR * (long)sizeof(double), w, r);
    MPI_Finalize();
    return 0;
}
