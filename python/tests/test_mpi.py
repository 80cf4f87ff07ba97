"""Transactions over mpi4py (full tier: needs the package built with MPI, and mpi4py):
4 processes write a data set, files and catalogue chunks, that appears whole at commit and
not at all after an abort."""

import os
import shutil
import subprocess
import sys

import json

import numpy as np
import pytest

import tessera

pytestmark = pytest.mark.full

PROGRAM = os.path.join(os.path.dirname(__file__), "programs", "txn_writer.py")
RANKS = 4


def mpirun(instance, directory, value, mode):
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", TESSERA_TXN_FAN_IN="2")
    out = subprocess.run(
        [mpirun, "-n", str(RANKS), sys.executable, PROGRAM, instance, directory, str(value), mode],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_data_set_appears_whole_at_commit_and_not_at_all_after_an_abort(instance, fs):
    from tessera import _native

    assert _native.HAS_MPI, "the full tier builds the package with --features mpi"
    fs.makedirs("/tessera/txn-py", exist_ok=True)
    done = mpirun(instance[0], "/tessera/txn-py", 1, "commit")
    assert done == {"phase": "committed", "reasons": []}
    v1 = fs.catalogue.lookup("field")["version"]
    assert np.array_equal(fs.catalogue.get("field"), np.full((16, 8), 1.0))
    for r in range(RANKS):
        with fs.open(f"/tessera/txn-py/part.{r}.raw", "rb") as f:
            assert np.frombuffer(f.read(), dtype=np.float64).tolist() == [1.0] * 32

    for value, mode in [(2, "abort"), (3, "raise")]:
        done = mpirun(instance[0], "/tessera/txn-py", value, mode)
        assert done["phase"] == "aborted", done
        assert any(f"rank {RANKS - 1}" in r for r in done["reasons"]), done
        # The committed version and files stay as they were: nothing of the aborted one shows.
        assert fs.catalogue.lookup("field")["version"] == v1
        assert np.array_equal(fs.catalogue.get("field"), np.full((16, 8), 1.0))
        for r in range(RANKS):
            with fs.open(f"/tessera/txn-py/part.{r}.raw", "rb") as f:
                assert np.frombuffer(f.read(), dtype=np.float64).tolist() == [1.0] * 32


def test_a_communicator_that_is_not_one_is_refused(fs):
    import tessera.mpi

    with pytest.raises(TypeError, match="intra-communicator"):
        tessera.mpi.Transactions("COMM_WORLD", fs)
