"""An mpi4py program that writes one data set as a D2T transaction: every rank writes its
block of rows of variable "field" into its own file and adds it as a chunk; rank 0 creates
the variable's new version. `commit` runs in `Transactions.transaction()`; `abort` makes
the calls one by one and the last rank votes to abort; `raise` runs in `transaction()` and
the last rank raises inside it. Rank 0 prints the outcome as JSON.

    mpirun -n N python txn_writer.py INSTANCE DIR VALUE commit|abort|raise
"""

import json
import sys

import numpy as np
from mpi4py import MPI

import tessera
import tessera.mpi

ROWS, COLS = 4, 8


def main():
    instance, directory, value, mode = sys.argv[1:5]
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    # Two daemons on this machine: ranks alternate between them, as across two hosts.
    fs = tessera.Client(instance, node=rank % 2)
    txns = tessera.mpi.Transactions(comm, fs)
    path = f"{directory}/part.{rank}"
    block = np.full((ROWS, COLS), float(value), dtype=np.float64)

    def write():
        if rank == 0:
            fs.catalogue.create("field", np.float64, (ROWS * size, COLS))
        comm.Barrier()  # the pending version exists before the chunks join it
        fs.catalogue.put("field", block, (ROWS * rank, 0), path)
        with fs.open(path + ".raw", "wb") as f:
            f.write(block)

    if mode == "abort":
        t = txns.create()
        t.begin()
        write()
        reasons = t.vote(not (mode == "abort" and rank == size - 1))
        t.commit() if reasons is None else t.abort()
        phase = t.finalize()
    else:
        phase, reasons = "committed", None
        try:
            with txns.transaction():
                write()
                if mode == "raise" and rank == size - 1:
                    raise ValueError("out of samples")
        except tessera.mpi.TransactionAborted as e:
            phase, reasons = "aborted", e.reasons
        except ValueError:
            phase, reasons = "raised", []
    if rank == 0:
        print(json.dumps({"phase": phase, "reasons": reasons or []}))


if __name__ == "__main__":
    main()
