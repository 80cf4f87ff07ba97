"""The guide's examples run as shown (without PyTorch)."""

import os
import pickle
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

from torch_dataset import TesseraDataset  # noqa: E402


def test_the_dataset_example_reads_every_sample_in_any_order(instance, fs):
    fs.makedirs("/tessera/ds/train", exist_ok=True)
    samples = {f"s{i:03}.bin": os.urandom(1000 + 37 * i) for i in range(40)}
    for name, data in samples.items():
        with fs.open(f"/tessera/ds/train/{name}", "wb") as f:
            f.write(data)
    ds = TesseraDataset("/tessera/ds/train", instance=instance[0], decode=bytes)
    assert len(ds) == 40
    order = list(range(len(ds)))
    random.Random(1).shuffle(order)
    for i in order:
        assert ds[i] == samples[ds.names[i]]
    # What a spawned DataLoader worker receives: the paths, not the connection.
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._client is None and clone[3] == samples[ds.names[3]]
