"""fsspec's file system for Tessera: ``tessera:///run1/data.parquet`` in pandas, xarray, Dask
and PyArrow.

Registered under the protocol ``tessera`` through the package's ``fsspec.specs`` entry
point, so ``fsspec.filesystem("tessera")`` and ``pandas.read_parquet("tessera:///...")``
find it once the package is installed. A URL's path is relative to the instance's prefix:
``tessera:///run1/x`` is the Tessera path ``/tessera/run1/x``. Storage options: ``instance``
(the instance directory; default ``TESSERA_INSTANCE``), ``node`` (the daemon; default
this host's) and ``auto_mkdir`` (default True: opening a file for writing makes its missing
parent directories, as object stores behave and as Zarr and Parquet writers expect).
"""

from __future__ import annotations

import datetime
from typing import Optional

from fsspec.spec import AbstractFileSystem

from . import Client


class TesseraFileSystem(AbstractFileSystem):
    """A Tessera instance as an fsspec file system."""

    protocol = "tessera"
    root_marker = "/"

    def __init__(self, instance: Optional[str] = None, node: Optional[int] = None,
                 auto_mkdir: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.client = Client(instance, node)
        self.auto_mkdir = auto_mkdir
        self._prefix = self.client.prefix.rstrip("/")

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("tessera://"):
            path = path[len("tessera://"):]
        path = "/" + path.strip("/")
        return path

    def _full(self, path: str) -> str:
        """The Tessera path of an fsspec path (or URL)."""
        path = self._strip_protocol(path)
        return self._prefix if path == "/" else self._prefix + path

    def _entry(self, path: str, st) -> dict:
        kind = {"file": "file", "dir": "directory", "symlink": "other"}[st.kind]
        return {
            "name": self._strip_protocol(path),
            "size": st.st_size,
            "type": kind,
            "mode": st.st_mode,
            "ino": st.st_ino,
            "nlink": st.st_nlink,
            "mtime": st.st_mtime_ns / 1e9,
        }

    def info(self, path, **kwargs):
        return self._entry(path, self.client.stat(self._full(path)))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        info = self.info(path)
        if info["type"] != "directory":
            return [info] if detail else [info["name"]]
        base = path.rstrip("/")
        names = [f"{base}/{n}" for n in self.client.listdir(self._full(path))]
        if not detail:
            return names
        return [self.info(n) for n in names]

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        buffering = -1 if block_size in (None, "default") else int(block_size)
        if self.auto_mkdir and set(mode) & set("wax+"):
            parent = self._parent(self._strip_protocol(path))
            if parent not in ("", "/"):
                self.makedirs(parent, exist_ok=True)
        return self.client.open(self._full(path), mode, buffering=buffering,
                                model=kwargs.get("model"))

    def cat_file(self, path, start=None, end=None, **kwargs):
        with self.client.open(self._full(path), "rb", buffering=0) as f:
            size = f.size()
            start = 0 if start is None else (start if start >= 0 else max(0, size + start))
            end = size if end is None else (end if end >= 0 else max(0, size + end))
            f.seek(start)
            return f.read(max(0, end - start))

    def mkdir(self, path, create_parents=True, **kwargs):
        if create_parents:
            self.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(self._full(path))

    def makedirs(self, path, exist_ok=False):
        self.client.makedirs(self._full(path), exist_ok=exist_ok)

    def rmdir(self, path):
        self.client.rmdir(self._full(path))

    def _rm(self, path):
        full = self._full(path)
        if self.client.stat(full).kind == "dir":
            self.client.rmdir(full)
        else:
            self.client.remove(full)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        self.client.rename(self._full(path1), self._full(path2))

    def modified(self, path):
        st = self.client.stat(self._full(path))
        return datetime.datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=datetime.timezone.utc)

    def locate(self, path, offset: int = 0, length: Optional[int] = None) -> dict:
        """Where the bytes of ``path`` live (see ``tessera.Client.locate``), for placing the
        tasks that read them."""
        return self.client.locate(self._full(path), offset, length)
