#!/usr/bin/env python3
"""A cold start from S3: the load following its fetch against fetching, then loading, in one run.

Starts s3rver on loopback (tests/support/object_servers.py), uploads one dense model of about
--mib MiB (one square layer) and, for each of --runs rounds, starts a fresh warmd (an empty disk
tier) on the host device, pointed at s3rver directly (unsigned, so the test proxy's Python does
not bound it), and times:
  cold      register (the header only) and the first request: fetch and load together, the load
            following the fetch (what a miss of a model found only in S3 costs)
  fetch     warm's ranged fetch of the same object alone (build/tests/fetch_tool get, the code
            warmd runs) into a file on the tier's file system
  load      the model registered again and requested: loaded from the disk tier (page cache)
  curl      curl --parallel fetching the same ranges into /dev/null
and prints the medians with cold / (fetch + load), the sequential path the pipeline replaces, and
curl / cold, the fetch-into-device rate against curl's bare transfer. Each time includes one
warmctl process (a few ms).

Usage: tools/bench/coldstart_bench.py [--mib 512] [--streams 8] [--part-mib 8] [--runs 3]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, os.path.join(root, "tests", "support"))
from object_servers import ObjectServers  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def timed(cmd):
    start = time.monotonic()
    run(cmd)
    return time.monotonic() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=512)
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--part-mib", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--build", default=os.path.join(root, "build"))
    a = p.parse_args()
    warmd = os.path.join(a.build, "warmd")
    warmctl = os.path.join(a.build, "warmctl")
    fetch_tool = os.path.join(a.build, "tests", "fetch_tool")
    tmp = tempfile.mkdtemp(prefix="warm-coldstart-")
    width = int(((a.mib << 20) / 4) ** 0.5)
    made = os.path.join(tmp, "made")
    run([warmctl, "make-model", "--out", made, "--layers", f"{width},{width}", "--seed", "1"])
    model_file = os.path.join(made, "model.safetensors")
    size = os.path.getsize(model_file)
    part = a.part_mib << 20
    times = {"cold": [], "fetch": [], "load": [], "curl": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = tmp  # no shared credentials file: unsigned requests
    try:
        with ObjectServers(http=False) as servers:
            s3 = servers.s3
            with open(model_file, "rb") as f:
                s3.put("bench/m/1/model.safetensors", f.read())
            direct = f"http://127.0.0.1:{s3.upstream_port}"
            url = f"{direct}/{s3.bucket}/bench/m/1/model.safetensors"
            ranges = []
            for start in range(0, size, part):
                ranges += ["-r", f"{start}-{min(size, start + part) - 1}", url, "-o", "/dev/null"]
            curl = ["curl", "-sf", "--parallel", "--parallel-max", str(a.streams)] + ranges
            for i in range(a.runs):
                state = os.path.join(tmp, f"state{i}")
                sock = os.path.join(tmp, f"w{i}.sock")
                proc = subprocess.Popen(
                    [warmd, "--repo", s3.url("bench"), "--s3-endpoint", direct, "--state", state,
                     "--device", f"host:{2 * size // (1 << 20) + 64}MiB", "--listen", "unix:" + sock,
                     "--fetch-streams", str(a.streams), "--fetch-part-bytes", f"{a.part_mib}MiB"],
                    stdout=open(os.path.join(tmp, f"w{i}.log"), "w"), stderr=subprocess.STDOUT, env=env)
                ctl = [warmctl, "--connect", "unix:" + sock]
                deadline = time.monotonic() + 30
                while subprocess.run(ctl + ["models"], capture_output=True).returncode != 0:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(open(os.path.join(tmp, f"w{i}.log")).read()[-2000:])
                    time.sleep(0.05)
                try:
                    run(ctl + ["register", "m", "m"])
                    times["cold"].append(timed(ctl + ["infer", "m", "--random"]))
                    run(ctl + ["unregister", "m"])
                    run(ctl + ["register", "m", "m"])
                    times["load"].append(timed(ctl + ["infer", "m", "--random"]))
                    out = os.path.join(state, "fetched.safetensors")
                    times["fetch"].append(timed([fetch_tool, "--endpoint", direct, "--anonymous", "get",
                                                 s3.url("bench/m/1/model.safetensors"), "--out", out,
                                                 "--streams", str(a.streams), "--part-bytes", str(part)]))
                    os.unlink(out)
                    times["curl"].append(timed(curl))
                finally:
                    proc.terminate()
                    proc.wait(30)
                    shutil.rmtree(state, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"model {size / (1 << 20):.0f} MiB, {a.streams} streams, {a.part_mib} MiB parts, median of {a.runs}")
    for k in ("cold", "fetch", "load", "curl"):
        print(f"{k:6} {med[k]:.3f} s  {size / med[k] / 1e9:.2f} GB/s   runs {', '.join(f'{t:.3f}' for t in times[k])}")
    print(f"cold / (fetch + load)  {med['cold'] / (med['fetch'] + med['load']):.2f}")
    print(f"curl / cold (rate)     {med['curl'] / med['cold']:.2f}")
    print(json.dumps({k: round(v, 4) for k, v in med.items()}))


if __name__ == "__main__":
    main()
