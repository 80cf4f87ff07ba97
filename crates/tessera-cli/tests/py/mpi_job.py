"""An unmodified mpi4py program: every rank writes its block of FILE (every byte VERSION) with
one collective MPI-IO write and closes the file; with `crash` the last rank dies before the end.

    python3 mpi_job.py FILE VERSION BLOCK [crash]
"""
import os
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
path, version, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY)
fh.Write_at_all(rank * block, bytes([version]) * block)
fh.Close()
comm.Barrier()
if sys.argv[4:] == ["crash"] and rank == size - 1:
    os.abort()
if rank == 0:
    print("mpi_job.py: done")
