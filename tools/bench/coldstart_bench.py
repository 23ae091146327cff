#!/usr/bin/env python3
"""A cold start from S3: the load following its fetch against fetching, then loading, in one run.

Starts s3rver on loopback (tests/support/object_servers.py), uploads one dense model of about
--mib MiB (one square layer) and, for each of --runs rounds, starts a fresh warmd (an empty disk
tier) on the host device, pointed at s3rver directly (unsigned, so the test proxy's Python does
not bound it), and times:
  seq       the same in a warmd run with --load-after-fetch: the load waits for the whole file
            in the tier (fetched, synced and committed), then reads it
  cold      register (the header only) and the first request: fetch and load together, the load
            following the fetch (what a miss of a model found only in S3 costs), into host memory
            a local model of the same size was loaded into and unloaded from first
  fetch     warm's ranged fetch of the same object alone (build/tests/fetch_tool get, the code
            warmd runs) into a file on the tier's file system
  load      the model registered again and requested: loaded from the disk tier (page cache)
  curl      curl --parallel fetching the same ranges into /dev/null
  read      dd reading the tier's copy (in the page cache) into memory, 16 MiB at a time
and prints the medians with cold / seq, the cold start against warm's own sequential path,
cold / (fetch + load), against a fetch alone plus a load from the tier,
curl / cold, the fetch-into-device rate against curl's bare transfer, and read / load, the load
from the disk tier against a plain read of the same cached file. Each time includes one
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
    # A local model of the same size, loaded once first in each warmd: the host device's pool is
    # faulted in by the first load into it, as in a warmd that has been serving a while.
    local = os.path.join(tmp, "local")
    os.makedirs(os.path.join(local, "warmup", "1"))
    os.link(model_file, os.path.join(local, "warmup", "1", "model.safetensors"))
    size = os.path.getsize(model_file)
    part = a.part_mib << 20
    times = {"cold": [], "seq": [], "fetch": [], "load": [], "curl": [], "read": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = tmp  # no shared credentials file: unsigned requests
    try:
        with ObjectServers(http=False) as servers:
            s3 = servers.s3
            with open(model_file, "rb") as f:
                s3.put("bench/m/1/model.safetensors", f.read())
            direct = f"http://127.0.0.1:{s3.upstream_port}"
            url = f"{direct}/{s3.bucket}/bench/m/1/model.safetensors"
            # One operation per range (curl's -r is per operation: --next starts the next one).
            ops = []
            for start in range(0, size, part):
                ops += ["--next"] if ops else []
                ops += ["-sS", "-w", "%{size_download} %{http_code}\n", "-r",
                        f"{start}-{min(size, start + part) - 1}", url, "-o", "/dev/null"]
            curl = ["curl", "--parallel", "--parallel-max", str(a.streams)] + ops
            def cold_start(name, *flags):
                """A fresh warmd (empty tier, its pool faulted in by a local model of the same
                size): the first request of the S3 model, timed. Leaves warmd running."""
                state = os.path.join(tmp, name)
                sock = os.path.join(tmp, name + ".sock")
                proc = subprocess.Popen(
                    [warmd, "--repo", local, "--repo", s3.url("bench"), "--s3-endpoint", direct, "--state", state,
                     "--device", f"host:{2 * size // (1 << 20) + 64}MiB", "--listen", "unix:" + sock,
                     "--fetch-streams", str(a.streams), "--fetch-part-bytes", f"{a.part_mib}MiB", *flags],
                    stdout=open(state + ".log", "w"), stderr=subprocess.STDOUT, env=env)
                ctl = [warmctl, "--connect", "unix:" + sock]
                deadline = time.monotonic() + 30
                while subprocess.run(ctl + ["models"], capture_output=True).returncode != 0:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(open(state + ".log").read()[-2000:])
                    time.sleep(0.05)
                run(ctl + ["register", "warmup", "warmup"])
                run(ctl + ["infer", "warmup", "--random"])
                run(ctl + ["unregister", "warmup"])
                run(ctl + ["register", "m", "m"])
                return proc, ctl, state, timed(ctl + ["infer", "m", "--random"])

            def stop(proc, state):
                proc.terminate()
                proc.wait(30)
                shutil.rmtree(state, ignore_errors=True)

            for i in range(a.runs):
                # Sequential first in even rounds, second in odd ones.
                order = ["seq", "cold"] if i % 2 == 0 else ["cold", "seq"]
                for kind in order:
                    if kind == "seq":
                        proc, _, state, t = cold_start(f"seq{i}", "--load-after-fetch")
                        times["seq"].append(t)
                        stop(proc, state)
                        continue
                    proc, ctl, state, t = cold_start(f"cold{i}")
                    times["cold"].append(t)
                    try:
                        run(ctl + ["unregister", "m"])
                        run(ctl + ["register", "m", "m"])
                        times["load"].append(timed(ctl + ["infer", "m", "--random"]))
                        objects = os.path.join(state, "tier", "objects")
                        copy = max((os.path.join(d, n) for d, _, names in os.walk(objects) for n in names),
                                   key=os.path.getsize)
                        times["read"].append(timed(["dd", f"if={copy}", "of=/dev/null", "bs=16M"]))
                    finally:
                        stop(proc, state)
                out = os.path.join(tmp, "fetched.safetensors")
                times["fetch"].append(timed([fetch_tool, "--endpoint", direct, "--anonymous", "get",
                                             s3.url("bench/m/1/model.safetensors"), "--out", out,
                                             "--streams", str(a.streams), "--part-bytes", str(part)]))
                os.unlink(out)
                start = time.monotonic()
                out = run(curl)
                got = sum(int(line.split()[0]) for line in out.splitlines() if line.strip())
                times["curl"].append(time.monotonic() - start)
                if got != size:
                    raise RuntimeError(f"curl fetched {got} bytes of {size}: {out[:400]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"model {size / (1 << 20):.0f} MiB, {a.streams} streams, {a.part_mib} MiB parts, median of {a.runs}")
    for k in ("cold", "seq", "fetch", "load", "curl", "read"):
        print(f"{k:6} {med[k]:.3f} s  {size / med[k] / 1e9:.2f} GB/s   runs {', '.join(f'{t:.3f}' for t in times[k])}")
    print(f"cold / seq             {med['cold'] / med['seq']:.2f}")
    print(f"cold / (fetch + load)  {med['cold'] / (med['fetch'] + med['load']):.2f}")
    print(f"curl / cold (rate)     {med['curl'] / med['cold']:.2f}")
    print(f"read / load (rate)     {med['read'] / med['load']:.2f}")
    print(json.dumps({k: round(v, 4) for k, v in med.items()}))


if __name__ == "__main__":
    main()
