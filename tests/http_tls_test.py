#!/usr/bin/python3
"""Black-box: warmd's HTTP front over TLS (--tls-cert, --tls-key, --tls-client-ca), with Python's
ssl module as the client and certificates made by tests/tls_certs.py.

With the CA trusted: health, inference (with the token; kept-alive, chunked, large, and a request
pipelined behind a body the gate read, whose bytes OpenSSL holds decrypted where poll() cannot see
them) and /metrics are served as over plain HTTP, and the gate's own answers (408, 431) come
through TLS. A client that does not trust the CA fails verification; one that offers ALPN
without http/1.1 is refused; plain HTTP to the TLS port gets no HTTP answer, and the server
serves on. Clients that connect and never handshake hold no worker (more of them than
--http-threads, and an inference is still served at once) and are closed at the first head's
deadline (--http-header-timeout). Mutual TLS (--tls-client-ca): no client certificate, or one
from another CA, is refused and logged; one from the client CA is served. SIGHUP with a new
certificate: new connections see its CN, a connection already open serves on; SIGHUP with a
broken key: warmd logs the error and serves on with the previous certificate. An --http unix
socket stays plain whatever --tls-cert says.

Usage: http_tls_test.py WARMD WARMCTL
"""

import http.client
import json
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
from tls_certs import make_ca, make_cert  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
failures = 0
TOKEN = "tls-test-token-0123456789"
HEADER_TIMEOUT = 2.0  # --http-header-timeout: the first head's deadline, the handshake's too


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


