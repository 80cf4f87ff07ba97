"""Dask distributed using Tessera's locality query (FusionFS and Swift).

Run on an emulated host with a Dask scheduler at SCHEDULER and one worker per host, each
worker named after its host and running under the interposer. For every input file this
asks `tessera where --json` which host holds most of its bytes, submits a read of the file
with `workers=[that host]`, and prints one JSON line per file: the host locate named, the
host the task ran on, the bytes it read, and what the interposer's statistics say about
where they came from (node_logs: read straight from the logs on the worker's own node;
remote: fetched from other nodes).

    python3 dask_locality.py SCHEDULER TESSERA INSTANCE WORKERS PATH...
"""

import json
import subprocess
import sys
import time

from distributed import Client


def read_and_report(path):
    import ctypes
    import os

    lib = ctypes.CDLL(None)

    def stats():
        n = lib.tessera_preload_stats(None, 0)
        if n < 0:
            return {"node_logs": 0, "remote": 0}
        buf = ctypes.create_string_buffer(n + 1)
        lib.tessera_preload_stats(buf, n + 1)
        return json.loads(buf.value.decode())["stats"]["read"]

    before = stats()
    with open(path, "rb") as f:
        data = f.read()
    after = stats()
    return {
        "path": path,
        "ran_on": os.uname().nodename,
        "bytes": len(data),
        "node_logs": after["node_logs"] - before["node_logs"],
        "remote": after["remote"] - before["remote"],
    }


def main():
    scheduler, tessera, instance, workers = sys.argv[1:5]
    paths = sys.argv[5:]
    client = Client(scheduler, timeout=60)
    deadline = time.time() + 60
    while len(client.scheduler_info()["workers"]) < int(workers):
        if time.time() > deadline:
            sys.exit(f"only {len(client.scheduler_info()['workers'])} of {workers} workers joined")
        time.sleep(0.2)
    where = subprocess.run(
        [tessera, "--instance", instance, "where", "--json", *paths],
        check=True,
        capture_output=True,
        text=True,
    )
    located = json.loads(where.stdout)["files"]
    futures = []
    for f in located:
        host = f["bytes_by_host"][0]["host"]
        fut = client.submit(
            read_and_report, f["path"], workers=[host], allow_other_workers=False, pure=False
        )
        futures.append((host, fut))
    for host, fut in futures:
        r = fut.result(timeout=120)
        r["located"] = host
        print(json.dumps(r), flush=True)
    client.close()


if __name__ == "__main__":
    main()
