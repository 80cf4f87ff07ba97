"""An mpi4py program that writes one data set as a D2T transaction: every rank writes its
block of rows of variable "field" into its own file and adds it as a chunk; rank 0 creates
the variable's new version. With `abort`, the last rank votes to abort. Rank 0 prints the
outcome as JSON.

    mpirun -n N python txn_writer.py INSTANCE DIR VALUE commit|abort
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
    t = txns.create()
    t.begin()
    if rank == 0:
        fs.catalogue.create("field", np.float64, (ROWS * size, COLS))
    comm.Barrier()  # the pending version exists before the chunks join it
    fs.catalogue.put("field", block, (ROWS * rank, 0), path)
    with fs.open(path + ".raw", "wb") as f:
        f.write(block)
    reasons = t.vote(not (mode == "abort" and rank == size - 1))
    t.commit() if reasons is None else t.abort()
    phase = t.finalize()
    if rank == 0:
        print(json.dumps({"phase": phase, "reasons": reasons or []}))


if __name__ == "__main__":
    main()
