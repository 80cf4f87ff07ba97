"""MxN transactions (D2T) over an mpi4py communicator: every process of the communicator
writes its part of a data set, files and catalogue entries alike, and the vote publishes all
of it at once, or none of it::

    from mpi4py import MPI
    import tessera, tessera.mpi

    fs = tessera.Client()
    txns = tessera.mpi.Transactions(MPI.COMM_WORLD, fs)
    with txns.transaction():                # begin; vote and commit (or abort) at the end
        with fs.open(f"/tessera/run/part.{rank}", "wb") as f:
            f.write(block)
        fs.catalogue.put("field", block, offsets, f"/tessera/run/part.{rank}")

Every call here is collective over the communicator unless it says otherwise. Files written
in a transaction are closed inside it (a close publishes). Needs the package built with MPI
(``MATURIN_PEP517_ARGS="--features mpi" pip install ./python``) and mpi4py of the same MPI
(Debian's ``python3-mpi4py`` with Debian's Open MPI).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from . import _native

__all__ = ["Transactions", "Transaction", "TransactionError", "TransactionAborted"]

if _native.HAS_MPI:
    TransactionError = _native.TransactionError
else:

    class TransactionError(RuntimeError):
        """A transaction call that failed."""


class TransactionAborted(TransactionError):
    """The vote aborted the transaction; ``reasons`` says why, one line per reason."""

    def __init__(self, reasons: list):
        super().__init__("the transaction was aborted: " + "; ".join(reasons))
        self.reasons = reasons


def _require_mpi() -> None:
    if not _native.HAS_MPI:
        raise ImportError(
            "this build of tessera has no MPI: reinstall it with "
            "MATURIN_PEP517_ARGS='--features mpi' pip install ./python "
            "(needs an MPI's headers, libclang and mpi4py of the same MPI)"
        )


class Transaction:
    """One transaction as this process takes part in it (``Transactions.create``)."""

    def __init__(self, native):
        self._t = native

    @property
    def id(self) -> int:
        return self._t.id

    @property
    def phase(self) -> str:
        """``created``, ``begun``, ``voted-commit``, ``voted-abort``, ``committed`` or
        ``aborted``."""
        return self._t.phase

    def sub(self, name: str) -> tuple:
        """A singleton sub-transaction of this process (before begin; local)."""
        return self._t.sub(name)

    def sub_all(self, name: str) -> tuple:
        """A global sub-transaction, named alike by every process."""
        return self._t.sub_all(name)

    def commit_sub(self, sub: tuple) -> None:
        """Commits this process's part of a sub-transaction (local)."""
        self._t.commit_sub(sub)

    def begin(self) -> None:
        """Every process becomes a member: what it writes from now on is pending."""
        self._t.begin()

    def vote(self, ok: bool = True) -> Optional[list]:
        """Votes; ``None`` when the transaction commits everywhere, else the reasons it
        aborts. Close the files written in it first."""
        return self._t.vote(ok)

    def commit(self) -> None:
        """Takes up a decision to commit (local)."""
        self._t.commit()

    def abort(self) -> None:
        """Aborts: before the vote collective (what was written goes), after a vote to abort
        local."""
        self._t.abort()

    def finalize(self) -> str:
        """Ends this process's part (local); the phase it came to."""
        return self._t.finalize()


class Transactions:
    """The transactions of the processes of ``comm`` (an mpi4py intra-communicator), with
    ``client`` (a ``tessera.Client``) beneath. Splits a duplicate of ``comm`` into D2T's
    tiers (a coordinator, sub-coordinators of at most 256 processes, subordinates)."""

    def __init__(self, comm, client):
        _require_mpi()
        from mpi4py import MPI

        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise TypeError(f"{comm!r}: pass a live mpi4py intra-communicator")
        self._txns = _native.Transactions(MPI._addressof(comm), client._c)

    @property
    def rank(self) -> int:
        return self._txns.rank

    def create(self) -> Transaction:
        """A new transaction (not begun)."""
        return Transaction(self._txns.create())

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Creates and begins a transaction; at the end of the block every process votes,
        to commit unless the block raised (then the exception goes on once the transaction
        is aborted everywhere). ``TransactionAborted`` if another process voted abort."""
        t = self.create()
        t.begin()
        try:
            yield t
        except BaseException:
            reasons = t.vote(False)
            t.abort() if reasons is not None else t.commit()
            t.finalize()
            raise
        reasons = t.vote(True)
        if reasons is None:
            t.commit()
            t.finalize()
        else:
            t.abort()
            t.finalize()
            raise TransactionAborted(reasons)
