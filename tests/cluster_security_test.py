#!/usr/bin/python3
"""Black-box: what someone who can write to the cluster's etcd, or listen where a forged record
points, can and cannot do to warmd instances (a real etcd, warmd over TCP with a token).

- Two instances whose Cap'n Proto listeners take a token forward requests to each other: they
  log in by proving they hold the token.
- A forged instance record (on a live lease) that claims a model and points at a listener of the
  test's: a request for that model reaches the listener, which learns nothing of the token (the
  old login sent it in clear), and the request is still served (here, once the impostor fails to
  prove it holds the token).
- Instance records on no lease, or under another instance's name, are ignored and logged.
- Registry records that no client could register (a batch delay past the limit, an invalid id)
  are ignored and logged; the models stay unknown.
- An etcd that takes only TLS clients with a certificate of its CA, and etcd's users: warmd joins
  and registers with --etcd-ca/--etcd-cert/--etcd-key/--etcd-user/--etcd-password-file, and one
  with a wrong password is refused at start, saying so.
Skipped (77) without etcd.

Usage: cluster_security_test.py WARMD WARMCTL
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from etcd_process import ETCD, Etcd, free_port, wait_for

warmd, warmctl = sys.argv[1], sys.argv[2]
if not os.path.exists(ETCD):
    print("cluster_security_test: no etcd executable (/usr/bin/etcd or $ETCD)")
    sys.exit(77)
failures = 0
TOKEN = "cluster-secret-0123456789abcdef"


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def ctl(sock, *args):
    r = subprocess.run([warmctl, "--connect", "unix:" + sock, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def names(sock):
    rc, out, _ = ctl(sock, "--json", "inspect", "cluster")
    return sorted(i["name"] for i in json.loads(out)["instances"]) if rc == 0 else None


def status(sock, mid):
    rc, out, _ = ctl(sock, "--json", "status", mid)
    return json.loads(out) if rc == 0 else {}


class Impostor:
    """A TCP listener that records every byte sent to it and answers nothing."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self.connections = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.read, args=(conn,), daemon=True).start()

    def read(self, conn):
        conn.settimeout(10)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                with self.lock:
                    self.received += data
        except OSError:
            pass
        conn.close()


