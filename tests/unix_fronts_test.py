#!/usr/bin/python3
"""warmd's HTTP and gRPC fronts on unix sockets: served without the token that its TCP fronts ask
for (the socket file's mode 0600 is the access rule), created 0600 whatever the umask, removed
at stop, and never over a file that is not a socket.

Usage: unix_fronts_test.py WARMD WARMCTL. Exits 77 (skipped) without python3-grpcio.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

try:
    import grpc
except ImportError as e:
    print(f"unix_fronts_test: skipped, {e}")
    sys.exit(77)

warmd, warmctl = sys.argv[1:3]
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {what}")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def http_call(path, method, target, body=None):
    c = UnixHTTPConnection(path)
    c.request(method, target, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def main():
    tmp = tempfile.mkdtemp(prefix="warm-unix-fronts-")
    repo = os.path.join(tmp, "repo")
    subprocess.run([warmctl, "make-model", "--out", os.path.join(repo, "m", "1"), "--layers", "4,8,2", "--seed", "3"],
                   check=True, capture_output=True)
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("a-token-the-unix-fronts-do-not-ask-for\n")
    os.chmod(token, 0o600)
    rpc, http_sock, grpc_sock = (os.path.join(tmp, n + ".sock") for n in ("rpc", "http", "grpc"))
    log_path = os.path.join(tmp, "warmd.log")
    old_umask = os.umask(0o000)  # the sockets must be 0600 anyway
    proc = subprocess.Popen([warmd, "--repo", repo, "--state", os.path.join(tmp, "state"), "--device", "host:64MiB",
                             "--listen", "unix:" + rpc, "--http", "unix:" + http_sock, "--grpc", "unix:" + grpc_sock,
                             "--token-file", token, "--log-level", "info"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    os.umask(old_umask)
    try:
        check(wait_for(lambda: all(os.path.exists(p) for p in (rpc, http_sock, grpc_sock)), 20), "the sockets exist")
        for p in (http_sock, grpc_sock):
            mode = os.stat(p).st_mode
            check(stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, f"{p} is a socket of mode 0600: {oct(mode)}")
        r = subprocess.run([warmctl, "--connect", "unix:" + rpc, "register", "m", "m"], capture_output=True, text=True)
        check(r.returncode == 0, f"register m: {r.stderr}")

        # HTTP, no token.
        status, _ = http_call(http_sock, "GET", "/v2/health/ready")
        check(status == 200, f"HTTP health over the unix socket: {status}")
        body = json.dumps({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
        status, data = http_call(http_sock, "POST", "/v2/models/m/infer", body)
        check(status == 200 and len(json.loads(data)["outputs"][0]["data"]) == 2,
              f"HTTP inference over the unix socket without a token: {status} {data[:200]}")

        # gRPC, no token: ServerLive (an empty request; the answer is `live = true`).
        with grpc.insecure_channel("unix:" + grpc_sock) as channel:
            live = channel.unary_unary("/inference.GRPCInferenceService/ServerLive")
            try:
                answer = live(b"", timeout=10)
                check(answer == b"\x08\x01", f"gRPC ServerLive over the unix socket: {answer!r}")
            except grpc.RpcError as e:
                check(False, f"gRPC ServerLive over the unix socket: {e.code()} {e.details()}")

        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "warmd stops cleanly")
        check(not os.path.exists(http_sock) and not os.path.exists(grpc_sock), "the front sockets are removed at stop")

        # A file that is not a socket is never replaced.
        with open(http_sock, "w") as f:
            f.write("keep")
        r = subprocess.run([warmd, "--repo", repo, "--state", os.path.join(tmp, "state2"), "--listen",
                            "unix:" + os.path.join(tmp, "rpc2.sock"), "--http", "unix:" + http_sock],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "is not a socket" in r.stdout + r.stderr,
              f"a regular file at the HTTP path is refused: {r.returncode} {r.stderr[-300:]}")
        check(open(http_sock).read() == "keep", "and left as it was")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if failures:
        print(open(log_path).read()[-3000:])
        print(f"unix_fronts_test: {failures} check(s) failed (left {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("unix_fronts_test: all checks passed")


main()
