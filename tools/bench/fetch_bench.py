#!/usr/bin/env python3
"""How fast warm's S3 fetch is against curl fetching the same ranges, in one run.

Starts s3rver on loopback (tests/support/object_servers.py), uploads one object of --mib MiB, and
times, best of --runs each, interleaved:
  curl   curl --parallel with the object split into the same ranges, into /dev/null
  warm   warm's ranged fetch (build/tests/fetch_tool get) with --streams ranges in flight, into a
         file on the same file system as the disk tier would be (--dir)
and prints both with warm's rate as a fraction of curl's. Both talk to s3rver directly (unsigned),
so the test proxy's Python does not bound them.

Usage: tools/bench/fetch_bench.py [--mib 256] [--streams 8] [--part-mib 8] [--runs 3]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, os.path.join(root, "tests", "support"))
from object_servers import ObjectServers  # noqa: E402


def timed(cmd):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--part-mib", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="where warm's fetch writes (default: a temp dir)")
    p.add_argument("--fetch-tool", default=os.path.join(root, "build", "tests", "fetch_tool"))
    a = p.parse_args()
    size = a.mib << 20
    part = a.part_mib << 20
    out_dir = tempfile.mkdtemp(prefix="warm-fetch-bench-", dir=a.dir)
    with ObjectServers(http=False) as servers:
        s3 = servers.s3
        s3.put("bench/model.safetensors", os.urandom(size))
        direct = f"http://127.0.0.1:{s3.upstream_port}"
        url = f"{direct}/{s3.bucket}/bench/model.safetensors"
        # One operation per range (curl's -r is per operation: --next starts the next one).
        ops = []
        for start in range(0, size, part):
            ops += ["--next"] if ops else []
            ops += ["-sf", "-r", f"{start}-{min(size, start + part) - 1}", url, "-o", "/dev/null"]
        curl = ["curl", "--parallel", "--parallel-max", str(a.streams)] + ops
        warm = [a.fetch_tool, "--endpoint", direct, "--anonymous", "get", s3.url("bench/model.safetensors"),
                "--out", os.path.join(out_dir, "model.safetensors"), "--streams", str(a.streams),
                "--part-bytes", str(part)]
        curl_t, warm_t = [], []
        for _ in range(a.runs):
            curl_t.append(timed(curl))
            warm_t.append(timed(warm))
            os.unlink(os.path.join(out_dir, "model.safetensors"))
        os.rmdir(out_dir)
    best_curl, best_warm = min(curl_t), min(warm_t)
    print(f"object {a.mib} MiB, {a.streams} streams, {a.part_mib} MiB parts, best of {a.runs}")
    print(f"curl --parallel -> /dev/null  {best_curl:.3f} s  {size / best_curl / 1e9:.2f} GB/s")
    print(f"warm fetch -> file          {best_warm:.3f} s  {size / best_warm / 1e9:.2f} GB/s")
    print(f"warm / curl (rate)          {best_curl / best_warm:.2f}")


if __name__ == "__main__":
    main()
