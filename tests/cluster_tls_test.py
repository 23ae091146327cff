#!/usr/bin/python3
"""Black-box: a cluster whose instances speak TLS to each other (a real etcd; warmd with
--tls-cert, --tls-key, --tls-client-ca and a token, certificates made by tests/tls_certs.py).

- Two instances, each advertising localhost:PORT with a certificate that names localhost, see each
  other and forward requests over mutual TLS (their listeners take nothing else), logging in by
  proof of the token as without TLS.
- A forged instance record pointing at a TLS listener whose certificate another CA signed: the
  instance that dials it refuses the certificate, sends it nothing past the handshake, logs why,
  and serves the request itself.
- warmd refuses to start in a cluster with TLS when it would advertise an IP address (peers check
  DNS names) or a host its certificate does not name, saying which.
Skipped (77) without etcd.

Usage: cluster_tls_test.py WARMD WARMCTL
"""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_process import ETCD, Etcd, free_port, wait_for  # noqa: E402
from tls_certs import make_ca, make_cert  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
if not os.path.exists(ETCD):
    print("cluster_tls_test: no etcd executable (/usr/bin/etcd or $ETCD)")
    sys.exit(77)
failures = 0
TOKEN = "cluster-tls-secret-0123456789"


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


class TlsImpostor:
    """A TLS listener on localhost with a certificate of its own CA: counts handshakes that
    succeeded and the bytes received after them."""

    def __init__(self, cert):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert["cert"], cert["key"])
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.handshakes = 0
        self.received = 0
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
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        conn.settimeout(10)
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as s:
                with self.lock:
                    self.handshakes += 1
                while True:
                    data = s.recv(65536)
                    if not data:
                        break
                    with self.lock:
                        self.received += len(data)
        except (OSError, ssl.SSLError):
            pass


def start(tmp, name, repo, etcd, cert, ca, advertise="localhost"):
    port = free_port()
    log = os.path.join(tmp, name + ".log")
    sock = os.path.join(tmp, name + ".sock")
    proc = subprocess.Popen(
        [warmd, "--repo", repo, "--state", os.path.join(tmp, name + "-state"), "--device", "host:64MiB",
         "--listen", f"127.0.0.1:{port}", "--listen", "unix:" + sock, "--token-file", os.path.join(tmp, "token"),
         "--tls-cert", cert["cert"], "--tls-key", cert["key"], "--tls-client-ca", ca["cert"],
         "--cluster", etcd.url, "--instance", name, "--cluster-name", "t", "--lease-ttl", "3",
         "--advertise", f"{advertise}:{port}"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    return proc, sock, log


def refused_start(tmp, name, repo, etcd, cert, ca, advertise="localhost"):
    """warmd's exit status and log when it is expected to refuse to start."""
    proc, _, log = start(tmp, name, repo, etcd, cert, ca, advertise)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    return code, open(log).read()


def main():
    tmp = tempfile.mkdtemp(prefix="warm-cluster-tls-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(os.path.join(tmp, "token"), 0o600)
    ca = make_ca(tmp, "cluster-ca")
    certs = {n: make_cert(tmp, n, ca, cn="warm-" + n, sans=("DNS:localhost",)) for n in ["a", "b"]}
    etcd = Etcd(tmp)
    etcd.start()
    procs, socks, logs = {}, {}, {}
    try:
        for n in ["a", "b"]:
            procs[n], socks[n], logs[n] = start(tmp, n, repo, etcd, certs[n], ca)
        check(wait_for(lambda: all(names(s) == ["a", "b"] for s in socks.values()), 60),
              f"a and b see each other: {[names(s) for s in socks.values()]}")

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
        check(status(socks["a"], "f1").get("state") == "NOT_LOADED", "a forwarded f1 over TLS instead of loading it")
        check(status(socks["b"], "f1").get("requests", 0) >= 1, f"b served a's request: {status(socks['b'], 'f1')}")

        # A forged record for 'evil', holding f9, at a TLS listener whose certificate names
        # localhost but comes from another CA.
        impostor = TlsImpostor(make_cert(tmp, "evil", make_ca(tmp, "evil-ca"), cn="evil", sans=("DNS:localhost",)))
        rc, record = etcd.ctl("get", "/warm/t/instances/a", "--print-value-only")
        check(rc == 0 and record.strip(), "a's record is in etcd")
        forged = json.loads(record)
        forged.update(name="evil", address=f"localhost:{impostor.port}", residents=["f9"], loading=[], hot=[])
        rc, granted = etcd.ctl("lease", "grant", "60")
        lease = granted.split()[1] if rc == 0 else "0"
        check(etcd.ctl("put", "--lease=" + lease, "/warm/t/instances/evil", json.dumps(forged))[0] == 0, "put evil")
        check(wait_for(lambda: "evil" in (names(socks["a"]) or []), 5), "a takes in evil's record")
        rc, out, err = ctl(socks["a"], "infer", "f9", "--random")
        check(rc == 0, f"a still serves f9: {out} {err}")
        with impostor.lock:
            connections, handshakes, received = impostor.connections, impostor.handshakes, impostor.received
        check(connections >= 1, "a dialed the forged record's address")
        # kj checks the certificate as the handshake ends, and closes: nothing of Cap'n Proto (the
        # bootstrap, the login) reaches the impostor.
        check(received == 0, f"a refused the impostor's certificate: {received} bytes after {handshakes} handshake(s)")
        check("TLS peer's certificate is not trusted" in open(logs["a"]).read(), "a logged the refused certificate")

        # Addresses peers could not check.
        other = make_cert(tmp, "other", ca, cn="warm-other", sans=("DNS:other.example",))
        code, log = refused_start(tmp, "ip", repo, etcd, certs["a"], ca, advertise="127.0.0.1")
        check(code == 2 and "not an IP address" in log, f"an IP address advertised with TLS is refused: {code} {log[-400:]}")
        code, log = refused_start(tmp, "unnamed", repo, etcd, other, ca)
        check(code == 2 and "does not name localhost" in log,
              f"a host the certificate does not name is refused: {code} {log[-400:]}")
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
        print(f"cluster_tls_test: {failures} check(s) failed (left {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("cluster_tls_test: all checks passed")


main()
