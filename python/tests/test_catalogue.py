"""The catalogue of variables from Python: NumPy blocks in as chunks, any hyperslab out,
assembled from the chunks' files in place, with whole versions kept apart."""

import errno
import random
import tracemalloc

import numpy as np
import pytest


def write_blocks(fs, name, full, rows_per_block, path_prefix):
    """Puts `full` as row blocks, one file per block, as one process per block would."""
    cat = fs.catalogue
    cat.create(name, full.dtype, full.shape)
    for i, start in enumerate(range(0, full.shape[0], rows_per_block)):
        block = np.ascontiguousarray(full[start:start + rows_per_block])
        cat.put(name, block, offsets=(start,) + (0,) * (full.ndim - 1),
                path=f"{path_prefix}.{i}", offset=64 * i)


def test_any_hyperslab_reads_back_as_numpy_slices_do(fs, other):
    fs.makedirs("/tessera/cat", exist_ok=True)
    full = np.arange(24 * 10 * 6, dtype=np.float64).reshape(24, 10, 6)
    write_blocks(fs, "cube", full, 5, "/tessera/cat/cube")
    cat = other.catalogue
    whole = cat.get("cube")
    assert whole.dtype == np.float64 and np.array_equal(whole, full)
    rng = random.Random(7)
    for _ in range(60):
        offsets = [rng.randrange(d) for d in full.shape]
        counts = [rng.randrange(1, d - o + 1) for d, o in zip(full.shape, offsets)]
        got = cat.get("cube", offsets, counts)
        want = full[tuple(slice(o, o + n) for o, n in zip(offsets, counts))]
        assert np.array_equal(got, want), (offsets, counts)
    info = cat.lookup("cube")
    assert info["dims"] == [24, 10, 6] and info["elem_type"] == "f64"
    assert len(info["chunks"]) == 5
    assert ("cube", info["version"]) in cat.list()


def test_get_fills_the_callers_array_in_place(fs):
    fs.makedirs("/tessera/cat", exist_ok=True)
    full = np.random.default_rng(1).integers(0, 1 << 30, size=(512, 2048), dtype=np.int32)
    write_blocks(fs, "big", full, 128, "/tessera/cat/big")
    out = np.zeros((512, 1024), dtype=np.int32)
    cat = fs.catalogue
    cat.get("big", (0, 0), (1, 1024), out=out[:1])  # warm up
    tracemalloc.start()
    got = cat.get("big", (0, 512), (512, 1024), out=out)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got is out
    assert np.array_equal(out, full[:, 512:1536])
    assert peak < 64 * 1024, f"get allocated {peak} bytes for a 2 MiB region"


def test_versions_stay_whole_and_apart(fs, other):
    fs.makedirs("/tessera/cat", exist_ok=True)
    first = np.full((8, 8), 1.5, dtype=np.float32)
    write_blocks(fs, "field", first, 4, "/tessera/cat/field-v1")
    v1 = fs.catalogue.lookup("field")["version"]
    second = np.full((8, 8), 2.5, dtype=np.float32)
    write_blocks(fs, "field", second, 2, "/tessera/cat/field-v2")
    assert other.catalogue.wait("field", v1 + 1, timeout=10) == v1 + 1
    assert np.array_equal(other.catalogue.get("field"), second)
    assert np.array_equal(other.catalogue.get("field", version=v1), first)
    with pytest.raises(TimeoutError):
        other.catalogue.wait("field", v1 + 5, timeout=0.2)


def test_bad_regions_name_what_is_wrong(fs):
    fs.makedirs("/tessera/cat", exist_ok=True)
    cat = fs.catalogue
    cat.create("partial", "i8", (4, 4))
    cat.put("partial", np.ones((2, 4), dtype=np.int64), (0, 0), "/tessera/cat/partial")
    # Rows 2 and 3 were never written: not silently zeros.
    with pytest.raises(OSError) as e:
        cat.get("partial")
    assert e.value.errno == errno.ENODATA and "8 of the 16 elements" in str(e.value)
    with pytest.raises(OSError) as e:
        cat.get("partial", (3, 0), (2, 4))
    assert e.value.errno == errno.EINVAL and "reaches past" in str(e.value)
    with pytest.raises(ValueError, match="shape"):
        cat.get("partial", (0, 0), (2, 4), out=np.zeros((4, 2), dtype=np.int64))
    with pytest.raises(OSError) as e:
        cat.put("partial", np.ones((3, 4), dtype=np.int64), (2, 0), "/tessera/cat/partial")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        cat.get("nothing-here")
    with pytest.raises(ValueError, match="C-contiguous"):
        cat.put("partial", np.ones((4, 4), dtype=np.int64)[:, :2], (0, 0), "/tessera/cat/p2")
    cat.delete("partial")
    assert "partial" not in [n for n, _ in cat.list()]