class Warmd:
    """warmd on a free loopback HTTP port (read from its log), serving every model directory."""

    def __init__(self, tmp, name, *extra, http="127.0.0.1:0"):
        self.log_path = os.path.join(tmp, name + ".log")
        self.sock = os.path.join(tmp, name + ".sock")
        self.proc = subprocess.Popen(
            [warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
             "--device", "host:64MiB", "--listen", "unix:" + self.sock, "--http", http, "--serve-repo",
             "--version-settle", "100ms", "--log-level", "info", *extra],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        self.port = None
        found = wait_for(lambda: self.proc.poll() is not None or self._port() is not None, 30)
        self.port = self._port()
        # The Cap'n Proto socket comes last, once the models are served.
        found = found and wait_for(lambda: self.proc.poll() is not None or os.path.exists(self.sock), 30)
        if not found or self.port is None or self.proc.poll() is not None:
            print(self.log()[-3000:])
            raise SystemExit(f"http_tls_test: {name}: warmd did not serve HTTP")

    def _port(self):
        """The HTTP port once warmd serves HTTP (0 on a unix socket), else None."""
        m = re.search(r"serving HTTP on (?:127\.0\.0\.1:(\d+)|unix:)", self.log())
        return (int(m.group(1)) if m.group(1) else 0) if m else None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def context(ca=None, client=None, alpn=None):
    """A client context that verifies the server against `ca` (none: the system's, which lack it)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(ca["cert"])
    else:
        ctx.load_default_certs()
    if client:
        ctx.load_cert_chain(client["cert"], client["key"])
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def peer_cn(sock):
    for rdn in sock.getpeercert().get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


AUTH = {"Authorization": "Bearer " + TOKEN}


def https(port, ctx, method, path, body=None, headers=None, conn=None):
    """(status, body bytes, the server certificate's CN) of one request; `conn` kept open."""
    c = conn or http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
    c.request(method, path, body=body, headers=headers or {})
    cn = peer_cn(c.sock)  # before the answer, which may close the connection
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, data, cn


def infer_body(rows=1, value=0.5):
    return json.dumps({"inputs": [{"name": "input", "shape": [rows, 16], "datatype": "FP32",
                                   "data": [value + r for r in range(rows) for _ in range(16)]}]}).encode()


def outputs_of(data):
    try:
        return json.loads(data)["outputs"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def tls_socket(port, ctx, timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def read_until_closed(sock, seconds):
    """Everything the peer sends until it closes: (bytes, "closed" | "reset" | "timeout")."""
    data = b""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, "timeout"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data, "timeout"
        except (ssl.SSLError, ConnectionError, OSError):
            return data, "reset"
        if not chunk:
            return data, "closed"
        data += chunk


def read_responses(sock, count, seconds):
    """Up to `count` HTTP responses (status, body) read within `seconds` (Content-Length framed)."""
    answers, data = [], b""
    deadline = time.monotonic() + seconds
    while len(answers) < count:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            head = data[:end].decode("latin-1")
            length = int(re.search(r"(?im)^content-length:\s*(\d+)", head).group(1))
            if len(data) >= end + 4 + length:
                answers.append((int(head.split()[1]), data[end + 4:end + 4 + length]))
                data = data[end + 4 + length:]
                continue
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ssl.SSLError, ConnectionError, OSError):
            break
        if not chunk:
            break
        data += chunk
    return answers


def is_open(sock):
    """Whether the server still holds a plain TCP connection that sent nothing."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def refused(port, ctx):
    """Whether a request with `ctx` gets no HTTP answer (the handshake, or the connection, fails)."""
    try:
        status, _, _ = https(port, ctx, "GET", "/v2/health/live")
        return False, f"answered {status}"
    except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError) as e:
        return True, repr(e)


def served_over_tls(d, trusted):
    port = d.port
    check(wait_for(lambda: https(port, trusted, "GET", "/v2/health/ready")[0] == 200, 30), "ready over https")
    check(wait_for(lambda: https(port, trusted, "GET", "/v2/models/m", headers=AUTH)[0] == 200, 30),
          "model m is served (--serve-repo)")
    status, data, cn = https(port, trusted, "GET", "/v2/health/live")
    check(status == 200 and cn == "warm-a", f"health over https: {status} {data!r} CN={cn}")
    status, data, _ = https(port, trusted, "POST", "/v2/models/m/infer", infer_body(), AUTH)
    out = outputs_of(data)
    check(status == 200 and out and out["shape"] == [1, 8], f"inference over https: {status} {data[:200]!r}")
    status, data, _ = https(port, trusted, "POST", "/v2/models/m/infer", infer_body())
    check(status == 401, f"inference without the token over https: 401, not {status}")
    status, data, _ = https(port, trusted, "GET", "/metrics", headers=AUTH)
    check(status == 200 and b"warm_" in data, f"/metrics over https: {status}")

    # ALPN: http/1.1 when offered; a client that offers only h2 is refused.
    with tls_socket(port, context(ca=CA, alpn=["h2", "http/1.1"])) as s:
        check(s.selected_alpn_protocol() == "http/1.1", f"ALPN chooses http/1.1: {s.selected_alpn_protocol()}")
    ok, why = refused(port, context(ca=CA, alpn=["h2"]))
    check(ok, f"a client offering ALPN h2 only is refused: {why}")

    # One connection, many requests: the worker's linger (back to back) and the gate (after a pause).
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=trusted, timeout=15)
    statuses = []
    for i in range(6):
        if i % 2:
            statuses.append(https(port, trusted, "GET", "/v2/health/live", conn=conn)[0])
        else:
            statuses.append(https(port, trusted, "POST", "/v2/models/m/infer", infer_body(), AUTH, conn=conn)[0])
        if i == 3:
            time.sleep(0.2)
    conn.close()
    check(statuses == [200] * 6, f"kept-alive requests over one TLS connection: {statuses}")

    # A large body (read by the gate in many records) and a chunked one (read on the worker).
    status, data, _ = https(port, trusted, "POST", "/v2/models/m/infer", infer_body(3000), AUTH)
    out = outputs_of(data)
    check(status == 200 and out and out["shape"] == [3000, 8] and len(out["data"]) == 24000,
          f"a 3000-row inference over https: {status} {data[:200]!r}")
    body = infer_body(2)
    chunks = (body[i:i + 50] for i in range(0, len(body), 50))
    status, data, _ = https(port, trusted, "POST", "/v2/models/m/infer", chunks,
                            dict(AUTH, **{"Content-Type": "application/json"}))
    out = outputs_of(data)
    check(status == 200 and out and out["shape"] == [2, 8], f"a chunked inference over https: {status} {data[:200]!r}")

    # The gate reads a body exactly; what follows it in the same TLS record (a pipelined request)
    # stays decrypted inside OpenSSL, where poll() does not see it.
    with tls_socket(port, trusted) as s:
        body = infer_body()
        s.sendall(f"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        time.sleep(0.3)  # the gate has the head and waits for the body
        s.sendall(body + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        answers = read_responses(s, 2, 3)
        check([a[0] for a in answers] == [200, 200],
              f"a request pipelined behind a body in one TLS record is answered at once: {answers}")

    # The gate's own answers, through TLS.
    with tls_socket(port, trusted) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")  # never ends
        data, how = read_until_closed(s, HEADER_TIMEOUT + 5)
        check(data.startswith(b"HTTP/1.1 408"), f"an incomplete head over TLS gets 408: {data[:80]!r} ({how})")
    with tls_socket(port, trusted) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + b"X-Many: 1\r\n" * 200 + b"\r\n")
        data, how = read_until_closed(s, 10)
        check(data.startswith(b"HTTP/1.1 431"), f"a head of too many lines over TLS gets 431: {data[:80]!r} ({how})")


def refusals(d, trusted):
    port = d.port
    ok, why = refused(port, context())  # the system's CAs: not the test CA
    check(ok and "CERTIFICATE_VERIFY_FAILED" in why, f"a client that does not trust the CA fails verification: {why}")

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        data, how = read_until_closed(s, 5)
        check(b"HTTP/" not in data and how != "timeout",
              f"plain HTTP to the TLS port gets no HTTP answer and is closed: {data[:80]!r} ({how})")
    status, _, _ = https(port, trusted, "GET", "/v2/health/live")
    check(status == 200, f"served after a plain-HTTP client: {status}")

    # Clients that open TCP and never complete a handshake, more than --http-threads 2 of them: one
    # sends nothing, three the first bytes of a ClientHello (a record header announcing 512 bytes).
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
    for s in silent[1:]:
        s.sendall(b"\x16\x03\x01\x02\x00\x01")
    time.sleep(0.2)  # the server has read them
    start = time.monotonic()
    status, data, _ = https(port, trusted, "POST", "/v2/models/m/infer", infer_body(), AUTH)
    served_after = time.monotonic() - start
    still_open = [is_open(s) for s in silent]
    check(status == 200 and all(still_open),
          f"an inference is served while 4 clients that never complete a handshake hold their connections: "
          f"{status} after {served_after:.2f} s, open {still_open}")
    closed_after = []
    for s in silent:
        data, how = read_until_closed(s, HEADER_TIMEOUT + 6 - (time.monotonic() - start))
        closed_after.append((round(time.monotonic() - start, 2), how, data))
        s.close()
    check(all(how != "timeout" and not data and HEADER_TIMEOUT * 0.5 <= t <= HEADER_TIMEOUT + 4
              for t, how, data in closed_after),
          f"clients that never handshake are closed, unanswered, at the {HEADER_TIMEOUT} s head deadline: "
          f"{closed_after}")
    status, _, _ = https(port, trusted, "GET", "/v2/health/live")
    check(status == 200, f"served after the silent clients: {status}")


def mutual_tls(tmp, server):
    client_ca = make_ca(tmp, "client-ca")
    alice = make_cert(tmp, "alice", client_ca, cn="alice", sans=None)
    mallory = make_cert(tmp, "mallory", CA, cn="mallory", sans=None)  # the server's CA, not the client CA
    d = Warmd(tmp, "mtls", "--token-file", TOKEN_FILE, "--tls-cert", server["cert"], "--tls-key", server["key"],
              "--tls-client-ca", client_ca["cert"])
    try:
        good = context(ca=CA, client=alice)
        check(wait_for(lambda: https(d.port, good, "GET", "/v2/models/m", headers=AUTH)[0] == 200, 30),
              "mutual TLS: model m is served to a client with a certificate")
        ok, why = refused(d.port, context(ca=CA))
        check(ok, f"mutual TLS: a client without a certificate is refused: {why}")
        ok, why = refused(d.port, context(ca=CA, client=mallory))
        check(ok, f"mutual TLS: a certificate from another CA is refused: {why}")
        status, data, _ = https(d.port, good, "POST", "/v2/models/m/infer", infer_body(), AUTH)
        check(status == 200 and outputs_of(data), f"mutual TLS: a certificate from the client CA is served: {status}")
        check(wait_for(lambda: "TLS handshake with 127.0.0.1 failed" in d.log(), 5),
              "mutual TLS: refused handshakes are logged")
    finally:
        check(d.stop() == 0, "warmd (mutual TLS) stops cleanly")


def reload(d, tmp, cert_path, key_path):
    port = d.port
    trusted = context(ca=CA)
    kept = http.client.HTTPSConnection("127.0.0.1", port, context=trusted, timeout=15)
    status, _, cn = https(port, trusted, "GET", "/v2/health/live", conn=kept)
    check(status == 200 and cn == "warm-a", f"before SIGHUP: CN {cn}")

    renewed = make_cert(tmp, "renewed", CA, cn="warm-b")
    os.replace(renewed["cert"], cert_path)
    os.replace(renewed["key"], key_path)  # made 0600
    d.proc.send_signal(signal.SIGHUP)

    kept_answers = set()  # (status, CN) of the connection opened before the reload, used meanwhile

    def new_cn():
        try:
            status, _, cn = https(port, trusted, "POST", "/v2/models/m/infer", infer_body(), AUTH, conn=kept)
            kept_answers.add((status, cn))
        except (ssl.SSLError, OSError, http.client.HTTPException) as e:
            kept_answers.add(repr(e))
        try:
            return https(port, trusted, "GET", "/v2/health/live")[2]
        except (ssl.SSLError, OSError, http.client.HTTPException):
            return None

    check(wait_for(lambda: new_cn() == "warm-b", 15), f"after SIGHUP new connections see the new CN: {new_cn()}")
    check(kept_answers == {(200, "warm-a")},
          f"a connection open across the reload serves on, with the certificate it began with: {kept_answers}")
    kept.close()

    before = len(d.log())
    with open(key_path, "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    os.chmod(key_path, 0o600)
    d.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: "error" in d.log()[before:].lower() and "tls" in d.log()[before:].lower(), 15),
          f"SIGHUP with a broken key logs an error: {d.log()[before:][-600:]!r}")
    status, data, cn = https(port, trusted, "POST", "/v2/models/m/infer", infer_body(), AUTH)
    check(status == 200 and cn == "warm-b", f"after a broken reload the previous certificate serves on: {status} {cn}")


def unix_stays_plain(tmp, server):
    path = os.path.join(tmp, "http.sock")
    # Cap'n Proto on loopback TCP too: TLS has a TCP front to apply to.
    d = Warmd(tmp, "unix", "--listen", "127.0.0.1:0", "--tls-cert", server["cert"], "--tls-key", server["key"],
              http="unix:" + path)
    try:
        check(wait_for(lambda: os.path.exists(path), 20), "the HTTP unix socket exists")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data, _ = read_until_closed(s, 10)
        check(data.startswith(b"HTTP/1.1 200"), f"plain HTTP on the unix socket with --tls-cert: {data[:80]!r}")
    finally:
        check(d.stop() == 0, "warmd (unix socket) stops cleanly")


def main():
    global CA, TOKEN_FILE
    tmp = tempfile.mkdtemp(prefix="warm-http-tls-")
    subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "repo", "m", "1"), "--layers", "16,8"],
                   check=True, capture_output=True)
    TOKEN_FILE = os.path.join(tmp, "token")
    with open(TOKEN_FILE, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(TOKEN_FILE, 0o600)
    CA = make_ca(tmp, "server-ca")
    server = make_cert(tmp, "server", CA, cn="warm-a")
    # The files warmd is given, which the reload replaces.
    cert_path, key_path = os.path.join(tmp, "serving.pem"), os.path.join(tmp, "serving.key")
    shutil.copyfile(server["cert"], cert_path)
    shutil.copyfile(server["key"], key_path)
    os.chmod(key_path, 0o600)

    d = Warmd(tmp, "tls", "--token-file", TOKEN_FILE, "--tls-cert", cert_path, "--tls-key", key_path,
              "--http-header-timeout", f"{int(HEADER_TIMEOUT * 1000)}ms", "--http-threads", "2")
    try:
        trusted = context(ca=CA)
        served_over_tls(d, trusted)
        refusals(d, trusted)
        mutual_tls(tmp, server)
        reload(d, tmp, cert_path, key_path)
        unix_stays_plain(tmp, server)
        check(d.stop() == 0, "warmd stops cleanly")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    if failures:
        print(d.log()[-4000:])
        print(f"http_tls_test: {failures} check(s) failed (left {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("http_tls_test: all checks passed")


main()
