/* The C API of the transaction library under mpirun: D2T's sequence, a vote to abort
 * (txn_c abort: the last rank votes abort), and bad calls answered with their codes.
 * Rank 0 prints "txn_c SCENARIO: ok (P processes, S sub-coordinators)". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <tessera_txn.h>

static int rank, size;

#define CHECK(call)                                                                          \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != TESSERA_TXN_OK) {                                                         \
            fprintf(stderr, "txn_c rank %d: %s returned %d: %s\n", rank, #call, rc_,         \
                    tessera_txn_errmsg());                                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
        }                                                                                    \
    } while (0)

static void expect(int got, int want, const char *what, const char *in_message) {
    if (got != want || strstr(tessera_txn_errmsg(), in_message) == NULL) {
        fprintf(stderr, "txn_c rank %d: %s returned %d (want %d), message \"%s\" (want \"%s\")\n",
                rank, what, got, want, tessera_txn_errmsg(), in_message);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int abort_vote = argc > 1 && strcmp(argv[1], "abort") == 0;
    tessera_txn_lib *lib = NULL;
    expect(tessera_txn_init(MPI_COMM_WORLD, NULL), TESSERA_TXN_EINVAL, "init with NULL", "lib is NULL");
    CHECK(tessera_txn_init(MPI_COMM_WORLD, &lib));
    if (tessera_txn_rank(lib) != rank) {
        fprintf(stderr, "txn_c rank %d: the library says rank %d\n", rank, tessera_txn_rank(lib));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    tessera_txn *txn = NULL;
    CHECK(tessera_txn_create_transaction(lib, &txn));
    /* Every process has the same id. */
    unsigned long long id = tessera_txn_id(txn), max = 0, min = 0;
    MPI_Allreduce(&id, &max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&id, &min, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (min != max) {
        fprintf(stderr, "txn_c rank %d: transaction ids differ\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    expect(tessera_txn_commit_transaction(txn), TESSERA_TXN_EORDER, "commit before the vote",
           "vote_transaction");
    char name[32];
    snprintf(name, sizeof name, "part of rank %d", rank);
    tessera_txn_sub mine, read, write;
    CHECK(tessera_txn_create_sub_transaction(txn, name, &mine));
    expect(tessera_txn_create_sub_transaction(txn, NULL, &mine), TESSERA_TXN_EINVAL,
           "a NULL name", "name is NULL");
    CHECK(tessera_txn_create_sub_transaction_all(txn, "read", &read));
    CHECK(tessera_txn_begin_transaction(txn));
    /* One process passes a NULL name to a collective call: every process fails it alike
     * (none waits for it), and the transaction carries on. */
    tessera_txn_sub unused;
    expect(tessera_txn_create_sub_transaction_all(txn, rank == size - 1 ? NULL : "x", &unused),
           TESSERA_TXN_EINVAL, "a NULL name on one process", "name is NULL");
    CHECK(tessera_txn_create_sub_transaction_all(txn, "write", &write));
    tessera_txn_sub bogus = {-2, 0};
    expect(tessera_txn_commit_sub_transaction(txn, bogus), TESSERA_TXN_EINVAL,
           "an owner below -1", "neither a rank nor -1");
    if (tessera_txn_sub_transactions(txn) != size + 2) {
        fprintf(stderr, "txn_c rank %d: knows %d sub-transactions, not %d\n", rank,
                tessera_txn_sub_transactions(txn), size + 2);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (size > 1) {
        tessera_txn_sub theirs = {(rank + 1) % size, 0};
        expect(tessera_txn_commit_sub_transaction(txn, theirs), TESSERA_TXN_ESUB,
               "committing another rank's singleton", "only it commits it");
    }
    CHECK(tessera_txn_commit_sub_transaction(txn, mine));
    CHECK(tessera_txn_commit_sub_transaction(txn, read));
    CHECK(tessera_txn_commit_sub_transaction(txn, write));
    int commit = -1;
    CHECK(tessera_txn_vote_transaction(txn, !(abort_vote && rank == size - 1), &commit));
    if (abort_vote) {
        char want[64];
        snprintf(want, sizeof want, "rank %d voted to abort", size - 1);
        expect(commit, 0, "the decision", want);
        expect(tessera_txn_commit_transaction(txn), TESSERA_TXN_EABORTED, "commit after abort",
               want);
        CHECK(tessera_txn_abort_transaction(txn));
    } else {
        if (commit != 1) {
            fprintf(stderr, "txn_c rank %d: decided %d: %s\n", rank, commit, tessera_txn_errmsg());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        CHECK(tessera_txn_commit_transaction(txn));
        expect(tessera_txn_abort_transaction(txn), TESSERA_TXN_EORDER, "abort after commit",
               "stays committed");
    }
    CHECK(tessera_txn_finalize_txn(txn));
    int subs = tessera_txn_sub_coordinators(lib);
    CHECK(tessera_txn_finalize(lib));
    if (rank == 0)
        printf("txn_c %s: ok (%d processes, %d sub-coordinators)\n", abort_vote ? "abort" : "commit",
               size, subs);
    MPI_Finalize();
    return 0;
}
