"""A Tessera instance for the package's tests: started with the `tessera` command built from
this tree (TESSERA_BIN), two daemons on this host, stopped at the end of the session."""

import os
import shutil
import subprocess
import tempfile

import pytest

import tessera

TESSERA_BIN = os.environ.get(
    "TESSERA_BIN",
    os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "tessera"),
)


def tessera_cmd(instance, *args, check=True):
    return subprocess.run(
        [TESSERA_BIN, "--instance", instance, *args],
        check=check, capture_output=True, text=True,
    )


@pytest.fixture(scope="session")
def instance():
    root = tempfile.mkdtemp(prefix="tessera-py-")
    inst = os.path.join(root, "inst")
    out = subprocess.run(
        [TESSERA_BIN, "start", "--instance", inst, "--daemons", "2",
         "--pfs", os.path.join(root, "pfs"), "--bb-root", os.path.join(root, "bb")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    yield inst, os.path.join(root, "pfs")
    tessera_cmd(inst, "stop", check=False)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pfs(instance):
    """The instance's PFS directory."""
    return instance[1]


@pytest.fixture
def fs(instance):
    """A client of daemon 0."""
    return tessera.Client(instance[0], node=0)


@pytest.fixture
def other(instance):
    """A client of the other daemon."""
    return tessera.Client(instance[0], node=1)
