#!/usr/bin/python3
"""Black-box: warmd's Cap'n Proto listener over TLS (--tls-cert, --tls-key, --tls-client-ca), driven
by warmctl and by raw sockets, with certificates made here (tls_certs.py).

- warmctl over TLS with the CA trusted works; without TLS, with the system's roots, or expecting
  another name it fails, and warmd keeps serving.
- A connection that never handshakes is closed at --login-timeout, and counts as a pending login
  of its address meanwhile (it holds that address's one slot).
- Mutual TLS: no client certificate, or one from another CA, is refused; the CA's is served.
- SIGHUP: a new certificate is served to the next connections; a broken set (a key that is not
  the certificate's) is logged and the old certificate kept.
- Bad files at start (a world-readable key, a key of another certificate) stop warmd with a
  message naming the file.
Takes about 15 s. Usage: rpc_tls_test.py WARMD WARMCTL
"""

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tls_certs  # noqa: E402

warmd, warmctl = sys.argv[1:3]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def start(tmp, name, *flags):
    log_path = os.path.join(tmp, name + ".log")
    sock = os.path.join(tmp, name + ".sock")
    proc = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
                             "--device", "host:64MiB", "--listen", "127.0.0.1:0", "--listen", "unix:" + sock,
                             *(() if "--login-timeout" in flags else ("--login-timeout", "1s")), *flags],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    port = None
    for _ in range(400):
        text = open(log_path).read()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
        if found and os.path.exists(sock):
            port = int(found.group(1))
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if port is None:
        proc.kill()
        sys.exit("FAIL: warmd did not start: " + open(log_path).read()[-2000:])
    return proc, port, log_path


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    check(proc.wait(timeout=30) == 0, "warmd exits 0 after SIGTERM")


