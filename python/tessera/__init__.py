"""Tessera from Python: a client of an instance's daemons, and its files as Python file objects.

    import tessera
    fs = tessera.Client()                       # the instance of TESSERA_INSTANCE
    with fs.open("/tessera/run1/out.bin", "wb") as f:
        f.write(b"...")
    with fs.open("/tessera/run1/out.bin", "rb", model="posix") as f:
        buf = bytearray(1 << 20)
        n = f.readinto(buf)                     # filled in place

Errors are ``OSError`` subclasses carrying errno and Tessera's message
(``FileNotFoundError`` for ENOENT, ...), as for Python's own file calls.
"""

from __future__ import annotations

import io
import os
from typing import Optional, Union

from ._buffers import bytes_view
from ._native import Client as _NativeClient
from ._native import File as _NativeFile
from ._native import Stat
from .catalogue import Catalogue

__all__ = ["Catalogue", "Client", "RawFile", "Stat", "MODELS"]

#: The consistency models an open may ask for.
MODELS = ("posix", "commit", "session", "mpiio")


class RawFile(io.RawIOBase):
    """An open Tessera file as an unbuffered binary file (``io.RawIOBase``).

    ``readinto`` fills the caller's buffer in place; ``io.BufferedReader`` and friends
    work on top (``Client.open`` adds them as the built-in ``open`` does).
    """

    def __init__(self, native: _NativeFile, mode: str):
        super().__init__()
        self._f = native
        self.mode = mode

    @property
    def name(self) -> str:
        return self._f.name

    def readable(self) -> bool:
        return self._f.readable

    def writable(self) -> bool:
        return self._f.writable

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        # As bytes whatever the item type (a NumPy or array.array of floats), as io does.
        return self._f.readinto(bytes_view(buffer))

    def read(self, size: int = -1) -> bytes:
        return self._f.read(size)

    def readall(self) -> bytes:
        return self._f.read(-1)

    def write(self, data) -> int:
        return self._f.write(bytes_view(data))

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def size(self) -> int:
        """The file's size as this process sees it."""
        return self._f.size()

    def commit(self) -> None:
        """Publishes this process's writes without closing (a close publishes too)."""
        self._f.commit()

    # The synchronisation primitives of Wang, Mohror and Snir, on this open file.

    def attach(self, offset: int = 0, length: Optional[int] = None) -> None:
        """Makes this process's writes of the range visible to every process (the whole
        file's when ``length`` is None)."""
        self._f.attach(offset, length)

    def query(self, offset: int = 0, length: Optional[int] = None) -> list:
        """Who holds the newest attached bytes of the range: ``(start, end, node, client)``
        extents, ascending."""
        return self._f.query(offset, length)

    def detach(self, offset: int = 0, length: Optional[int] = None) -> None:
        """Gives up this process's ownership of the range (flush first to keep it)."""
        self._f.detach(offset, length)

    def flush_to_pfs(self, offset: int = 0, length: Optional[int] = None) -> int:
        """Writes the range into the instance's PFS directory; the bytes written."""
        return self._f.flush_to_pfs(offset, length)

    def fsync(self) -> None:
        """Publishes the writes and makes this process's logs of the file durable."""
        self._f.fsync()

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


def _flags(mode: str) -> dict:
    """open(2)'s flags of a built-in ``open`` mode (``rb``, ``w``, ``a+``, ``x``...)."""
    kinds = set(mode)
    if not kinds <= set("rwaxbt+") or len(kinds) != len(mode):
        raise ValueError(f"invalid mode: {mode!r}")
    main = kinds & set("rwax")
    if len(main) != 1 or {"b", "t"} <= kinds:
        raise ValueError(
            f"invalid mode: {mode!r} (one of r, w, a, x, optionally + and b or t)"
        )
    (m,) = main
    plus = "+" in kinds
    return dict(
        read=m == "r" or plus,
        write=m != "r" or plus,
        create=m != "r",
        truncate=m == "w",
        append=m == "a",
        exclusive=m == "x",
    )


