"""A Dask array computed from Tessera files with its tasks placed by `locate`, on 3 emulated
hosts (full tier, as root, with scripts/hosts.sh up 3 and TESSERA_TEST_HOSTS=3): a Dask
scheduler here, one worker per host; blocks written on every host; each block's load task
pinned to the worker on the host `locate` names. Checked: every load ran on that worker,
and each host's worker read exactly its blocks' bytes from its own node's logs, none
remotely."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.full, pytest.mark.hosts]

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTS_SH = os.path.join(HERE, "..", "..", "scripts", "hosts.sh")
TESSERA_BIN = os.environ.get("TESSERA_BIN", os.path.join(HERE, "..", "..", "target", "debug", "tessera"))
BLOCKS, ROWS, COLS = 9, 64, 512
BRIDGE_ADDR = "10.213.7.254"


def hosts_env() -> dict:
    out = subprocess.run(["bash", HOSTS_SH, "env"], check=True, capture_output=True, text=True)
    env = {}
    for line in out.stdout.splitlines():
        k, _, v = line.removeprefix("export ").partition("=")
        env[k] = v
    return env


@pytest.fixture(scope="module")
def cluster():
    if os.environ.get("TESSERA_TEST_HOSTS") != "3":
        pytest.skip("needs 3 emulated hosts: as root, scripts/hosts.sh up 3 and TESSERA_TEST_HOSTS=3")
    from distributed import Client as DaskClient

    env = dict(os.environ, **hosts_env())
    root = tempfile.mkdtemp(prefix="tessera-dask-")
    inst = os.path.join(root, "inst")
    with open(env["TESSERA_HOSTFILE"]) as f:
        hostfile_lines = f.read().splitlines()[:3]
    hostfile = os.path.join(root, "hostfile")
    with open(hostfile, "w") as f:
        f.write("\n".join(hostfile_lines) + "\n")
    start = subprocess.run(
        [TESSERA_BIN, "start", "--instance", inst, "--pfs", os.path.join(root, "pfs"),
         "--bb-root", os.path.join(env["TESSERA_HOSTS_LOCAL"], os.path.basename(root)),
         "--hostfile", hostfile],
        env=env, capture_output=True, text=True,
    )
    assert start.returncode == 0, start.stdout + start.stderr
    procs = []
    try:
        sched_file = os.path.join(root, "scheduler.json")
        dask_bin = os.path.join(os.path.dirname(sys.executable), "dask")
        # The scheduler unpickles the task graph too: it needs the tasks' module.
        tasks_path = dict(os.environ, PYTHONPATH=os.path.join(HERE, "programs"))
        procs.append(subprocess.Popen(
            [dask_bin, "scheduler", "--host", BRIDGE_ADDR, "--port", "0",
             "--no-dashboard", "--scheduler-file", sched_file],
            env=tasks_path, stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "scheduler.log"), "w"),
        ))
        worker_env = dict(env, TESSERA_INSTANCE=inst,
                          PYTHONPATH=os.path.join(HERE, "programs"))
        worker_env.pop("TESSERA_NODE", None)
        deadline = time.monotonic() + 60
        while not os.path.exists(sched_file):
            assert time.monotonic() < deadline, "the Dask scheduler did not start"
            time.sleep(0.1)
        for k in (1, 2, 3):
            procs.append(subprocess.Popen(
                ["bash", HOSTS_SH, "exec", str(k), dask_bin, "worker",
                 "--scheduler-file", sched_file, "--name", f"h{k}", "--nthreads", "1",
                 "--no-nanny", "--no-dashboard"],
                env=worker_env, stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(root, f"worker-h{k}.log"), "w"),
            ))
        dask = DaskClient(scheduler_file=sched_file, timeout=60)
        dask.wait_for_workers(3, timeout=120)
        yield dask
        dask.close()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run([TESSERA_BIN, "--instance", inst, "stop"], env=env, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_each_block_is_read_on_the_host_locate_names_from_its_own_logs(cluster):
    import dask
    import dask.array as da
    sys.path.insert(0, os.path.join(HERE, "programs"))
    # On the workers' path too: its functions pickle by reference.
    import placed_tasks as tasks

    workers = {info["name"]: addr for addr, info in cluster.scheduler_info()["workers"].items()}
    assert sorted(workers) == ["h1", "h2", "h3"], workers
    paths = [f"/tessera/dask/block.{i}" for i in range(BLOCKS)]
    cluster.submit(tasks.makedirs, "/tessera/dask",
                   workers=[workers["h1"]], pure=False).result()
    # Block i is written on host h(i mod 3 + 1): its bytes land in that node's logs.
    writes = [
        cluster.submit(tasks.write_block, p, i, ROWS, COLS,
                       workers=[workers[f"h{i % 3 + 1}"]], allow_other_workers=False, pure=False)
        for i, p in enumerate(paths)
    ]
    assert [w.result() for w in writes] == [f"h{i % 3 + 1}" for i in range(BLOCKS)]
    # The scheduler's view: locate, asked on any host.
    where = cluster.submit(tasks.locate_all, paths,
                           workers=[workers["h2"]], pure=False).result()
    assert where == {p: f"h{i % 3 + 1}" for i, p in enumerate(paths)}, where
    # The computation: each load pinned to the worker of the host locate named.
    blocks, keys = [], {}
    for p in paths:
        with dask.annotate(workers=[workers[where[p]]], allow_other_workers=False):
            d = dask.delayed(tasks.read_block, pure=False)(p, ROWS, COLS)
        keys[d.key] = where[p]
        blocks.append(da.from_delayed(d, shape=(ROWS, COLS), dtype=np.int64))
    total = da.concatenate(blocks).sum()
    before = {s["host"]: s for s in cluster.run(tasks.stats).values()}
    from distributed import get_task_stream

    with get_task_stream(client=cluster) as ts:
        got = cluster.compute(total, optimize_graph=False).result()
    n = BLOCKS * ROWS * COLS
    assert got == n * (n - 1) // 2
    ran = {t["key"]: t["worker"] for t in ts.data if t["key"] in keys}
    assert len(ran) == BLOCKS, ran
    for key, addr in ran.items():
        assert addr == workers[keys[key]], f"{key} ran on {addr}, not on {keys[key]}"
    after = {s["host"]: s for s in cluster.run(tasks.stats).values()}
    block_bytes = ROWS * COLS * 8
    for h in ("h1", "h2", "h3"):
        local = lambda s: s["own_log"] + s["node_logs"]
        remote = lambda s: s["remote"] + s["read_ahead_hits"] + s["read_ahead_fetched"] + s["pfs"]
        assert after[h]["host"] == h
        assert local(after[h]) - local(before[h]) == 3 * block_bytes, (h, before[h], after[h])
        assert remote(after[h]) - remote(before[h]) == 0, (h, before[h], after[h])