def ctl(port, *args, timeout="3s"):
    r = subprocess.run([warmctl, "--connect", f"localhost:{port}", "--connect-timeout", timeout, *args],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def served_cn(port, ca):
    """The CN of the certificate the listener presents now (None when the handshake fails)."""
    context = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                subject = dict(x[0] for x in tls.getpeercert()["subject"])
                return subject.get("commonName")
    except (ssl.SSLError, OSError):
        return None


def closed_within(conn, seconds):
    """Whether the server closes `conn` (an idle TCP connection) within `seconds`."""
    conn.settimeout(seconds)
    try:
        return conn.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "repo", "m", "1"), "--layers", "4,2"],
                   check=True, capture_output=True)
    ca = tls_certs.make_ca(tmp, "ca")
    other_ca = tls_certs.make_ca(tmp, "other-ca")
    server = tls_certs.make_cert(tmp, "server", ca, cn="localhost")
    renewed = tls_certs.make_cert(tmp, "renewed", ca, cn="renewed")
    alice = tls_certs.make_cert(tmp, "alice", ca, cn="alice", sans=())
    mallory = tls_certs.make_cert(tmp, "mallory", other_ca, cn="mallory", sans=())
    cert, key = os.path.join(tmp, "live.pem"), os.path.join(tmp, "live.key")
    shutil.copy(server["cert"], cert)
    shutil.copy(server["key"], key)
    os.chmod(key, 0o600)

    # --- TLS, no client certificates ---------------------------------------------------------
    proc, port, log_path = start(tmp, "a", "--tls-cert", cert, "--tls-key", key)
    try:
        check("TCP fronts: TLS with CN=localhost" in open(log_path).read(), "the certificate is logged at start")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "register", "m", "m")
        check(rc == 0, f"warmctl over TLS with the CA: {rc} {out}")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--json", "infer", "m", "--random")
        check(rc == 0 and '"outputs"' in out, f"an inference over TLS: {rc} {out[:300]}")
        rc, out = ctl(port, "models")
        check(rc == 2, f"plain Cap'n Proto to the TLS listener fails: {rc} {out}")
        rc, out = ctl(port, "--tls", "models")
        check(rc == 2 and "certificate" in out.lower(), f"the system's roots do not vouch for the test CA: {rc} {out}")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--tls-server-name", "other.example", "models")
        check(rc == 2, f"a certificate for another name is refused: {rc} {out}")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "models")
        check(rc == 0, f"and warmd still serves: {rc} {out}")

        # A connection that never starts its handshake: closed at --login-timeout (1 s).
        idle = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        check(closed_within(idle, 5) and time.monotonic() - started < 4,
              "a connection that never handshakes is closed at the login timeout")
        idle.close()

        # SIGHUP with a new certificate: the next connections get it.
        check(served_cn(port, ca["cert"]) == "localhost", "the first certificate is served")
        shutil.copy(renewed["cert"], cert)
        shutil.copy(renewed["key"], key)
        proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: served_cn(port, ca["cert"]) == "renewed", 10), "SIGHUP: the new certificate is served")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--tls-server-name", "localhost", "models")
        check(rc == 0, f"warmctl after the reload: {rc} {out}")
        # SIGHUP with a key that is not the certificate's: logged, the current one kept.
        shutil.copy(server["key"], key)
        proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: "the TLS certificates were not reloaded" in open(log_path).read(), 10),
              "a broken set is logged at SIGHUP")
        check(served_cn(port, ca["cert"]) == "renewed", "and the certificate in use is kept")
    finally:
        stop(proc)
    shutil.copy(server["cert"], cert)
    shutil.copy(server["key"], key)

    # --- Handshakes count as pending logins of their address -----------------------------------
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("a-token-for-the-tls-test\n")
    os.chmod(token, 0o600)
    proc, port, log_path = start(tmp, "b", "--tls-cert", cert, "--tls-key", key, "--token-file", token,
                                 "--max-pending-logins", "8", "--login-timeout", "3s")
    try:
        idle = socket.create_connection(("127.0.0.1", port))  # holds 127.0.0.1's one slot (8 / 8)
        time.sleep(0.3)
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--token-file", token, "models", timeout="1s")
        check(rc == 2, f"while a handshake from the address is pending, its next connection is refused: {rc} {out}")
        check(closed_within(idle, 6), "the idle handshake is closed at the login timeout")
        idle.close()
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--token-file", token, "models")
        check(rc == 0, f"then the address gets in again: {rc} {out}")
    finally:
        stop(proc)

    # --- Mutual TLS -------------------------------------------------------------------------------
    proc, port, log_path = start(tmp, "c", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca["cert"])
    try:
        check("clients need a certificate from" in open(log_path).read(), "mutual TLS is logged at start")
        check("has no token: every local user" not in open(log_path).read(),
              "with mutual TLS the listener is not reported open to every local user")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "models")
        check(rc == 2, f"no client certificate: refused: {rc} {out}")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--tls-cert", mallory["cert"], "--tls-key", mallory["key"], "models")
        check(rc == 2, f"a client certificate from another CA: refused: {rc} {out}")
        rc, out = ctl(port, "--tls-ca", ca["cert"], "--tls-cert", alice["cert"], "--tls-key", alice["key"], "models")
        check(rc == 0, f"the CA's client certificate: served: {rc} {out}")
    finally:
        stop(proc)

    # --- Bad files at start -----------------------------------------------------------------------
    def refused_start(what, *flags):
        r = subprocess.run([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, "d-state"),
                            "--listen", "127.0.0.1:0", *flags], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    os.chmod(key, 0o644)
    rc, out = refused_start("readable key", "--tls-cert", cert, "--tls-key", key)
    check(rc == 2 and key in out and "chmod 600" in out, f"a key others may read is refused: {rc} {out[-400:]}")
    os.chmod(key, 0o600)
    rc, out = refused_start("foreign key", "--tls-cert", cert, "--tls-key", alice["key"])
    check(rc == 2 and "is not the key of the certificate" in out, f"a key of another certificate: {rc} {out[-400:]}")
    rc, out = refused_start("no key", "--tls-cert", cert)
    check(rc == 2 and "--tls-key" in out, f"a certificate without its key: {rc} {out[-400:]}")

print("FAIL" if failures else "PASS", f"({failures} failures)")
sys.exit(1 if failures else 0)
