"""A PyTorch-style map-style Dataset over a Tessera directory: one sample per file, read
with `readinto` into a buffer of the file's size (no copy beyond the one from the log).

    from torch.utils.data import DataLoader
    ds = TesseraDataset("/tessera/imagenet/train", decode=lambda b: torch.frombuffer(b, dtype=torch.uint8))
    for batch in DataLoader(ds, batch_size=64, shuffle=True, num_workers=4):
        ...

It subclasses `torch.utils.data.Dataset` when PyTorch is installed and works without it
(any sampler that calls `len` and `[i]` drives it). Each process makes its own client on
first use, so DataLoader's worker processes, forked or spawned, each talk to their host's
daemon themselves.
"""

import os
from typing import Callable, Optional

import tessera

try:
    from torch.utils.data import Dataset
except ImportError:  # the example runs without PyTorch
    Dataset = object


class TesseraDataset(Dataset):
    def __init__(self, directory: str, instance: Optional[str] = None,
                 decode: Optional[Callable[[bytearray], object]] = None):
        self.directory = directory.rstrip("/")
        self.instance = instance
        self.decode = decode
        self._client, self._pid = None, None
        self.names = self.client().listdir(self.directory)

    def client(self) -> tessera.Client:
        # One client per process: a DataLoader worker must not use its parent's.
        if self._pid != os.getpid():
            self._client, self._pid = tessera.Client(self.instance), os.getpid()
        return self._client

    def __getstate__(self):
        # Spawned workers get the paths, not the parent's connection.
        return dict(self.__dict__, _client=None, _pid=None)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int):
        path = f"{self.directory}/{self.names[i]}"
        with self.client().open(path, "rb", buffering=0, model="session") as f:
            buf = bytearray(f.size())
            if f.readinto(buf) != len(buf):
                raise OSError(f"{path} changed size while it was read")
        return self.decode(buf) if self.decode else buf
