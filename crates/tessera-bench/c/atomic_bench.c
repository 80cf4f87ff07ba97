/* The experiments of Aarestad et al. (list locks), as MPI-IO programs in atomic mode (run through the interposer,
 * whose TESSERA_ATOMIC_LOCKS picks the lock strategy).
 *
 *   atomic_bench block3d FILE EDGE
 *       ROMIO's coll_perf: a cube of EDGE^3 ints in a block distribution over a 3-D process
 *       grid (MPI_Type_create_darray), written then read back collectively; each int holds
 *       its global index and every read is checked.
 *   atomic_bench tile FILE
 *       The tile reader: 6 ranks on a 3x2 display wall each read a 1024x768 tile (3 bytes a
 *       pixel) of one frame, tiles overlapping by 270 pixels horizontally and 128 vertically
 *       (MPI_Type_create_subarray); rank 0 writes the frame first, outside the timing.
 *
 * Rank 0 prints one line: `atomic_bench PATTERN ranks=P bytes=B write_s=W read_s=R` (the
 * slowest rank's times; write_s is 0 for the tile reader).
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
        fprintf(stderr, "atomic_bench rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static double slowest(double t) {
    double m = 0;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void block3d(const char *path, int edge) {
    int gsizes[3] = {edge, edge, edge}, psizes[3] = {0, 0, 0};
    int distribs[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
    int dargs[3] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
    MPI_Dims_create(nranks, 3, psizes);
    MPI_Datatype darray;
    check(MPI_Type_create_darray(nranks, rank, 3, gsizes, distribs, dargs, psizes, MPI_ORDER_C,
                                 MPI_INT, &darray), "darray");
    check(MPI_Type_commit(&darray), "commit");
    int size = 0;
    MPI_Type_size(darray, &size);
    int n = size / (int)sizeof(int);
    int *buf = malloc((size_t)size + 4);
    /* The global index of each of this rank's ints, in file order: the rank's block. */
    int coords[3], lo[3], cnt[3];
    for (int d = 2, r = rank; d >= 0; d--) {
        coords[d] = r % psizes[d];
        r /= psizes[d];
    }
    for (int d = 0; d < 3; d++) {
        int b = (edge + psizes[d] - 1) / psizes[d];
        lo[d] = coords[d] * b;
        cnt[d] = lo[d] + b > edge ? edge - lo[d] : b;
        if (cnt[d] < 0) cnt[d] = 0;
    }
    long k = 0;
    for (int i = 0; i < cnt[0]; i++)
        for (int j = 0; j < cnt[1]; j++)
            for (int l = 0; l < cnt[2]; l++)
                buf[k++] = ((lo[0] + i) * edge + (lo[1] + j)) * edge + (lo[2] + l);
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open");
    check(MPI_File_set_view(fh, 0, MPI_INT, darray, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    check(MPI_File_write_all(fh, buf, n, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    double w = slowest(MPI_Wtime() - t0);
    memset(buf, 0xff, (size_t)size);
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek(fh, 0, MPI_SEEK_SET), "seek");
    t0 = MPI_Wtime();
    check(MPI_File_read_all(fh, buf, n, MPI_INT, MPI_STATUS_IGNORE), "read_all");
    double r = slowest(MPI_Wtime() - t0);
    k = 0;
    for (int i = 0; i < cnt[0]; i++)
        for (int j = 0; j < cnt[1]; j++)
            for (int l = 0; l < cnt[2]; l++, k++) {
                int want = ((lo[0] + i) * edge + (lo[1] + j)) * edge + (lo[2] + l);
                if (buf[k] != want) {
                    fprintf(stderr, "atomic_bench rank %d: int %ld reads %d, wrote %d\n", rank, k,
                            buf[k], want);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
    check(MPI_File_close(&fh), "close");
    MPI_Type_free(&darray);
    free(buf);
    if (rank == 0)
        printf("atomic_bench block3d ranks=%d bytes=%ld write_s=%.6f read_s=%.6f\n", nranks,
               (long)edge * edge * edge * (long)sizeof(int), w, r);
}

static void tile(const char *path) {
    const int tw = 1024, th = 768, ox = 270, oy = 128, tx = 3, ty = 2, px = 3;
    if (nranks != tx * ty) {
        if (rank == 0) fprintf(stderr, "atomic_bench tile: needs %d ranks\n", tx * ty);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int fw = tx * tw - (tx - 1) * ox, fh_ = ty * th - (ty - 1) * oy;
    long frame = (long)fw * fh_ * px;
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open");
    unsigned char *buf = malloc((size_t)tw * th * px);
    if (rank == 0) {
        unsigned char *all = malloc((size_t)frame);
        for (long i = 0; i < frame; i++) all[i] = (unsigned char)(i * 7 % 251);
        check(MPI_File_write_at(fh, 0, all, (int)frame, MPI_BYTE, MPI_STATUS_IGNORE), "frame");
        free(all);
    }
    check(MPI_File_sync(fh), "sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "sync");
    int sizes[2] = {fh_, fw * px}, sub[2] = {th, tw * px};
    int starts[2] = {(rank / tx) * (th - oy), (rank % tx) * (tw - ox) * px};
    MPI_Datatype t;
    check(MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_BYTE, &t), "subarray");
    check(MPI_Type_commit(&t), "commit");
    check(MPI_File_set_view(fh, 0, MPI_BYTE, t, "native", MPI_INFO_NULL), "set_view");
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    check(MPI_File_read_all(fh, buf, tw * th * px, MPI_BYTE, MPI_STATUS_IGNORE), "read_all");
    double r = slowest(MPI_Wtime() - t0);
    for (int y = 0; y < th; y++)
        for (int x = 0; x < tw * px; x++) {
            long off = (long)(starts[0] + y) * fw * px + starts[1] + x;
            if (buf[(long)y * tw * px + x] != (unsigned char)(off * 7 % 251)) {
                fprintf(stderr, "atomic_bench rank %d: tile byte (%d, %d) is wrong\n", rank, y, x);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
    check(MPI_File_close(&fh), "close");
    MPI_Type_free(&t);
    free(buf);
    if (rank == 0)
        printf("atomic_bench tile ranks=%d bytes=%ld write_s=0 read_s=%.6f\n", nranks,
               (long)tw * th * px * nranks, r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc == 4 && strcmp(argv[1], "block3d") == 0) {
        block3d(argv[2], atoi(argv[3]));
    } else if (argc == 3 && strcmp(argv[1], "tile") == 0) {
        tile(argv[2]);
    } else {
        if (rank == 0) fprintf(stderr, "usage: atomic_bench block3d FILE EDGE | tile FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
