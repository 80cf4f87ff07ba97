/* An unmodified MPI-IO program for the interposer tests. Every rank checks every byte it reads
 * and the program exits non-zero (after MPI_Abort) on the first wrong byte.
 *
 *   mpiio DIR write [atomic]
 *       independent N-1 strided writes (MPI_File_write_at), then sync-barrier-sync and every
 *       rank reads another rank's blocks in the open file; collective writes
 *       (MPI_File_write_at_all); a strided file view (MPI_Type_vector + MPI_File_set_view)
 *       written collectively (MPI_File_write_all) and, in another file, independently
 *       (MPI_File_write: ROMIO's data sieving reads, patches and rewrites whole extents under
 *       fcntl locks, so every rank's blocks survive only if the locks exclude each other);
 *       non-blocking writes (MPI_File_iwrite_at + MPI_Wait); after close every rank reads
 *       back another rank's data from each file, independently and collectively (read_at,
 *       read_at_all, read_all through the view, iread_at)
 *   mpiio DIR read [atomic]
 *       a later run (other ranks, other daemons) reads every file back
 *   mpiio DIR atomic
 *       MPI_File_set_atomicity(1): (a) a rank's write is seen by another rank's read after a
 *       barrier alone, with no sync (sequential consistency); (b) all ranks write the same
 *       strided region at once and the result is one rank's data in every block, never a mix
 *       (atomicity)
 *
 * With `atomic`, every file of write and read is switched to atomic mode after it is opened.
 *
 * Sizes are odd on purpose (7001-byte blocks) so no access lines up with a page or a stripe. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 7001
#define COUNT 24

static int rank, nranks;
static int atomic_mode;

static unsigned char byte_at(int file, long long off) {
    return (unsigned char)((off * 131 + file * 17 + 7) % 251);
}

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "mpiio rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void fill(unsigned char *buf, int file, long long off, long n) {
    for (long k = 0; k < n; k++) buf[k] = byte_at(file, off + k);
}

static void expect(const unsigned char *buf, int file, long long off, long n, const char *what) {
    for (long k = 0; k < n; k++) {
        if (buf[k] != byte_at(file, off + k)) {
            fprintf(stderr, "mpiio rank %d: %s: byte %lld is %u, expected %u\n", rank, what,
                    off + k, buf[k], byte_at(file, off + k));
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
}

static void path_of(char *out, const char *dir, const char *name) {
    snprintf(out, 4096, "%s/%s", dir, name);
}

static void open_file(const char *dir, const char *name, int amode, MPI_File *fh) {
    char p[4096];
    path_of(p, dir, name);
    check(MPI_File_open(MPI_COMM_WORLD, p, amode, MPI_INFO_NULL, fh), name);
    if (atomic_mode) check(MPI_File_set_atomicity(*fh, 1), "set_atomicity");
}

/* The strided view of rank r: COUNT blocks of BLOCK bytes, one every nranks blocks. */
static MPI_Datatype strided_type(void) {
    MPI_Datatype vec, ftype;
    check(MPI_Type_vector(COUNT, BLOCK, BLOCK * nranks, MPI_BYTE, &vec), "MPI_Type_vector");
    check(MPI_Type_create_resized(vec, 0, (MPI_Aint)BLOCK * nranks * COUNT, &ftype), "resized");
    check(MPI_Type_commit(&ftype), "MPI_Type_commit");
    MPI_Type_free(&vec);
    return ftype;
}

/* Checks the strided view of rank `other` in `buf` (file number `file`). */
static void expect_view(const unsigned char *buf, int file, int other, const char *what) {
    for (int i = 0; i < COUNT; i++) {
        long long o = ((long long)i * nranks + other) * BLOCK;
        expect(buf + (long)i * BLOCK, file, o, BLOCK, what);
    }
}

