#!/usr/bin/python3
"""Black-box: cluster placement prefers an instance whose disk tier holds the model's file.

Two warmd in one cluster (a real etcd) with a remote repository root in S3 (s3rver behind the
SigV4-checking proxy), each with its own disk tier. Instance a, alone at first, loads model w1
from S3: its tier keeps the file. w2 is registered from the same file and loaded nowhere. Then b
joins with twice a's device memory, so that without the tier b would be chosen (the most room).
a's record lists w1 and w2 as held by its tier (`inspect cluster`, `status` on b: "disk tiers: 1
(a)"); a request for w2 sent to b is placed on a, which loads it from its tier: nothing is fetched
again, and b's tier stays empty. Skipped (77) without etcd or the object servers.

Usage: cluster_tier_test.py WARMD WARMCTL
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from etcd_process import ETCD as etcd_bin, Etcd, wait_for  # noqa: E402
from object_servers import MissingComponent, ObjectServers  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what, flush=True)


def ctl(sock, *args):
    r = subprocess.run([warmctl, "--connect", "unix:" + sock, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def js(sock, *args):
    rc, out, err = ctl(sock, "--json", *args)
    return json.loads(out) if rc == 0 else {"error": err.strip()}


def record_of(sock, name):
    """Instance `name`'s record as `sock`'s instance sees it (inspect cluster)."""
    for i in js(sock, "inspect", "cluster").get("instances", []):
        if i["name"] == name:
            return i
    return {}


def start(tmp, etcd, servers, name, memory):
    sock = os.path.join(tmp, name + ".sock")
    log = os.path.join(tmp, name + ".log")
    proc = subprocess.Popen(
        [warmd, "--repo", servers.s3.url("prod"), "--s3-endpoint", servers.s3.endpoint,
         "--state", os.path.join(tmp, name + "-state"), "--cache-dir", os.path.join(tmp, name + "-tier"),
         "--device", f"host:{memory}", "--listen", "unix:" + sock, "--cluster", etcd.url, "--instance", name,
         "--cluster-name", "t", "--lease-ttl", "3"],
        stdout=open(log, "a"), stderr=subprocess.STDOUT, env=servers.s3.env())
    if not wait_for(lambda: proc.poll() is None and os.path.exists(sock) and ctl(sock, "models")[0] == 0, 30):
        raise RuntimeError(f"warmd {name} did not start: {open(log).read()[-2000:]}")
    return proc, sock


def main():
    if not os.path.exists(etcd_bin):
        print("cluster_tier_test: no etcd executable (/usr/bin/etcd or $ETCD)")
        return 77
    tmp = tempfile.mkdtemp(prefix="warm-cluster-tier-")
    try:
        servers = ObjectServers(bucket="models")
    except MissingComponent as e:
        print(f"cluster_tier_test: {e}")
        return 77
    etcd = Etcd(tmp)
    etcd.start()
    procs = []
    with servers:
        try:
            out = os.path.join(tmp, "made")
            subprocess.run([warmctl, "make-model", "--out", out, "--layers", "256,256,4", "--seed", "3"],
                           check=True, capture_output=True)
            with open(os.path.join(out, "model.safetensors"), "rb") as f:
                data = f.read()
            servers.s3.put("prod/wide/1/model.safetensors", data)
            url = servers.s3.url("prod/wide/1/model.safetensors")

            proc_a, a = start(tmp, etcd, servers, "a", "64MiB")
            procs.append(proc_a)
            check(wait_for(lambda: record_of(a, "a").get("name") == "a", 20), "a joined its cluster")
            check(ctl(a, "register", "w1", "wide")[0] == 0, "register w1")
            rc, _, err = ctl(a, "infer", "w1", "--random")
            check(rc == 0, f"a serves w1 (alone: loaded there): {err}")
            check(ctl(a, "register", "w2", "wide")[0] == 0, "register w2, the same file")
            tier_a = js(a, "inspect", "tier").get("tier", {})
            check(tier_a.get("misses") == 1 and tier_a.get("fetches", {}).get("ok") == 1
                  and tier_a.get("held", [{}])[0].get("models") == ["w1", "w2"],
                  f"a's tier fetched the file once and holds it for w1 and w2: {tier_a}")
            check(wait_for(lambda: record_of(a, "a").get("tiered") == ["w1", "w2"], 10),
                  f"a's record lists w1 and w2 as tiered: {record_of(a, 'a')}")

            proc_b, b = start(tmp, etcd, servers, "b", "128MiB")
            procs.append(proc_b)
            check(wait_for(lambda: record_of(b, "a").get("tiered") == ["w1", "w2"]
                           and record_of(a, "b").get("name") == "b", 20),
                  f"b sees a's tiered models, a sees b: {record_of(b, 'a')}")
            check(record_of(b, "b").get("tiered") == [], f"b's tier holds nothing: {record_of(b, 'b')}")
            rc, text, _ = ctl(b, "status", "w2")
            check(rc == 0 and "disk tiers: 1 (a)" in text, f"w2's status on b names a's tier: {text}")
            check(js(b, "status", "w2").get("tiered_on") == ["a"], "tiered_on in w2's JSON status")
            gets = sum(1 for r in servers.s3.proxy.requests if r[0] == "GET")

            # A miss for w2 arriving at b: placed on a, whose tier holds it, although b has more room.
            rc, _, err = ctl(b, "infer", "w2", "--random")
            check(rc == 0, f"b's request for w2 is served: {err}")
            check(wait_for(lambda: js(a, "status", "w2").get("state") == "LOADED", 10),
                  f"w2 was placed on a: a {js(a, 'status', 'w2').get('state')}, b {js(b, 'status', 'w2').get('state')}")
            check(js(b, "status", "w2").get("state") != "LOADED", "b did not load w2")
            tier_a = js(a, "inspect", "tier").get("tier", {})
            check(tier_a.get("misses") == 1 and tier_a.get("fetches", {}).get("ok") == 1 and tier_a.get("hits", 0) >= 2,
                  f"a loaded w2 from its tier, without fetching: {tier_a}")
            tier_b = js(b, "inspect", "tier").get("tier", {})
            check(tier_b.get("files") == 0 and tier_b.get("fetches", {}).get("ok") == 0, f"b fetched nothing: {tier_b}")
            check(sum(1 for r in servers.s3.proxy.requests if r[0] == "GET") == gets,
                  "no GET reached S3 for the placed load")
            check(js(a, "status", "w2").get("tier") == {"held": True, "bytes": len(data)}
                  and js(a, "status", "w2").get("source") == url, "w2's status on a: held, the file's bytes")
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            etcd.kill()
    print(f"cluster_tier_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
