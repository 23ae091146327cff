#!/usr/bin/python3
"""Black-box: models from an S3 endpoint and a web server over TLS with a private CA.

The verifying S3 proxy and nginx serve https with a certificate a test CA signed. warmd given the
CA (--source-ca) registers and serves a model from each, answering exactly as the same file from
local disk, every request signed and verified over TLS. A warmd without the CA refuses the
sources with an error naming the certificate problem, and goes on serving.

Usage: remote_tls_test.py WARMD WARMCTL
"""

import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "support"))
from object_servers import MissingComponent, ObjectServers  # noqa: E402
from warm_cli import Checks, WarmCtl  # noqa: E402
from tls_certs import make_ca, make_cert  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
checks, cli = Checks(), WarmCtl(warmctl)
check, ctl, outputs = checks.check, cli.run, cli.outputs


def start(tmp, name, servers, *extra):
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "local"), "--repo", servers.s3.url("prod"),
                             "--s3-endpoint", servers.s3.endpoint, "--state", os.path.join(tmp, name),
                             "--device", "host:64MiB", "--listen", "unix:" + sock, *extra],
                            stdout=log, stderr=subprocess.STDOUT, env=servers.s3.env())
    deadline = time.monotonic() + 30
    while ctl(sock, "models")[0] != 0:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(open(os.path.join(tmp, name + ".log")).read()[-2000:])
        time.sleep(0.05)
    return proc, sock


def main():
    tmp = tempfile.mkdtemp(prefix="warm-remote-tls-")
    ca = make_ca(tmp, "source-ca")
    server = make_cert(tmp, "source", ca)
    made = os.path.join(tmp, "local", "copy", "1")
    subprocess.run([warmctl, "make-model", "--out", made, "--layers", "16,8,4", "--seed", "5"],
                   check=True, capture_output=True)
    with open(os.path.join(made, "model.safetensors"), "rb") as f:
        data = f.read()
    try:
        servers = ObjectServers(bucket="models", tls={**server, "ca": ca["cert"]})
    except MissingComponent as e:
        print(f"remote_tls_test: {e}")
        return 1
    with servers:
        servers.s3.put("prod/m/1/model.safetensors", data)
        servers.http.write("h/1/model.safetensors", data)
        check(servers.s3.endpoint.startswith("https://"), "the S3 endpoint is https")

        proc, sock = start(tmp, "trusting", servers, "--source-ca", ca["cert"])
        check(ctl(sock, "register", "copy", "copy")[0] == 0, "register the local copy")
        want = outputs(sock, "copy")
        rc, _, err = ctl(sock, "register", "m", "m")
        check(rc == 0, f"register m from S3 over TLS: {err}")
        rc, _, err = ctl(sock, "register", "h", servers.http.url("h/1"))
        check(rc == 0, f"register h from nginx over TLS: {err}")
        check(outputs(sock, "m") == want, "m answers as its local copy")
        check(outputs(sock, "h") == want, "h answers as its local copy")
        check(servers.s3.proxy.requests and not servers.s3.proxy.denied,
              f"requests over TLS, each signature verified: {servers.s3.proxy.denied}")
        proc.terminate()
        proc.wait(30)

        proc, sock = start(tmp, "untrusting", servers)
        for name, path in [("m", "m"), ("h", servers.http.url("h/1"))]:
            rc, _, err = ctl(sock, "register", name, path)
            check(rc != 0 and "unavailable" in err and "certificate" in err.lower(),
                  f"{name} from a source whose CA is not trusted is refused: {err}")
        check(ctl(sock, "models")[0] == 0 and proc.poll() is None, "warmd goes on serving")
        proc.terminate()
        proc.wait(30)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