static void read_back(const char *dir, int shift) {
    MPI_File fh;
    unsigned char *buf = malloc(BLOCK * COUNT);
    int other = (rank + shift) % nranks;

    /* File 0: another rank's strided blocks, read independently. */
    open_file(dir, "independent", MPI_MODE_RDONLY, &fh);
    for (int i = 0; i < COUNT; i++) {
        long long off = ((long long)i * nranks + other) * BLOCK;
        check(MPI_File_read_at(fh, off, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), "read_at");
        expect(buf, 0, off, BLOCK, "independent read_at");
    }
    MPI_Offset size;
    check(MPI_File_get_size(fh, &size), "get_size");
    if (size != (MPI_Offset)BLOCK * COUNT * nranks) {
        fprintf(stderr, "mpiio rank %d: size %lld, expected %lld\n", rank, (long long)size,
                (long long)BLOCK * COUNT * nranks);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    check(MPI_File_close(&fh), "close independent");

    /* File 1: another rank's contiguous part, read collectively. */
    open_file(dir, "collective", MPI_MODE_RDONLY, &fh);
    long long off = (long long)other * BLOCK * COUNT;
    check(MPI_File_read_at_all(fh, off, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE),
          "read_at_all");
    expect(buf, 1, off, (long)BLOCK * COUNT, "collective read_at_all");
    check(MPI_File_close(&fh), "close collective");

    /* Files 2 and 3: another rank's strided view, read collectively through the view. */
    MPI_Datatype ftype = strided_type();
    const char *views[2] = {"view", "sieve"};
    for (int v = 0; v < 2; v++) {
        open_file(dir, views[v], MPI_MODE_RDONLY, &fh);
        check(MPI_File_set_view(fh, (MPI_Offset)other * BLOCK, MPI_BYTE, ftype, "native",
                                MPI_INFO_NULL), "set_view");
        memset(buf, 0, (size_t)BLOCK * COUNT);
        check(MPI_File_read_all(fh, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE), "read_all");
        expect_view(buf, 2 + v, other, views[v]);
        check(MPI_File_close(&fh), "close view");
    }
    MPI_Type_free(&ftype);

    /* File 4: another rank's part, read with a non-blocking read. */
    open_file(dir, "nonblocking", MPI_MODE_RDONLY, &fh);
    MPI_Request req;
    memset(buf, 0, (size_t)BLOCK * COUNT);
    check(MPI_File_iread_at(fh, off, buf, BLOCK * COUNT, MPI_BYTE, &req), "iread_at");
    MPI_Status st;
    check(MPI_Wait(&req, &st), "wait iread_at");
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != BLOCK * COUNT) {
        fprintf(stderr, "mpiio rank %d: iread_at read %d bytes\n", rank, got);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    expect(buf, 4, off, (long)BLOCK * COUNT, "iread_at");
    check(MPI_File_close(&fh), "close nonblocking");
    free(buf);
}

static void do_write(const char *dir) {
    MPI_File fh;
    unsigned char *buf = malloc(BLOCK * COUNT);
    int amode = MPI_MODE_CREATE | MPI_MODE_RDWR;

    open_file(dir, "independent", amode, &fh);
    for (int i = 0; i < COUNT; i++) {
        long long off = ((long long)i * nranks + rank) * BLOCK;
        fill(buf, 0, off, BLOCK);
        check(MPI_File_write_at(fh, off, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    }
    /* The MPI-IO consistency construct: sync, barrier, sync; then read what others wrote. */
    check(MPI_File_sync(fh), "sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "sync");
    int other = (rank + 1) % nranks;
    for (int i = 0; i < COUNT; i++) {
        long long off = ((long long)i * nranks + other) * BLOCK;
        check(MPI_File_read_at(fh, off, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), "read_at");
        expect(buf, 0, off, BLOCK, "read_at after sync-barrier-sync");
    }
    check(MPI_File_close(&fh), "close independent");

    open_file(dir, "collective", amode, &fh);
    long long off = (long long)rank * BLOCK * COUNT;
    fill(buf, 1, off, (long)BLOCK * COUNT);
    check(MPI_File_write_at_all(fh, off, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE),
          "write_at_all");
    check(MPI_File_close(&fh), "close collective");

    /* The strided view, written collectively (file 2) and independently (file 3). */
    MPI_Datatype ftype = strided_type();
    const char *views[2] = {"view", "sieve"};
    for (int v = 0; v < 2; v++) {
        open_file(dir, views[v], amode, &fh);
        check(MPI_File_set_view(fh, (MPI_Offset)rank * BLOCK, MPI_BYTE, ftype, "native",
                                MPI_INFO_NULL), "set_view");
        for (int i = 0; i < COUNT; i++) {
            long long o = ((long long)i * nranks + rank) * BLOCK;
            fill(buf + (long)i * BLOCK, 2 + v, o, BLOCK);
        }
        if (v == 0)
            check(MPI_File_write_all(fh, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE),
                  "write_all");
        else
            check(MPI_File_write(fh, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE), "write");
        check(MPI_File_close(&fh), "close view");
    }
    MPI_Type_free(&ftype);

    /* Non-blocking: each rank's contiguous part in two halves, waited for together. */
    open_file(dir, "nonblocking", amode, &fh);
    fill(buf, 4, off, (long)BLOCK * COUNT);
    int half = BLOCK * COUNT / 2;
    MPI_Request reqs[2];
    check(MPI_File_iwrite_at(fh, off, buf, half, MPI_BYTE, &reqs[0]), "iwrite_at");
    check(MPI_File_iwrite_at(fh, off + half, buf + half, BLOCK * COUNT - half, MPI_BYTE,
                             &reqs[1]), "iwrite_at");
    check(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), "waitall");
    check(MPI_File_close(&fh), "close nonblocking");
    free(buf);

    /* After close every rank sees every rank's data (close-to-open). */
    MPI_Barrier(MPI_COMM_WORLD);
    read_back(dir, 1);
}

static void do_atomic(const char *dir) {
    char p[4096];
    MPI_File fh;
    unsigned char *buf = malloc(BLOCK * COUNT);
    path_of(p, dir, "atomic");
    check(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh),
          "open atomic");
    check(MPI_File_set_atomicity(fh, 1), "set_atomicity");
    int flag = 0;
    check(MPI_File_get_atomicity(fh, &flag), "get_atomicity");
    if (!flag) {
        fprintf(stderr, "mpiio rank %d: atomicity did not stay on\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }

    /* (a) Sequential consistency: a barrier alone orders a write before another rank's read. */
    for (int round = 0; round < 3; round++) {
        long long off = (long long)rank * BLOCK;
        fill(buf, 10 + round, off, BLOCK);
        check(MPI_File_write_at(fh, off, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), "atomic write_at");
        MPI_Barrier(MPI_COMM_WORLD);
        int other = (rank + 1 + round) % nranks;
        long long o = (long long)other * BLOCK;
        memset(buf, 0, BLOCK);
        check(MPI_File_read_at(fh, o, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE), "atomic read_at");
        expect(buf, 10 + round, o, BLOCK, "atomic read after barrier, without sync");
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* (b) Atomicity: every rank writes the same COUNT strided blocks at once, each with its own
     * byte. Every block must then hold a single rank's byte, and all blocks the same one. */
    MPI_Datatype vec, ftype;
    check(MPI_Type_vector(COUNT, BLOCK, 2 * BLOCK, MPI_BYTE, &vec), "vector");
    check(MPI_Type_create_resized(vec, 0, (MPI_Aint)2 * BLOCK * COUNT, &ftype), "resized");
    check(MPI_Type_commit(&ftype), "commit");
    MPI_Type_free(&vec);
    MPI_Offset base = (MPI_Offset)nranks * BLOCK;
    check(MPI_File_set_view(fh, base, MPI_BYTE, ftype, "native", MPI_INFO_NULL), "set_view");
    for (int round = 0; round < 4; round++) {
        memset(buf, 'A' + rank, (size_t)BLOCK * COUNT);
        MPI_Barrier(MPI_COMM_WORLD);
        check(MPI_File_write_at(fh, 0, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE),
              "atomic strided write");
        MPI_Barrier(MPI_COMM_WORLD);
        memset(buf, 0, (size_t)BLOCK * COUNT);
        check(MPI_File_read_at(fh, 0, buf, BLOCK * COUNT, MPI_BYTE, MPI_STATUS_IGNORE),
              "atomic strided read");
        unsigned char first = buf[0];
        if (first < 'A' || first >= 'A' + nranks) {
            fprintf(stderr, "mpiio rank %d: atomic region holds byte %u\n", rank, first);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        for (long k = 0; k < (long)BLOCK * COUNT; k++) {
            if (buf[k] != first) {
                fprintf(stderr,
                        "mpiio rank %d: round %d: atomic write interleaved: byte %ld of the view "
                        "is '%c', byte 0 is '%c'\n", rank, round, k, buf[k], first);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        /* All ranks agree on the winner. */
        int mine = first, lo, hi;
        MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (lo != hi) {
            fprintf(stderr, "mpiio rank %d: ranks read different winners %c and %c\n", rank, lo, hi);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Type_free(&ftype);
    check(MPI_File_close(&fh), "close atomic");
    free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "atomic") != 0)) {
        if (rank == 0) fprintf(stderr, "usage: mpiio DIR write|read|atomic [atomic]\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    atomic_mode = argc == 4;
    /* Errors return codes (checked above) instead of the default of files: ignore and go on. */
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    if (strcmp(argv[2], "write") == 0)
        do_write(argv[1]);
    else if (strcmp(argv[2], "read") == 0)
        read_back(argv[1], 2);
    else if (strcmp(argv[2], "atomic") == 0)
        do_atomic(argv[1]);
    else {
        if (rank == 0) fprintf(stderr, "mpiio: unknown mode %s\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpiio %s%s: ok (%d ranks)\n", argv[2], atomic_mode ? " atomic" : "", nranks);
    MPI_Finalize();
    return 0;
}
