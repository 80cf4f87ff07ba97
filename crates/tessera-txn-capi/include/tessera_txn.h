/* tessera_txn.h: MxN transactions over MPI (D2T, D2T), the C API of libtessera_txn.so.
 *
 * A transaction is agreed on by the processes of an MPI communicator, organised in D2T's
 * tiers: a coordinator, sub-coordinators each serving at most 256 processes (at least two of
 * them), and subordinates. Every collective move below is a gather to the sub-coordinators, a
 * reduction to unique items, a gather to the coordinator and a broadcast back down, so no
 * process receives more than its group's and the sub-coordinators' messages.
 *
 * The calls, in order (C = collective over the communicator, L = local):
 *
 *   tessera_txn_init                            C  once per communicator
 *   tessera_txn_create_transaction              C  the next id of a block the coordinator
 *                                                  reserved: a move only once per 1,024
 *   tessera_txn_create_sub_transaction          L  a singleton of this process, before begin
 *   tessera_txn_create_sub_transaction_all      C  a global one: before begin it is declared
 *                                                  and begin checks it; after begin, a move
 *   tessera_txn_begin_transaction               C  every process learns every singleton, and
 *                                                  becomes a member in Tessera
 *   tessera_txn_commit_sub_transaction          L  this process's part of one
 *   tessera_txn_vote_transaction                C  any process may vote abort; the vote
 *                                                  decides (durably, with Tessera beneath)
 *   tessera_txn_commit_transaction              C  after a vote to commit (takes the
 *                                                  decision up: no move)
 *   tessera_txn_abort_transaction               C  before the vote (a move), or after a vote
 *                                                  to abort (no move); refused after a vote
 *                                                  to commit: the decision stands
 *   tessera_txn_finalize_txn                    C* frees the transaction
 *   tessera_txn_finalize                        C* frees the library (before MPI_Finalize)
 *
 * (C*: local, but the last of the two frees the library's communicators, which is
 * collective.)
 *
 * The functions that act return TESSERA_TXN_OK (0) or a negative TESSERA_TXN_E* code, and
 * tessera_txn_errmsg() then says what was wrong and how to fix it; the ones that only read a
 * value (tessera_txn_rank, _sub_coordinators, _sub_transactions, _id) return it, or -1 (0 for
 * the id) for a NULL handle. A collective move that fails on one process fails on every
 * process with the same code: a bad argument or a call out of order on one process is sent
 * through the move to the others, and processes that make different moves at the same point
 * all get TESSERA_TXN_EDISAGREE and may then agree (a bad argument to a call that makes no
 * move, such as a create within a reserved block or a global declared before begin, fails
 * that process at once, and the declaration's refusal fails begin on every process). A NULL
 * library or transaction handle cannot take part, so the others wait for that process: it is
 * a program error, as an invalid communicator is to MPI.
 *
 * Handles are not thread-safe: use a library and its transactions from one thread (MPI's
 * collectives order them anyway). The library frees its communicators (MPI_Comm_free, a
 * collective call) when the library and all its transactions are finalized: finalize them on
 * every process, before MPI_Finalize.
 *
 * The library is built against Open MPI (the MPI_Comm of <mpi.h> from libopenmpi-dev); call
 * MPI_Init first. Link with -ltessera_txn.
 */
#ifndef TESSERA_TXN_H
#define TESSERA_TXN_H

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_TXN_OK 0
/* A NULL pointer, a name that is not UTF-8, a bad TESSERA_TXN_FAN_IN, or such an argument of
 * another process in the same collective call. */
#define TESSERA_TXN_EINVAL (-1)
/* A call out of order (for example commit before the vote). */
#define TESSERA_TXN_EORDER (-2)
/* The transaction was voted (or failed) to abort; the message lists every reason. */
#define TESSERA_TXN_EABORTED (-3)
/* The processes disagree (for example on a global sub-transaction's name). */
#define TESSERA_TXN_EDISAGREE (-4)
/* No such sub-transaction, or a singleton committed by a process that does not own it. */
#define TESSERA_TXN_ESUB (-5)
/* A message between the processes could not be read, or an internal error. */
#define TESSERA_TXN_EINTERNAL (-6)

/* The library of one communicator, and one transaction. */
typedef struct tessera_txn_lib tessera_txn_lib;
typedef struct tessera_txn tessera_txn;

/* A sub-transaction: owner is the rank of a singleton's process, or -1 for a global one. */
typedef struct tessera_txn_sub {
    int32_t owner;
    uint32_t seq;
} tessera_txn_sub;

/* The message of the calling thread's last failure ("" if none). Valid until its next call. */
const char *tessera_txn_errmsg(void);

/* Splits a duplicate of comm into the tiers; *lib receives the library. */
int tessera_txn_init(MPI_Comm comm, tessera_txn_lib **lib);
/* This process's rank, and the number of sub-coordinators. */
int tessera_txn_rank(const tessera_txn_lib *lib);
int tessera_txn_sub_coordinators(const tessera_txn_lib *lib);

int tessera_txn_create_transaction(tessera_txn_lib *lib, tessera_txn **txn);
/* The id every process of the transaction shares. */
uint64_t tessera_txn_id(const tessera_txn *txn);
int tessera_txn_create_sub_transaction(tessera_txn *txn, const char *name, tessera_txn_sub *sub);
int tessera_txn_create_sub_transaction_all(tessera_txn *txn, const char *name,
                                           tessera_txn_sub *sub);
int tessera_txn_begin_transaction(tessera_txn *txn);
/* After begin: how many sub-transactions this process knows (every process's singletons and
 * the global ones). */
int tessera_txn_sub_transactions(const tessera_txn *txn);
int tessera_txn_commit_sub_transaction(tessera_txn *txn, tessera_txn_sub sub);
/* Votes (ok = 0 votes abort). *commit receives 1 if every process voted to commit and every
 * sub-transaction was committed, else 0 (tessera_txn_errmsg() then lists why). */
int tessera_txn_vote_transaction(tessera_txn *txn, int ok, int *commit);
int tessera_txn_commit_transaction(tessera_txn *txn);
int tessera_txn_abort_transaction(tessera_txn *txn);
/* Frees txn (NULL is allowed). */
int tessera_txn_finalize_txn(tessera_txn *txn);
/* Frees lib (NULL is allowed); its transactions must be finalized first. */
int tessera_txn_finalize(tessera_txn_lib *lib);

#ifdef __cplusplus
}
#endif

#endif
