"""One process reading a Tessera file in blocks with the package's readinto into one
preallocated buffer, pass after pass, each pass's rate (MiB/s) on a line: compared with
`tessera-bench read-blocks` on the same file by scripts/bench-python.sh.

    python readinto.py INSTANCE PATH [BLOCK_BYTES] [PASSES]
"""

import sys
import time

import tessera


def main():
    instance, path = sys.argv[1], sys.argv[2]
    block = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    passes = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    fs = tessera.Client(instance)
    buf = bytearray(block)
    view = memoryview(buf)
    with fs.open(path, "rb", buffering=0) as f:
        size = f.size()
        for p in range(passes + 1):
            f.seek(0)
            started = time.perf_counter()
            done = 0
            while done < size:
                n = f.readinto(view)
                if n == 0:
                    raise SystemExit(f"{path} ended at {done} of {size} bytes")
                done += n
            if p > 0:
                print(f"{size / (1 << 20) / (time.perf_counter() - started):.1f}")


if __name__ == "__main__":
    main()
