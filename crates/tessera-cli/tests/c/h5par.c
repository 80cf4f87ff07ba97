/* An unmodified parallel HDF5 program for the interposer tests (Debian's libhdf5-openmpi).
 *
 *   h5par FILE write   every rank writes its rows of two 2-D datasets collectively: "contig"
 *                      (contiguous layout) and "chunked" (chunked layout, chunks that cut across
 *                      ranks' rows), plus an attribute; H5Fclose
 *   h5par FILE read    a later run opens the file and every rank reads, collectively, the rows
 *                      of another rank from both datasets and checks every element
 *
 * Exit status 0 on success; a message on stderr and MPI_Abort otherwise. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS_PER_RANK 37
#define COLS 1001

static int rank, nranks;

static long long value_at(int dataset, long long row, long long col) {
    return (row * 1000003LL + col * 7919LL + dataset * 104729LL) % 2147483647LL;
}

static void die(const char *what) {
    fprintf(stderr, "h5par rank %d: %s failed\n", rank, what);
    H5Eprint2(H5E_DEFAULT, stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

#define CHECK(x, what) do { if ((x) < 0) die(what); } while (0)

static hid_t fapl(void) {
    hid_t p = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(p, "H5Pcreate fapl");
    CHECK(H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    return p;
}

static hid_t collective(void) {
    hid_t x = H5Pcreate(H5P_DATASET_XFER);
    CHECK(x, "H5Pcreate dxpl");
    CHECK(H5Pset_dxpl_mpio(x, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
    return x;
}

/* Selects the ROWS_PER_RANK rows of rank r in the file space of a dataset. */
static hid_t rows_of(hid_t dset, int r) {
    hid_t space = H5Dget_space(dset);
    CHECK(space, "H5Dget_space");
    hsize_t start[2] = {(hsize_t)r * ROWS_PER_RANK, 0};
    hsize_t count[2] = {ROWS_PER_RANK, COLS};
    CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL), "select");
    return space;
}

static void do_write(const char *path) {
    hid_t p = fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, p);
    CHECK(file, "H5Fcreate");
    hsize_t dims[2] = {(hsize_t)nranks * ROWS_PER_RANK, COLS};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t contig = H5Dcreate2(file, "contig", H5T_NATIVE_LLONG, fspace, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
    CHECK(contig, "H5Dcreate contig");
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[2] = {16, 250}; /* crosses rank boundaries and the row ends */
    CHECK(H5Pset_chunk(dcpl, 2, chunk), "H5Pset_chunk");
    hid_t chunked = H5Dcreate2(file, "chunked", H5T_NATIVE_LLONG, fspace, H5P_DEFAULT, dcpl,
                               H5P_DEFAULT);
    CHECK(chunked, "H5Dcreate chunked");

    hsize_t mdims[2] = {ROWS_PER_RANK, COLS};
    hid_t mspace = H5Screate_simple(2, mdims, NULL);
    long long *buf = malloc(sizeof(long long) * ROWS_PER_RANK * COLS);
    hid_t x = collective();
    hid_t sets[2] = {contig, chunked};
    for (int d = 0; d < 2; d++) {
        for (long long i = 0; i < ROWS_PER_RANK; i++)
            for (long long j = 0; j < COLS; j++)
                buf[i * COLS + j] = value_at(d, (long long)rank * ROWS_PER_RANK + i, j);
        hid_t s = rows_of(sets[d], rank);
        CHECK(H5Dwrite(sets[d], H5T_NATIVE_LLONG, mspace, s, x, buf), "H5Dwrite");
        H5Sclose(s);
    }
    int ranks_attr = nranks;
    hid_t aspace = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(contig, "ranks", H5T_NATIVE_INT, aspace, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(attr, "H5Acreate");
    CHECK(H5Awrite(attr, H5T_NATIVE_INT, &ranks_attr), "H5Awrite");
    H5Aclose(attr);
    H5Sclose(aspace);
    free(buf);
    H5Pclose(x);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Pclose(dcpl);
    H5Dclose(contig);
    H5Dclose(chunked);
    CHECK(H5Fclose(file), "H5Fclose");
    H5Pclose(p);
}

static void do_read(const char *path) {
    hid_t p = fapl();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, p);
    CHECK(file, "H5Fopen");
    const char *names[2] = {"contig", "chunked"};
    int other = (rank + 1) % nranks;
    hsize_t mdims[2] = {ROWS_PER_RANK, COLS};
    hid_t mspace = H5Screate_simple(2, mdims, NULL);
    long long *buf = malloc(sizeof(long long) * ROWS_PER_RANK * COLS);
    hid_t x = collective();
    for (int d = 0; d < 2; d++) {
        hid_t ds = H5Dopen2(file, names[d], H5P_DEFAULT);
        CHECK(ds, "H5Dopen");
        hid_t s = rows_of(ds, other);
        hsize_t dims[2];
        H5Sget_simple_extent_dims(s, dims, NULL);
        if (dims[0] != (hsize_t)nranks * ROWS_PER_RANK || dims[1] != COLS) {
            fprintf(stderr, "h5par rank %d: %s has dims %llu x %llu\n", rank, names[d],
                    (unsigned long long)dims[0], (unsigned long long)dims[1]);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        memset(buf, 0, sizeof(long long) * ROWS_PER_RANK * COLS);
        CHECK(H5Dread(ds, H5T_NATIVE_LLONG, mspace, s, x, buf), "H5Dread");
        for (long long i = 0; i < ROWS_PER_RANK; i++)
            for (long long j = 0; j < COLS; j++) {
                long long row = (long long)other * ROWS_PER_RANK + i;
                if (buf[i * COLS + j] != value_at(d, row, j)) {
                    fprintf(stderr, "h5par rank %d: %s[%lld][%lld] = %lld, expected %lld\n", rank,
                            names[d], row, j, buf[i * COLS + j], value_at(d, row, j));
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
        if (d == 0) {
            int ranks_attr = -1;
            hid_t attr = H5Aopen(ds, "ranks", H5P_DEFAULT);
            CHECK(attr, "H5Aopen");
            CHECK(H5Aread(attr, H5T_NATIVE_INT, &ranks_attr), "H5Aread");
            H5Aclose(attr);
            if (ranks_attr != nranks) {
                fprintf(stderr, "h5par rank %d: attribute ranks = %d\n", rank, ranks_attr);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        H5Sclose(s);
        H5Dclose(ds);
    }
    free(buf);
    H5Pclose(x);
    H5Sclose(mspace);
    CHECK(H5Fclose(file), "H5Fclose");
    H5Pclose(p);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: h5par FILE write|read\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (strcmp(argv[2], "write") == 0)
        do_write(argv[1]);
    else if (strcmp(argv[2], "read") == 0)
        do_read(argv[1]);
    else {
        if (rank == 0) fprintf(stderr, "h5par: unknown mode %s\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("h5par %s: ok (%d ranks)\n", argv[2], nranks);
    MPI_Finalize();
    return 0;
}