def secured_etcd_checks(tmp, repo):
    etcd = Etcd(tmp, secured=True)
    etcd.start()
    procs = []
    try:
        etcd.enable_auth("root-password-123")
        good, bad = os.path.join(tmp, "etcd-password"), os.path.join(tmp, "etcd-wrong-password")
        for path, text in [(good, "root-password-123\n"), (bad, "not-the-password\n")]:
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o600)

        def secured_warmd(name, password_file):
            sock = os.path.join(tmp, name + ".sock")
            log = os.path.join(tmp, name + ".log")
            proc = subprocess.Popen(
                [warmd, "--repo", repo, "--state", os.path.join(tmp, name + "-state"), "--device", "host:64MiB",
                 "--listen", "unix:" + sock, "--cluster", etcd.url, "--instance", name, "--cluster-name", "tls",
                 "--lease-ttl", "3", "--etcd-ca", etcd.file("ca.pem"), "--etcd-cert", etcd.file("client-root.pem"),
                 "--etcd-key", etcd.file("client-root.key"), "--etcd-user", "root", "--etcd-password-file",
                 password_file],
                stdout=open(log, "w"), stderr=subprocess.STDOUT)
            procs.append(proc)
            return proc, sock, log

        proc, sock, log = secured_warmd("t1", good)
        check(wait_for(lambda: names(sock) == ["t1"], 15), f"t1 joins through TLS and auth: {names(sock)}")
        check(ctl(sock, "register", "f1", "f1")[0] == 0, "t1 registers f1 in the secured etcd")
        rc, out = etcd.ctl("get", "/warm/tls/registry/models/f1", "--print-value-only")
        check(rc == 0 and '"path":"f1"' in out.replace(" ", ""), f"f1's record is in etcd: {out}")
        wrong, _, wrong_log = secured_warmd("t2", bad)
        try:
            rc = wrong.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        text = open(wrong_log).read()
        check(rc not in (None, 0), f"a warmd with the wrong etcd password does not start: {rc}")
        check("authentication failed" in text and "not-the-password" not in text,
              f"it says why, without the password: {text[-600:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        etcd.kill()


def main():
    tmp = tempfile.mkdtemp(prefix="warm-cluster-security-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    etcd = Etcd(tmp)
    etcd.start()
    procs, socks, logs = {}, {}, {}
    try:
        for n in ["a", "b"]:
            logs[n] = os.path.join(tmp, n + ".log")
            socks[n] = os.path.join(tmp, n + ".sock")
            procs[n] = subprocess.Popen(
                [warmd, "--repo", repo, "--state", os.path.join(tmp, n + "-state"), "--device", "host:64MiB",
                 "--listen", f"127.0.0.1:{free_port()}", "--listen", "unix:" + socks[n], "--token-file", token_file,
                 "--cluster", etcd.url, "--instance", n, "--cluster-name", "s", "--lease-ttl", "3"],
                stdout=open(logs[n], "w"), stderr=subprocess.STDOUT)
        check(wait_for(lambda: all(names(s) == ["a", "b"] for s in socks.values()), 60),
              f"a and b see each other: {[names(s) for s in socks.values()]}")

        # Forwarding between instances that log in with a proof of the token.
        for mid, seed in [("f1", 1), ("f9", 9)]:
            subprocess.run([warmctl, "make-model", "--out", os.path.join(repo, mid, "1"), "--layers", "4,8,2",
                            "--seed", str(seed)], check=True, capture_output=True)
            check(ctl(socks["a"], "register", mid, mid)[0] == 0, f"register {mid}")
        check(ctl(socks["b"], "ensure", "f1")[0] == 0, "b loads f1")

        def a_sees_b_hold_f1():
            rc, out, _ = ctl(socks["a"], "--json", "inspect", "cluster")
            return rc == 0 and any(i["name"] == "b" and "f1" in i.get("residents", []) for i in json.loads(out)["instances"])
        check(wait_for(a_sees_b_hold_f1, 5), "a sees b's record with f1")
        rc, out, err = ctl(socks["a"], "infer", "f1", "--random")
        check(rc == 0, f"a serves f1 through b: {out} {err}")
        check(status(socks["a"], "f1").get("state") == "NOT_LOADED", "a forwarded f1 instead of loading it")
        check(status(socks["b"], "f1").get("requests", 0) >= 1, f"b served a's request: {status(socks['b'], 'f1')}")

        # A forged record for an instance 'evil' that holds f9, at the impostor's address.
        impostor = Impostor()
        rc, record = etcd.ctl("get", "/warm/s/instances/a", "--print-value-only")
        check(rc == 0 and record.strip(), "a's record is in etcd")
        forged = json.loads(record)
        forged.update(name="evil", address=f"127.0.0.1:{impostor.port}", residents=["f9"], loading=[], hot=[])
        rc, granted = etcd.ctl("lease", "grant", "60")
        lease = granted.split()[1] if rc == 0 else "0"
        check(etcd.ctl("put", "--lease=" + lease, "/warm/s/instances/evil", json.dumps(forged))[0] == 0, "put evil")
        check(wait_for(lambda: "evil" in (names(socks["a"]) or []), 5), "a takes in evil's (live, valid) record")
        rc, out, err = ctl(socks["a"], "infer", "f9", "--random")
        check(rc == 0, f"a still serves f9: {out} {err}")
        with impostor.lock:
            received, connections = bytes(impostor.received), impostor.connections
        check(connections >= 1, "a dialed the address of the forged record")
        check(len(received) > 0, "a spoke to the impostor")
        check(TOKEN.encode() not in received, "the impostor did not get the token")

        # Records no instance writes: on no lease; naming another instance.
        forged.update(name="nolease")
        etcd.ctl("put", "/warm/s/instances/nolease", json.dumps(forged))
        forged.update(name="someone-else")
        etcd.ctl("put", "--lease=" + lease, "/warm/s/instances/renamed", json.dumps(forged))
        check(wait_for(lambda: "renamed" in open(logs["a"]).read(), 5), "a logged the renamed record")
        log = open(logs["a"]).read()
        check("instance record at /warm/s/instances/nolease is on no lease" in log, "a logged the record on no lease")
        check("names another instance ('someone-else')" in log, "a logged the renamed record's name")
        check(names(socks["a"]) == ["a", "b", "evil"], f"a ignored both: {names(socks['a'])}")

        # Registry records no client could register.
        etcd.ctl("put", "/warm/s/registry/models/slow",
                 json.dumps({"path": "f1", "batching": {"max_batch": 8, "max_queue_delay_us": 10**12}}))
        etcd.ctl("put", "/warm/s/registry/models/bad id", json.dumps({"path": "f1"}))
        check(wait_for(lambda: "registry record /warm/s/registry/models/slow" in open(logs["b"]).read(), 5),
              "b logged the slow record")
        log = open(logs["b"]).read()
        check("max_queue_delay is over 60000000 us" in log, "b says why the slow record is refused")
        check("model id 'bad id' may hold only" in log, "b says why the bad id is refused")
        for mid in ["slow", "bad id"]:
            rc, out, err = ctl(socks["b"], "infer", mid, "--random")
            check(rc != 0 and "not" in (out + err).lower(), f"{mid} is unknown on b: {rc} {out} {err}")

        secured_etcd_checks(tmp, repo)
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        etcd.kill()
    if failures:
        for n, path in logs.items():
            print(f"---- {n}'s log (end)")
            print(open(path).read()[-3000:])
        print(f"cluster_security_test: {failures} check(s) failed (left {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("cluster_security_test: all checks passed")


main()
