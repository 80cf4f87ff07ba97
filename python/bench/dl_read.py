"""The deep-learning read pattern in Python (the "Preloaded" strategy of Wang, Mohror and
Snir, as `tessera bench dl-read` runs it in Rust): RANKS processes each write their share of
116 KiB samples into one data set, then every epoch the samples are shuffled (the same
permutation in every process) and split evenly, and each process reads its random subset,
mostly written by the others, into one preallocated buffer with `readinto`.

Measured three ways, each over EPOCHS epochs, the time from the first process's start to the
last one's end: through the package under the session model (process r on daemon r mod the
instance's daemons); and the same data set as a plain local file read through Python's own
unbuffered files, warm (in the page cache) and cold (caches dropped before each epoch; root
only). Prints one JSON line: python_session_read_mibs, local_warm_read_mibs,
local_cold_read_mibs (null when caches cannot be dropped).

    python dl_read.py INSTANCE LOCAL_DIR [--ranks 4] [--daemons 3] [--samples 256] [--epochs 3]
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import time

SAMPLE = 116 << 10


def base_pattern() -> bytes:
    return bytes((i * 31 + 7) % 251 for i in range(SAMPLE))


def sample(base: bytes, k: int) -> bytes:
    """Sample k: the base pattern stamped with its number."""
    return k.to_bytes(8, "little") + base[8:]


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def rank_main(rank, args, barrier, times, errors):
    try:
        import tessera

        base = base_pattern()
        spr, n = args.samples, args.ranks
        total = n * spr
        fs = tessera.Client(args.instance, node=rank % args.daemons)
        tpath, dpath = "/tessera/dl-read.bin", os.path.join(args.local_dir, "dl-read.bin")
        if rank == 0:
            fs.open(tpath, "wb", buffering=0).close()
            open(dpath, "wb").close()
        barrier.wait()
        # Preload: this process's samples, through Tessera and into the local file.
        with fs.open(tpath, "r+b", buffering=0, model="session") as f, \
                open(dpath, "r+b", buffering=0) as d:
            for k in range(rank * spr, (rank + 1) * spr):
                s = sample(base, k)
                f.seek(k * SAMPLE)
                f.write(s)
                d.seek(k * SAMPLE)
                d.write(s)
        barrier.wait()
        got = bytearray(spr * SAMPLE)
        view = memoryview(got)
        ways = [("python_session", True), ("local_warm", False), ("local_cold", False)]
        for way, (name, through_tessera) in enumerate(ways):
            for epoch in range(args.epochs):
                order = list(range(total))
                random.Random(epoch).shuffle(order)
                mine = order[rank * spr:(rank + 1) * spr]
                if name == "local_cold" and rank == 0:
                    times[(way, epoch, "cold")] = drop_caches()
                barrier.wait()
                t0 = time.monotonic()
                if through_tessera:
                    f = fs.open(tpath, "rb", buffering=0, model="session")
                else:
                    f = open(dpath, "rb", buffering=0)
                with f:
                    for i, k in enumerate(mine):
                        f.seek(k * SAMPLE)
                        if f.readinto(view[i * SAMPLE:(i + 1) * SAMPLE]) != SAMPLE:
                            raise RuntimeError(f"{name}: sample {k} came short")
                t1 = time.monotonic()
                barrier.wait()
                times[(way, epoch, rank)] = (t0, t1)
                for i, k in enumerate(mine):
                    if view[i * SAMPLE:(i + 1) * SAMPLE] != sample(base, k):
                        raise RuntimeError(f"{name}: sample {k} read back wrong")
        barrier.wait()
        if rank == 0:
            fs.remove(tpath)
            os.remove(dpath)
    except BaseException as e:  # reported by the parent, which fails the run
        errors.put(f"rank {rank}: {e!r}")
        barrier.abort()
        raise


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("instance")
    p.add_argument("local_dir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--daemons", type=int, default=3)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    with ctx.Manager() as m:
        times, errors = m.dict(), m.Queue()
        barrier = ctx.Barrier(args.ranks)
        procs = [ctx.Process(target=rank_main, args=(r, args, barrier, times, errors))
                 for r in range(args.ranks)]
        for pr in procs:
            pr.start()
        for pr in procs:
            pr.join()
        if not errors.empty() or any(pr.exitcode for pr in procs):
            raise SystemExit("dl_read failed: " + (errors.get() if not errors.empty() else "a rank died"))
        times = dict(times)
    out = {}
    total_bytes = args.ranks * args.samples * SAMPLE * args.epochs
    for way, name in enumerate(["python_session", "local_warm", "local_cold"]):
        if name == "local_cold" and not all(times[(way, e, "cold")] for e in range(args.epochs)):
            out[f"{name}_read_mibs"] = None
            continue
        secs = 0.0
        for e in range(args.epochs):
            spans = [times[(way, e, r)] for r in range(args.ranks)]
            secs += max(t1 for _, t1 in spans) - min(t0 for t0, _ in spans)
        out[f"{name}_read_mibs"] = total_bytes / (1 << 20) / secs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