class Client:
    """A client of one daemon of a Tessera instance.

    ``instance`` is the instance directory (default: ``TESSERA_INSTANCE``), ``node`` the
    daemon (default: the one on this host). Paths are Tessera paths, under the instance's
    prefix (``/tessera/...``).
    """

    def __init__(self, instance: Optional[Union[str, os.PathLike]] = None,
                 node: Optional[int] = None):
        self._c = _NativeClient(os.fspath(instance) if instance is not None else None, node)

    @property
    def prefix(self) -> str:
        """The instance's mount prefix (``/tessera`` unless set otherwise)."""
        return self._c.prefix

    @property
    def node(self) -> int:
        """The node this client talks to."""
        return self._c.node

    def open(self, path: str, mode: str = "r", buffering: int = -1,
             encoding: Optional[str] = None, errors: Optional[str] = None,
             newline: Optional[str] = None, *, model: Optional[str] = None):
        """Opens ``path`` as the built-in ``open`` does (modes, buffering, text or binary);
        ``model`` chooses the consistency model of this open (one of ``MODELS``; default:
        the instance's)."""
        flags = _flags(mode)
        if model is not None and model not in MODELS:
            raise ValueError(f"model {model!r} is not one of {', '.join(MODELS)}")
        binary = "b" in mode
        if binary and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        if buffering == 0 and not binary:
            raise ValueError("can't have unbuffered text I/O")
        raw = RawFile(self._c.open(path, model=model, **flags), mode)
        if flags["append"]:
            # As the built-in open does: the position starts at the end.
            raw.seek(0, os.SEEK_END)
        if buffering == 0:
            return raw
        size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
        try:
            if flags["read"] and flags["write"]:
                buffered = io.BufferedRandom(raw, size)
            elif flags["write"]:
                buffered = io.BufferedWriter(raw, size)
            else:
                buffered = io.BufferedReader(raw, size)
            if binary:
                return buffered
            text = io.TextIOWrapper(buffered, encoding or "utf-8", errors, newline)
            text.mode = mode
            return text
        except BaseException:
            raw.close()
            raise

    def locate(self, path: str, offset: int = 0, length: Optional[int] = None) -> dict:
        """Where the bytes of a range of ``path`` live, for schedulers: ``size``,
        ``extents`` (start, end, host, node, residence), ``bytes_by_host``,
        ``pfs_only_bytes``, ``best_host`` (the host holding most of them, or None)."""
        return self._c.locate(path, offset, length)

    @property
    def catalogue(self) -> Catalogue:
        """The catalogue of variables (D2T): NumPy arrays in and out by hyperslab."""
        return Catalogue(self._c)

    def read_stats(self) -> dict:
        """Bytes this process has read through Tessera, by source: ``own_log``,
        ``node_logs`` (this node's logs), ``remote`` and ``read_ahead_*`` (other nodes'),
        ``pfs``, ``holes``, ``own_unattached``; and its ``requests``."""
        return self._c.read_stats()

    def flush(self, path: str) -> int:
        """Writes file ``path`` into the instance's PFS directory (atomically); the bytes
        written."""
        return self._c.flush(path)

    def stat(self, path: str) -> Stat:
        return self._c.stat(path)

    def exists(self, path: str) -> bool:
        try:
            self._c.stat(path)
            return True
        except FileNotFoundError:
            return False

    def listdir(self, path: str) -> list:
        """The names in directory ``path``, sorted."""
        return self._c.listdir(path)

    def mkdir(self, path: str, mode: int = 0o777) -> None:
        self._c.mkdir(path, mode)

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        """Makes ``path`` and any missing directories above it under the prefix."""
        parts = path.rstrip("/").split("/")
        for i in range(2, len(parts) + 1):
            at = "/".join(parts[:i])
            if len(at) <= len(self.prefix.rstrip("/")):
                continue
            try:
                self._c.mkdir(at, mode)
            except FileExistsError:
                if at == path.rstrip("/") and not exist_ok:
                    raise

    def remove(self, path: str) -> None:
        self._c.unlink(path)

    unlink = remove

    def rmdir(self, path: str) -> None:
        self._c.rmdir(path)

    def rename(self, src: str, dst: str) -> None:
        self._c.rename(src, dst)
