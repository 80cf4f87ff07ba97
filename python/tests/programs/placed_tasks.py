"""Tasks of the Dask placement test, importable on the workers (each on an emulated host):
a Tessera client per worker process, writers and readers of blocks, and the worker's read
statistics."""

import functools
import os
import socket

import numpy as np

import tessera


@functools.lru_cache(maxsize=None)
def client() -> tessera.Client:
    """This worker's client: the daemon of the host it runs on."""
    return tessera.Client(os.environ["TESSERA_INSTANCE"])


def makedirs(path: str) -> None:
    client().makedirs(path, exist_ok=True)


def write_block(path: str, index: int, rows: int, cols: int) -> str:
    """Writes block `index` (rows x cols int64, values from its position) through this host's
    daemon; the host it ran on."""
    block = np.arange(index * rows * cols, (index + 1) * rows * cols, dtype=np.int64)
    with client().open(path, "wb") as f:
        f.write(block.reshape(rows, cols))
    return socket.gethostname()


def locate_all(paths: list) -> dict:
    """The host holding most of each file's bytes."""
    return {p: client().locate(p)["best_host"] for p in paths}


def read_block(path: str, rows: int, cols: int) -> np.ndarray:
    out = np.empty((rows, cols), dtype=np.int64)
    with client().open(path, "rb", buffering=0) as f:
        assert f.readinto(out) == out.nbytes
    return out


def stats() -> dict:
    """This worker's host and what its client read, by source."""
    return dict(client().read_stats(), host=socket.gethostname())
