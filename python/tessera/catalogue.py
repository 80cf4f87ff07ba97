"""The catalogue of variables (D2T's metadata service) with NumPy arrays in and out.

A variable is a named global array; each process writes its block (a hyperslab) into a file
and adds it as a chunk of the version being made. A reader asks for any hyperslab of a
version and gets it assembled from the chunks, each run read straight into the output
array (no staging copy). In a transaction (``tessera.mpi.Transactions``) what a process
creates, puts and deletes is pending until the transaction commits, and readers see whole
versions only::

    cat = fs.catalogue
    cat.create("temperature", "f8", (64, 64))
    cat.put("temperature", block, offsets=(32 * rank, 0), path=f"/tessera/run/t.{rank}")
    ...
    t = cat.get("temperature", offsets=(0, 16), counts=(64, 8))   # newest version

NumPy is needed only to make arrays (``get`` without ``out``); any buffer works otherwise.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ._buffers import bytes_view
from ._native import Catalogue as _NativeCatalogue

__all__ = ["Catalogue"]

# Element type names shared with the Rust and C interfaces, by NumPy dtype character codes.
_TYPE_NAMES = {
    "b1": "bool",
    "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64",
    "f2": "f16", "f4": "f32", "f8": "f64",
    "c8": "c64", "c16": "c128",
}
_DTYPES = {v: k for k, v in _TYPE_NAMES.items()}


def _type_of(dtype) -> tuple:
    """The catalogue's element type name and size of a NumPy dtype (or its name)."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False):
        raise ValueError(f"dtype {dt}: store little-endian elements (use dtype.newbyteorder('<'))")
    key = f"{dt.kind}{dt.itemsize}"
    return _TYPE_NAMES.get(key, dt.str), dt.itemsize


def dtype_of(elem_type: str):
    """The NumPy dtype of a catalogue element type name (``f64`` -> float64)."""
    import numpy as np

    code = _DTYPES.get(elem_type)
    return np.dtype(code).newbyteorder("<") if code else np.dtype(elem_type)


def _ints(name: str, values, dims: Optional[int] = None) -> list:
    out = [int(v) for v in values]
    if dims is not None and len(out) != dims:
        raise ValueError(f"{name} has {len(out)} entries; the array has {dims} dimensions")
    if any(v < 0 for v in out):
        raise ValueError(f"{name} {out}: give non-negative integers")
    return out


class Catalogue:
    """The catalogue as one client reaches it (``Client.catalogue``)."""

    def __init__(self, native_client):
        self._c = _NativeCatalogue(native_client)

    def create(self, name: str, dtype, shape: Sequence[int]) -> None:
        """Starts a new version of variable ``name``: a global array of ``shape`` whose
        elements are of NumPy ``dtype``. It is numbered when it commits."""
        elem_type, size = _type_of(dtype)
        self._c.create(name, elem_type, size, _ints("shape", shape))

    def put(self, name: str, array, offsets: Sequence[int], path: str, offset: int = 0) -> None:
        """Writes ``array`` (C-contiguous; its shape is the hyperslab's counts) at byte
        ``offset`` of file ``path`` and adds it as the chunk at ``offsets`` of the version of
        ``name`` being made."""
        shape = getattr(array, "shape", None)
        if shape is None:
            raise TypeError("put takes a NumPy array (its shape gives the hyperslab's counts)")
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError("the array is not C-contiguous: pass numpy.ascontiguousarray(a)")
        counts = _ints("shape", shape)
        self._c.put(name, _ints("offsets", offsets, len(counts)), counts, bytes_view(array), path, int(offset))

    def get(self, name: str, offsets: Optional[Sequence[int]] = None,
            counts: Optional[Sequence[int]] = None, out=None, version: Optional[int] = None):
        """The hyperslab at ``offsets`` of ``counts`` (default: the whole array) of version
        ``version`` of ``name`` (default: the newest) as a NumPy array, read from the chunks'
        files straight into ``out`` when given (a C-contiguous array of that shape and the
        variable's dtype, filled in place and returned)."""
        if out is None:
            import numpy as np

            # One lookup sizes the array and pins the version read.
            data, view = self._c.get_new(
                name,
                None if offsets is None else _ints("offsets", offsets),
                None if counts is None else _ints("counts", counts),
                version,
            )
            return np.frombuffer(data, dtype=dtype_of(view["elem_type"])).reshape(view["counts"])
        if offsets is None or counts is None:
            view = self._c.lookup(name, version)
            # The version looked up is the one read, even if a newer one commits meanwhile
            # (0 is the asker's own pending version, which only "newest" reaches).
            version = view["version"] or None
            dims = view["dims"]
            offsets = [0] * len(dims) if offsets is None else offsets
            counts = [d - o for d, o in zip(dims, offsets)] if counts is None else counts
        offsets, counts = _ints("offsets", offsets), _ints("counts", counts)
        if hasattr(out, "shape") and tuple(out.shape) != tuple(counts):
            raise ValueError(f"out has shape {tuple(out.shape)}; the region is {tuple(counts)}")
        self._c.get(name, offsets, counts, bytes_view(out), version)
        return out

    def lookup(self, name: str, version: Optional[int] = None) -> dict:
        """Version ``version`` of ``name`` (default: the newest): ``version``, ``dims``,
        ``elem_type``, ``elem_size`` and ``chunks`` (offsets, counts, path, offset,
        length)."""
        return self._c.lookup(name, version)

    def list(self) -> list:
        """Every variable with its newest version, as (name, version) pairs."""
        return self._c.list()

    def delete(self, name: str) -> None:
        """Deletes every version of ``name``."""
        self._c.delete(name)

    def wait(self, name: str, version: int, timeout: float) -> int:
        """Waits until ``name`` has a committed version of at least ``version`` (at most
        ``timeout`` seconds): the newest version then. ``TimeoutError`` if none came."""
        return self._c.wait(name, version, timeout)
