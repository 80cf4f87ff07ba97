"""Attach, query, detach and flush on open files, and locate, through the package."""

import os


def test_attach_publishes_only_the_range_and_query_names_its_owner(fs, other, pfs):
    a, b = b"A" * 4096, b"B" * 4096
    with fs.open("/tessera/prim.bin", "wb", buffering=0, model="commit") as w:
        w.write(a)
        w.seek(8192)
        w.write(b)
        w.attach(0, 4096)
        with other.open("/tessera/prim.bin", "rb", buffering=0, model="commit") as r:
            owned = r.query()
            assert [(s, e, n) for s, e, n, _ in owned] == [(0, 4096, 0)], owned
            assert r.read(4096) == a
        w.attach()
        with other.open("/tessera/prim.bin", "rb", buffering=0, model="commit") as r:
            owned = r.query()
            assert [(s, e, n) for s, e, n, _ in owned] == [(0, 4096, 0), (8192, 12288, 0)], owned
            r.seek(8192)
            assert r.read() == b
        # The bytes written: the hole between the ranges is not data.
        assert w.flush_to_pfs() == 8192
        with open(os.path.join(pfs, "prim.bin"), "rb") as local:
            on_pfs = local.read()
        assert on_pfs[:4096] == a and on_pfs[8192:] == b and on_pfs[4096:8192] == bytes(4096)
        w.detach()
        assert w.query() == []
    # The bytes stay readable from the PFS copy.
    with other.open("/tessera/prim.bin", "rb") as r:
        assert r.read() == on_pfs
    # A flush by path writes what was changed since.
    with other.open("/tessera/prim.bin", "r+b") as w2:
        w2.write(b"C" * 100)
    assert fs.flush("/tessera/prim.bin") >= 100
    with open(os.path.join(pfs, "prim.bin"), "rb") as local:
        assert local.read() == b"C" * 100 + on_pfs[100:]


def test_locate_names_the_node_and_host_holding_the_bytes(fs, other):
    with other.open("/tessera/located.bin", "wb") as w:
        w.write(os.urandom(300_000))
    loc = fs.locate("/tessera/located.bin")
    assert loc["size"] == 300_000 and loc["pfs_only_bytes"] == 0
    assert {x[3] for x in loc["extents"]} == {1}, loc["extents"]
    assert {x[4] for x in loc["extents"]} == {"burst_buffer"}
    assert sum(loc["bytes_by_host"].values()) == 300_000
    assert loc["best_host"] in loc["bytes_by_host"]
    part = fs.locate("/tessera/located.bin", 100_000, 1000)
    assert (part["start"], part["end"]) == (100_000, 101_000)
