"""The readers that take fsspec URLs, on tessera:// (full tier): pandas (Parquet and CSV),
PyArrow, NumPy, xarray (Zarr by URL, NetCDF through a file object) and a Dask array."""

import numpy as np
import pytest

pytestmark = pytest.mark.full


@pytest.fixture
def opts(instance):
    return {"instance": instance[0], "node": 0}


def test_pandas_parquet_and_csv(opts, fs):
    import pandas as pd

    df = pd.DataFrame({
        "step": np.arange(10_000),
        "energy": np.linspace(0.0, 1.0, 10_000),
        "tag": ["a", "b", "c", "d"] * 2_500,
    })
    df.to_parquet("tessera:///readers/run1/table.parquet", storage_options=opts)
    back = pd.read_parquet("tessera:///readers/run1/table.parquet", storage_options=opts)
    pd.testing.assert_frame_equal(back, df)
    # Only some columns: PyArrow reads the footer and those columns' ranges.
    part = pd.read_parquet("tessera:///readers/run1/table.parquet", columns=["energy"],
                           storage_options=opts)
    assert part["energy"].equals(df["energy"])
    df.to_csv("tessera:///readers/run1/table.csv", index=False, storage_options=opts)
    csv = pd.read_csv("tessera:///readers/run1/table.csv", storage_options=opts)
    pd.testing.assert_frame_equal(csv, df)
    assert fs.stat("/tessera/readers/run1/table.csv").st_size > 100_000


def test_pyarrow_dataset_over_the_file_system(opts):
    import fsspec
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    tfs = fsspec.filesystem("tessera", **opts)
    for part in range(3):
        t = pa.table({"part": [part] * 100, "x": list(range(part * 100, part * 100 + 100))})
        pq.write_table(t, f"/readers/ds/part-{part}.parquet", filesystem=tfs)
    table = ds.dataset("/readers/ds", filesystem=tfs, format="parquet").to_table()
    assert sorted(table.column("x").to_pylist()) == list(range(300))


def test_numpy_arrays_save_and_load(opts):
    import fsspec

    a = np.random.default_rng(3).standard_normal((256, 128))
    with fsspec.open("tessera:///readers/arr.npy", "wb", **opts) as f:
        np.save(f, a)
    with fsspec.open("tessera:///readers/arr.npy", "rb", **opts) as f:
        assert np.array_equal(np.load(f), a)
    # A memory-mapped-style partial read: one row through a seek.
    with fsspec.open("tessera:///readers/arr.npy", "rb", **opts) as f:
        np.lib.format.read_magic(f)
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        f.seek(100 * 128 * 8, 1)
        row = np.frombuffer(f.read(128 * 8), dtype=dtype)
    assert shape == (256, 128) and np.array_equal(row, a[100])


def test_xarray_zarr_by_url_and_netcdf_by_file(opts):
    import fsspec
    import xarray as xr

    ds = xr.Dataset(
        {"temperature": (("time", "x"), np.arange(24.0).reshape(4, 6))},
        coords={"time": np.arange(4), "x": np.linspace(0, 1, 6)},
        attrs={"run": "readers"},
    )
    ds.to_zarr("tessera:///readers/run.zarr", storage_options=opts, mode="w")
    back = xr.open_zarr("tessera:///readers/run.zarr", storage_options=opts)
    xr.testing.assert_identical(back.load(), ds)
    with fsspec.open("tessera:///readers/run.nc", "wb", **opts) as f:
        f.write(ds.to_netcdf(engine="scipy"))
    with fsspec.open("tessera:///readers/run.nc", "rb", **opts) as f:
        nc = xr.open_dataset(f, engine="scipy").load()
    xr.testing.assert_identical(nc, ds)


def test_a_dask_array_from_tessera_blocks(opts):
    import dask
    import dask.array as da

    a = np.arange(64 * 32, dtype=np.int64).reshape(64, 32)
    x = da.from_array(a, chunks=(16, 32))
    da.to_zarr(x, "tessera:///readers/dask.zarr", storage_options=opts, overwrite=True)
    y = da.from_zarr("tessera:///readers/dask.zarr", storage_options=opts)
    with dask.config.set(scheduler="threads"):
        assert int((y * 2).sum().compute()) == int(a.sum() * 2)
        assert np.array_equal(y[10:20, 5].compute(), a[10:20, 5])
