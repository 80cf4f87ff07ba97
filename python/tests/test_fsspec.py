"""The fsspec file system: tessera:// URLs through fsspec's own entry points."""

import os

import fsspec


def test_a_round_trip_through_fsspec_urls(instance, fs, tmp_path):
    inst = instance[0]
    tfs = fsspec.filesystem("tessera", instance=inst, node=0)
    tfs.mkdir("/spec/run1")
    with fsspec.open("tessera:///spec/run1/data.bin", "wb", instance=inst) as f:
        f.write(b"0123456789" * 1000)
    assert fs.stat("/tessera/spec/run1/data.bin").st_size == 10_000
    assert tfs.cat_file("tessera:///spec/run1/data.bin", 5, 15) == b"5678901234"
    assert tfs.cat_file("/spec/run1/data.bin", -4) == b"6789"
    assert tfs.ls("/spec/run1", detail=False) == ["/spec/run1/data.bin"]
    info = tfs.info("/spec/run1/data.bin")
    assert info["type"] == "file" and info["size"] == 10_000
    assert tfs.info("/spec")["type"] == "directory"
    with fsspec.open("tessera:///spec/run1/notes.txt", "w", instance=inst) as f:
        f.write("text through fsspec\n")
    with fsspec.open("tessera:///spec/run1/notes.txt", "r", instance=inst) as f:
        assert f.read() == "text through fsspec\n"
    local = tmp_path / "in.bin"
    local.write_bytes(os.urandom(100_000))
    tfs.put(str(local), "/spec/put/in.bin")
    tfs.get("/spec/put/in.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
    assert tfs.locate("/spec/put/in.bin")["size"] == 100_000
    tfs.rm("/spec", recursive=True)
    assert not tfs.exists("/spec")
    assert not fs.exists("/tessera/spec")
