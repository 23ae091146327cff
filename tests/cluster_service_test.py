#!/usr/bin/python3
"""Black-box: warmd instances in a cluster, with a real etcd, over warmctl.

Three warmd join one cluster (--cluster) and each sees all three in `warmctl inspect cluster`
(text and --json); an instance killed with SIGKILL leaves everyone's view within its lease TTL;
one stopped with SIGTERM leaves at once; etcd killed and restarted is survived, the instances
joining again by themselves; a warmd without --cluster answers that it runs alone; bad cluster
flags are refused with exit status 2. Skipped (77) without an etcd executable.

Usage: cluster_service_test.py WARMD WARMCTL
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

warmd, warmctl = sys.argv[1], sys.argv[2]
etcd_bin = os.environ.get("ETCD", "/usr/bin/etcd")
if not os.path.exists(etcd_bin):
    print("cluster_service_test: no etcd executable (/usr/bin/etcd or $ETCD)")
    sys.exit(77)
failures = 0
TTL = 3


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Etcd:
    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "etcd")
        self.client, self.peer = free_port(), free_port()
        self.proc = None
        self.log = open(os.path.join(tmp, "etcd.log"), "a")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.client}"

    def start(self):
        self.proc = subprocess.Popen(
            [etcd_bin, "--data-dir", self.dir, "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{self.peer}", "--initial-cluster", f"default=http://127.0.0.1:{self.peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)

        def healthy():
            try:
                import urllib.request
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    return b'"true"' in r.read()
            except OSError:
                return False
        if not wait_for(healthy, 20):
            sys.exit("cluster_service_test: etcd did not start")

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def ctl(sock, *args):
    r = subprocess.run([warmctl, "--connect", "unix:" + sock, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def cluster(sock):
    rc, out, _ = ctl(sock, "--json", "inspect", "cluster")
    return json.loads(out) if rc == 0 else None


def names(sock):
    c = cluster(sock)
    return sorted(i["name"] for i in c["instances"]) if c else None


def start(tmp, name, *extra):
    log = open(os.path.join(tmp, name + ".log"), "w+")
    sock = os.path.join(tmp, name + ".sock")
    proc = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
                             "--device", "host:64MiB", "--listen", "unix:" + sock, *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc, sock, log


def member(tmp, etcd, name, *extra):
    return start(tmp, name, "--cluster", etcd.url, "--instance", name, "--cluster-name", "t", "--lease-ttl", str(TTL),
                 *extra)


def main():
    tmp = tempfile.mkdtemp(prefix="warm-cluster-")
    os.makedirs(os.path.join(tmp, "repo"))
    etcd = Etcd(tmp)
    etcd.start()
    procs = {}
    try:
        for n in ["a", "b", "c"]:
            procs[n] = member(tmp, etcd, n)
        socks = {n: p[1] for n, p in procs.items()}
        check(wait_for(lambda: all(names(s) == ["a", "b", "c"] for s in socks.values()), 10),
              f"every instance sees a, b and c: {[names(s) for s in socks.values()]}")
        c = cluster(socks["a"])
        check(c and c["enabled"] and c["joined"] and c["name"] == "t" and c["instance"] == "a" and
              c["endpoints"] == [etcd.url], f"a's view of itself: {c}")
        me = [i for i in c["instances"] if i["self"]] if c else []
        check(len(me) == 1 and me[0]["name"] == "a" and me[0]["address"] == "unix:" + socks["a"] and
              me[0]["capacity"] == 64 << 20 and me[0]["loading_threads"] == 2, f"a's record: {me}")
        rc, out, _ = ctl(socks["b"], "inspect", "cluster")
        check(rc == 0 and "cluster t, instance b (joined), 3 instance(s) live" in out and "b *" in out,
              f"inspect cluster as text: {out}")

        # SIGKILL: the record outlives the process by at most its TTL.
        procs["c"][0].kill()
        procs["c"][0].wait()
        killed = time.monotonic()
        check(wait_for(lambda: names(socks["a"]) == ["a", "b"] and names(socks["b"]) == ["a", "b"], TTL + 5),
              f"c leaves after SIGKILL: {names(socks['a'])}")
        check(time.monotonic() - killed < TTL + 2.5, f"c left {time.monotonic() - killed:.1f} s after SIGKILL (TTL {TTL})")

        # SIGTERM: the lease is revoked, the record goes at once.
        procs["c"] = member(tmp, etcd, "c")
        check(wait_for(lambda: names(socks["a"]) == ["a", "b", "c"], 10), "c joins again")
        procs["c"][0].send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        check(procs["c"][0].wait(10) == 0, "c stops cleanly")
        check(wait_for(lambda: names(socks["a"]) == ["a", "b"], 2) and time.monotonic() - stopped < 2,
              f"c leaves at once after SIGTERM: {names(socks['a'])}")

        # etcd killed and restarted: instances keep serving and join again by themselves.
        etcd.kill()
        check(wait_for(lambda: (cluster(socks["a"]) or {}).get("last_error", "") != "", 10),
              "a reports etcd's absence")
        rc, _, _ = ctl(socks["a"], "status", "nothing")
        check(rc in (0, 1), "a still answers while etcd is down")
        time.sleep(TTL + 1)
        etcd.start()

        def rejoined():
            views = [cluster(socks[n]) for n in ["a", "b"]]
            return all(v and v["joined"] and v["last_error"] == "" and
                       sorted(i["name"] for i in v["instances"]) == ["a", "b"] for v in views)
        check(wait_for(rejoined, 20), f"a and b join again: {[cluster(socks[n]) for n in ['a', 'b']]}")

        # Alone, and bad flags.
        procs["alone"] = start(tmp, "alone")
        c = cluster(procs["alone"][1])
        check(c is not None and not c["enabled"], f"a warmd without --cluster runs alone: {c}")
        rc, out, _ = ctl(procs["alone"][1], "inspect", "cluster")
        check(rc == 0 and out.startswith("alone"), f"alone as text: {out}")
        for bad in [["--cluster-name", "a/b"], ["--lease-ttl", "1"], ["--instance", "a b"], ["--cluster", "ftp://x"]]:
            args = ["--cluster", etcd.url, "--instance", "z", *bad] if bad[0] != "--cluster" else [*bad, "--instance", "z"]
            r = subprocess.run([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, "bad"),
                                "--listen", "unix:" + os.path.join(tmp, "bad.sock"), *args],
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 2, f"warmd {' '.join(bad)}: exit {r.returncode} {r.stderr[-300:]}")
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if etcd.proc and etcd.proc.poll() is None:
            etcd.kill()
    if failures:
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".log"):
                with open(os.path.join(tmp, name)) as f:
                    print(f"--- {name} (tail)\n" + "".join(f.readlines()[-15:]))
        print(f"{failures} check(s) failed")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("cluster_service_test: all checks passed")


main()
