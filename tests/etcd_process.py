"""A real single-member etcd for the Python cluster tests, on two free loopback ports and its own
data directory under the test's temporary directory, and the small helpers those tests share."""

import os
import socket
import subprocess
import sys
import time
import urllib.request

ETCD = os.environ.get("ETCD", "/usr/bin/etcd")


def free_port():
    """A loopback TCP port nothing listens on when this returns."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, seconds=20):
    """Polls `predicate` every 50 ms until it is true or `seconds` pass; its last answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Etcd:
    """secured: clients speak TLS and must present a certificate of the test's CA (made with the
    openssl command: ca.pem, server.pem, client-root.pem and their keys, in the member's
    directory); enable_auth() then turns on etcd's users."""

    def __init__(self, tmp, secured=False):
        self.dir = os.path.join(tmp, "etcd-secured" if secured else "etcd")
        self.client, self.peer, self.metrics = free_port(), free_port(), free_port()
        self.secured = secured
        self.password = None
        self.proc = None
        self.log = open(os.path.join(tmp, "etcd.log"), "a")
        if secured:
            self.make_certificates()

    @property
    def url(self):
        return f"{'https' if self.secured else 'http'}://127.0.0.1:{self.client}"

    def file(self, name):
        return os.path.join(self.dir, name)

    def make_certificates(self):
        os.makedirs(self.dir, exist_ok=True)

        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", "-days", "2", "-subj", "/CN=warm-test-ca", "-keyout", "ca.key", "-out", "ca.pem", *key)
        for name, cn, ext in [
                ("server", "warm-test-etcd", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"),
                ("client-root", "root", "extendedKeyUsage=clientAuth\n")]:
            with open(self.file(name + ".ext"), "w") as f:
                f.write(ext)
            openssl("req", "-new", "-subj", "/CN=" + cn, "-keyout", name + ".key", "-out", name + ".csr", *key)
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                    "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem")

    def start(self):
        tls = ["--cert-file", self.file("server.pem"), "--key-file", self.file("server.key"), "--trusted-ca-file",
               self.file("ca.pem"), "--client-cert-auth", "--listen-metrics-urls",
               f"http://127.0.0.1:{self.metrics}"] if self.secured else []
        self.proc = subprocess.Popen(
            [ETCD, "--data-dir", os.path.join(self.dir, "data"), "--listen-client-urls", self.url,
             "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{self.peer}", "--initial-cluster", f"default=http://127.0.0.1:{self.peer}", *tls],
            stdout=self.log, stderr=subprocess.STDOUT)
        health = f"http://127.0.0.1:{self.metrics}/health" if self.secured else self.url + "/health"

        def healthy():
            try:
                with urllib.request.urlopen(health, timeout=1) as r:
                    return b'"true"' in r.read()
            except OSError:
                return False
        if not wait_for(healthy, 20):
            sys.exit("etcd did not start")

    def ctl(self, *args):
        """etcdctl against this member, as root: (returncode, stdout)."""
        access = ["--cacert", self.file("ca.pem"), "--cert", self.file("client-root.pem"), "--key",
                  self.file("client-root.key")] if self.secured else []
        if self.password:
            access += ["--user", "root:" + self.password]
        r = subprocess.run(["etcdctl", "--endpoints", self.url, *access, *args], capture_output=True, text=True,
                           timeout=30)
        return r.returncode, r.stdout

    def enable_auth(self, password):
        """Adds root with `password` and turns etcd's authentication on."""
        assert self.ctl("user", "add", "root:" + password)[0] == 0
        assert self.ctl("auth", "enable")[0] == 0
        self.password = password

    def kill(self):
        self.proc.kill()
        self.proc.wait()
