"""Files through the package: Python's file objects over Tessera, errors as OSError
subclasses, models per open, and reads in place."""

import errno
import io
import os
import tracemalloc

import pytest

import tessera

MIB = 1 << 20


def pattern(n, seed=0):
    return bytes((i * 31 + seed) % 251 for i in range(n))


def test_a_file_written_on_one_node_reads_back_on_the_other(fs, other):
    data = pattern(3 * MIB + 17)
    with fs.open("/tessera/roundtrip.bin", "wb") as f:
        assert isinstance(f, io.BufferedWriter)
        assert f.write(data) == len(data)
    with other.open("/tessera/roundtrip.bin", "rb") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read() == data
    assert other.stat("/tessera/roundtrip.bin").st_size == len(data)


def test_readinto_fills_the_callers_buffer_in_place(fs):
    data = pattern(8 * MIB, seed=3)
    with fs.open("/tessera/inplace.bin", "wb") as f:
        f.write(data)
    buf = bytearray(8 * MIB)
    view = memoryview(buf)
    with fs.open("/tessera/inplace.bin", "rb", buffering=0) as f:
        assert isinstance(f, tessera.RawFile)
        f.readinto(view[:MIB])  # warm: the first call may set up state
        f.seek(0)
        tracemalloc.start()
        n = f.readinto(view)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert n == len(data)
    assert buf == data
    assert peak < 64 * 1024, f"readinto allocated {peak} bytes for an 8 MiB read"
    with fs.open("/tessera/inplace.bin", "rb", buffering=0) as f:
        with pytest.raises(TypeError, match="writable"):
            f.readinto(bytes(16))
        # Past the end: nothing read, the buffer untouched.
        f.seek(len(data))
        assert f.readinto(view[:10]) == 0
        assert buf == data


def test_buffers_of_any_item_type_are_read_into_and_written_as_bytes(fs):
    from array import array

    values = array("d", (i * 0.5 for i in range(10_000)))
    with fs.open("/tessera/doubles.bin", "wb", buffering=0) as f:
        assert f.write(values) == len(values) * values.itemsize
    back = array("d", bytes(len(values) * values.itemsize))
    with fs.open("/tessera/doubles.bin", "rb", buffering=0) as f:
        assert f.readinto(back) == len(values) * values.itemsize
    assert back == values


def test_seek_tell_and_partial_reads_behave_as_local_files(fs, tmp_path):
    data = pattern(100_000, seed=5)
    local = tmp_path / "local.bin"
    local.write_bytes(data)
    with fs.open("/tessera/seek.bin", "wb") as f:
        f.write(data)
    with fs.open("/tessera/seek.bin", "rb") as t, open(local, "rb") as l:
        for offset, whence, size in [(10, 0, 5), (-20, 2, 100), (7, 1, 3), (99_990, 0, 50), (0, 0, 0)]:
            assert t.seek(offset, whence) == l.seek(offset, whence)
            assert t.read(size) == l.read(size)
            assert t.tell() == l.tell()
        assert t.read() == l.read()
        with pytest.raises(ValueError):
            t.raw.seek(0, 7)


def test_modes_append_exclusive_update_and_text(fs):
    with fs.open("/tessera/modes.txt", "w") as f:
        f.write("one\n")
    with fs.open("/tessera/modes.txt", "a") as f:
        assert f.tell() == 4
        f.write("two\n")
    with fs.open("/tessera/modes.txt") as f:
        assert f.read() == "one\ntwo\n"
    with pytest.raises(FileExistsError) as e:
        fs.open("/tessera/modes.txt", "x")
    assert e.value.errno == errno.EEXIST
    with fs.open("/tessera/modes.txt", "r+b") as f:
        f.seek(0)
        f.write(b"ONE")
        f.seek(0)
        assert f.read() == b"ONE\ntwo\n"
    with pytest.raises(ValueError):
        fs.open("/tessera/modes.txt", "rw")


def test_errors_are_oserror_subclasses_with_errno_and_message(fs):
    with pytest.raises(FileNotFoundError) as e:
        fs.open("/tessera/no/such/file", "rb")
    assert e.value.errno == errno.ENOENT
    assert "no" in str(e.value)
    fs.mkdir("/tessera/adir")
    with pytest.raises(IsADirectoryError):
        fs.open("/tessera/adir", "wb")
    with pytest.raises(OSError) as e:
        fs.rmdir("/tessera")
    assert e.value.errno in (errno.EBUSY, errno.EPERM, errno.EINVAL, errno.ENOTEMPTY, errno.EACCES)
    with pytest.raises(OSError) as e:
        fs.stat("relative/path")
    assert e.value.errno == errno.EXDEV and "/tessera" in str(e.value)


def test_each_open_chooses_its_model(fs, other):
    with fs.open("/tessera/model.bin", "wb", model="posix") as w:
        w.write(b"abc")
        w.flush()
        # Under posix a write is visible to other readers before the writer closes.
        with other.open("/tessera/model.bin", "rb", model="posix") as r:
            assert r.read() == b"abc"
    with pytest.raises(ValueError) as e:
        fs.open("/tessera/model.bin", "rb", model="eventual")
    assert "posix" in str(e.value)


def test_namespace_calls(fs):
    fs.makedirs("/tessera/ns/a/b")
    fs.makedirs("/tessera/ns/a/b", exist_ok=True)
    with fs.open("/tessera/ns/a/b/f", "wb") as f:
        f.write(b"x" * 10)
    assert fs.listdir("/tessera/ns/a/b") == ["f"]
    st = fs.stat("/tessera/ns/a/b/f")
    assert st.kind == "file" and st.st_size == 10 and (st.st_mode & 0o170000) == 0o100000
    assert fs.stat("/tessera/ns/a").kind == "dir"
    fs.rename("/tessera/ns/a/b/f", "/tessera/ns/a/g")
    assert fs.exists("/tessera/ns/a/g") and not fs.exists("/tessera/ns/a/b/f")
    fs.remove("/tessera/ns/a/g")
    fs.rmdir("/tessera/ns/a/b")
    assert fs.listdir("/tessera/ns/a") == []


def test_closed_files_refuse_io(fs):
    f = fs.open("/tessera/closed.bin", "wb", buffering=0)
    f.write(b"1")
    f.close()
    f.close()
    with pytest.raises(ValueError):
        f.write(b"2")
