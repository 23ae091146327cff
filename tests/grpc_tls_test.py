#!/usr/bin/python3
"""Black-box: warmd's gRPC front over TLS (--grpc HOST:PORT with --tls-cert, --tls-key,
--tls-client-ca), with python3-grpcio's secure channels and Python's ssl module as clients, and
certificates made by tests/tls_certs.py.

With the CA trusted: every kind of call is served as over plain gRPC, the token still asked for
(a wrong one logged against the client's real address, which warm's relay keeps), large tensors
both ways and many calls at once over one connection and over several. A client that does not
trust the CA fails; plain gRPC to the TLS port is refused and the server serves on. A connection
that never handshakes is closed at the idle timeout and holds nobody else up; past 64 handshakes in
progress from one address a new connection is closed at once. Mutual TLS: no client certificate is
refused, one from the client CA is served. SIGHUP with a new certificate: new connections see its
CN while a channel already open serves on; a broken key is logged and the old certificate kept.
The connections the relay held are all closed once their clients go.

Usage: grpc_tls_test.py WARMD WARMCTL SOURCE_ROOT. Exits 77 (skipped) without python3-grpcio or
python3-grpc-tools.
"""

import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

try:
    import grpc
    from grpc_tools import protoc
except ImportError as e:
    print(f"grpc_tls_test: skipped, {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from etcd_process import wait_for  # noqa: E402
from tls_certs import make_ca, make_cert  # noqa: E402

warmd, warmctl, root = sys.argv[1:4]
failures = 0
TOKEN = "grpc-tls-token-0123456789"
AUTH = [("authorization", "Bearer " + TOKEN)]


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


class Warmd:
    """warmd serving gRPC on a free loopback port (read from its log)."""

    def __init__(self, tmp, name, *extra):
        self.log_path = os.path.join(tmp, name + ".log")
        self.sock = os.path.join(tmp, name + ".sock")
        self.proc = subprocess.Popen(
            [warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
             "--device", "host:256MiB", "--listen", "unix:" + self.sock, "--grpc", "127.0.0.1:0",
             "--serve-repo", "--log-level", "info", *extra],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        found = wait_for(lambda: self.proc.poll() is not None or os.path.exists(self.sock), 30)
        port = None
        if found and wait_for(lambda: self.proc.poll() is not None or self._port() is not None, 10):
            port = self._port()
        if port is None:
            print(self.log()[-3000:])
            self.proc.kill()
            raise SystemExit(f"grpc_tls_test: {name}: warmd did not serve gRPC")
        self.port = port

    def _port(self):
        m = re.search(r"serving gRPC on 127\.0\.0\.1:(\d+)", self.log())
        return int(m.group(1)) if m else None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def channel(port, ca, client=None):
    creds = grpc.ssl_channel_credentials(root_certificates=read(ca["cert"]),
                                         private_key=read(client["key"]) if client else None,
                                         certificate_chain=read(client["cert"]) if client else None)
    return grpc.secure_channel(f"localhost:{port}", creds)


def refused(call):
    """The gRPC status code a call failed with; None when it succeeded."""
    try:
        call()
    except grpc.RpcError as e:
        return e.code()
    return None


def peer_cn(port, ca):
    """The CN of the certificate the server presents to a new TLS connection offering h2."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca["cert"])
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            check(s.selected_alpn_protocol() == "h2", f"ALPN: {s.selected_alpn_protocol()!r}, want h2")
            for rdn in s.getpeercert().get("subject", ()):
                for key, value in rdn:
                    if key == "commonName":
                        return value
    return None


def closed_by_server(conn, seconds):
    """True when the server closes `conn` within `seconds` (whatever it sends before)."""
    conn.settimeout(seconds)
    try:
        while True:
            if conn.recv(4096) == b"":
                return True
    except socket.timeout:
        return False
    except (ConnectionResetError, ssl.SSLError):
        return True


def infer_request(model, rows, width, value=0.25):
    r = pb.ModelInferRequest(model_name=model)
    r.inputs.add(name="input", datatype="FP32", shape=[rows, width])
    r.raw_input_contents.append(struct.pack(f"<{rows * width}f", *([value] * (rows * width))))
    return r


def registered(stub, model, metadata=()):
    """Waits until --serve-repo has registered `model` (it does so after warmd starts serving)."""
    def known():
        try:
            stub.ModelMetadata(pb.ModelMetadataRequest(name=model), metadata=metadata, timeout=10)
            return True
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return False
    return wait_for(known, 30)


def served_over_tls(d, ca, reference):
    stub = rpc.GRPCInferenceServiceStub(channel(d.port, ca))
    check(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live, "ServerLive over TLS")
    meta = stub.ServerMetadata(pb.ServerMetadataRequest(), metadata=AUTH, timeout=10)
    check(meta.name == "warm", f"ServerMetadata over TLS: {meta}")
    check(refused(lambda: stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10)) ==
          grpc.StatusCode.UNAUTHENTICATED, "no token over TLS is UNAUTHENTICATED")
    check(refused(lambda: stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10,
                                              metadata=[("authorization", "Bearer wrong")])) ==
          grpc.StatusCode.UNAUTHENTICATED, "a wrong token over TLS is UNAUTHENTICATED")
    # The relay hands gRPC a socketpair: the address a failed login counts against is still the
    # client's, not the pair's.
    check(wait_for(lambda: "grpc: failed login from 127.0.0.1: wrong token" in d.log(), 5),
          "a wrong token is logged against 127.0.0.1: " + "\n".join(
              l for l in d.log().splitlines() if "failed login" in l)[-500:])

    for model in ("small", "wide"):
        check(registered(stub, model, AUTH), f"--serve-repo registers {model}")
    small = stub.ModelInfer(infer_request("small", 2, 8), metadata=AUTH, timeout=30)
    check([(o.name, list(o.shape)) for o in small.outputs] == [("output", [2, 4])], f"small outputs {small.outputs}")

    # 1000 rows of 1024 floats each way: 4 MB in, 4 MB out (under the client's 4 MiB receive limit),
    # through the relay's 64 KiB steps; byte for byte the answer a plain front gives to the same
    # request (varied inputs, so that a block moved or lost changes it).
    wide = pb.ModelInferRequest(model_name="wide")
    wide.inputs.add(name="input", datatype="FP32", shape=[1000, 1024])
    wide.raw_input_contents.append(struct.pack("<1024000f", *((i % 977) / 977.0 for i in range(1024000))))
    big = stub.ModelInfer(wide, metadata=AUTH, timeout=60)
    out = big.raw_output_contents[0] if big.raw_output_contents else b""
    check(len(out) == 1000 * 1024 * 4, f"a 4 MB answer over TLS has {len(out)} bytes")
    plain = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{reference.port}"))
    check(registered(plain, "wide"), "--serve-repo registers wide on the plain instance")
    expected = plain.ModelInfer(wide, timeout=60).raw_output_contents[0]
    check(out == expected, "the 4 MB answer over TLS is the plain front's, byte for byte")

    # Many calls at once: over one channel (HTTP/2 streams through one relayed connection) and over
    # channels of their own.
    answers, errors = [], []

    def call(s, i):
        try:
            a = s.ModelInfer(infer_request("small", 1, 8, value=0.01 * i), metadata=AUTH, timeout=60)
            answers.append((i, a.raw_output_contents[0]))
        except grpc.RpcError as e:
            errors.append(f"{e.code()} {e.details()}")

    threads = [threading.Thread(target=call, args=(stub, i)) for i in range(16)]
    threads += [threading.Thread(target=call, args=(rpc.GRPCInferenceServiceStub(channel(d.port, ca)), i))
                for i in range(16, 24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors and len(answers) == 24, f"24 concurrent calls over TLS: {len(answers)} answered, {errors[:3]}")
    by_value = {}
    for i, raw in answers:
        by_value.setdefault(raw, set()).add(i)
    check(len(by_value) == len(answers), "each concurrent call got the answer to its own input")
    return stub


def refusals(d, ca, other_ca):
    # A client that trusts another CA: the handshake fails on its side.
    untrusting = rpc.GRPCInferenceServiceStub(channel(d.port, other_ca))
    check(refused(lambda: untrusting.ServerLive(pb.ServerLiveRequest(), timeout=5)) == grpc.StatusCode.UNAVAILABLE,
          "a client without the server's CA cannot connect")
    # Plain gRPC to the TLS port: refused, and the server serves on.
    plain = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{d.port}"))
    check(refused(lambda: plain.ServerLive(pb.ServerLiveRequest(), timeout=5)) == grpc.StatusCode.UNAVAILABLE,
          "plain gRPC to the TLS port is refused")
    check(wait_for(lambda: "tls: handshake with 127.0.0.1 failed" in d.log(), 5), "the failed handshake is logged")

    # Connections that never handshake are closed at the idle timeout (5 s), and meanwhile a client
    # that does is served at once.
    silent = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(8)]
    started = time.monotonic()
    stub = rpc.GRPCInferenceServiceStub(channel(d.port, ca))
    check(stub.ServerLive(pb.ServerLiveRequest(), timeout=3).live, "a TLS client is served beside silent connections")
    check(all(closed_by_server(c, 10) for c in silent), "connections that never handshake are closed")
    waited = time.monotonic() - started
    check(3 < waited < 9, f"a silent connection was closed after {waited:.1f} s, want about 5")
    for c in silent:
        c.close()

    # Handshakes in progress from one address: 64 at most; the next connection is closed at once.
    held = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(64)]
    time.sleep(0.5)  # the relay takes them in
    extra = socket.create_connection(("127.0.0.1", d.port))
    check(closed_by_server(extra, 2), "a 65th handshake from one address is closed at once")
    check(wait_for(lambda: "64 of its handshakes are in progress" in d.log(), 5), "the refusal is logged")
    for c in held + [extra]:
        c.close()
    check(wait_for(lambda: refused(lambda: stub.ServerLive(pb.ServerLiveRequest(), timeout=3)) is None, 10),
          "served again once the handshakes are gone")


def established(port):
    """Established TCP connections whose local port is `port` (/proc/net/tcp and tcp6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def mutual_tls(tmp, server, ca):
    client_ca = make_ca(tmp, "client-ca")
    alice = make_cert(tmp, "alice", client_ca, cn="alice", sans=())
    stranger = make_cert(tmp, "stranger", make_ca(tmp, "stranger-ca"), cn="mallory", sans=())
    m = Warmd(tmp, "mutual", "--tls-cert", server["cert"], "--tls-key", server["key"],
              "--tls-client-ca", client_ca["cert"])
    try:
        none = rpc.GRPCInferenceServiceStub(channel(m.port, ca))
        check(refused(lambda: none.ServerLive(pb.ServerLiveRequest(), timeout=5)) == grpc.StatusCode.UNAVAILABLE,
              "mutual TLS: a client without a certificate is refused")
        other = rpc.GRPCInferenceServiceStub(channel(m.port, ca, stranger))
        check(refused(lambda: other.ServerLive(pb.ServerLiveRequest(), timeout=5)) == grpc.StatusCode.UNAVAILABLE,
              "mutual TLS: a certificate from another CA is refused")
        good = rpc.GRPCInferenceServiceStub(channel(m.port, ca, alice))
        check(good.ServerLive(pb.ServerLiveRequest(), timeout=10).live, "mutual TLS: the client CA's certificate is served")
        a = good.ModelInfer(infer_request("small", 1, 8), timeout=30)  # no token: the certificate is the proof
        check(len(a.raw_output_contents) == 1, "mutual TLS: an inference without a token")
    finally:
        check(m.stop() == 0, "warmd (mutual TLS) stops cleanly")


def reload(d, tmp, ca, stub, cert_path, key_path):
    check(peer_cn(d.port, ca) == "warm-a", "the first certificate is served")
    renewed = make_cert(tmp, "renewed", ca, cn="warm-b")
    shutil.copyfile(renewed["cert"], cert_path)
    shutil.copyfile(renewed["key"], key_path)
    d.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: peer_cn(d.port, ca) == "warm-b", 10), "after SIGHUP new connections get the new certificate")
    check(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live, "a channel open before SIGHUP serves on")
    with open(key_path, "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    d.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: "the TLS certificates were not reloaded" in d.log(), 10), "a broken key on SIGHUP is logged")
    check(peer_cn(d.port, ca) == "warm-b", "a broken key on SIGHUP keeps the certificate served")


def main():
    global pb, rpc
    tmp = tempfile.mkdtemp(prefix="warm-grpc-tls-")
    stubs = os.path.join(tmp, "stubs")
    os.mkdir(stubs)
    if protoc.main(["protoc", "-I" + os.path.join(root, "schemas"), "--python_out=" + stubs,
                    "--grpc_python_out=" + stubs, "kserve_v2.proto"]) != 0:
        sys.exit("FAIL: grpc_tools.protoc could not compile schemas/kserve_v2.proto")
    sys.path.insert(0, stubs)
    import kserve_v2_pb2
    import kserve_v2_pb2_grpc
    pb, rpc = kserve_v2_pb2, kserve_v2_pb2_grpc

    for model, layers in (("small", "8,16,4"), ("wide", "1024,1024")):
        subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "repo", model, "1"), "--layers", layers],
                       check=True, stdout=subprocess.DEVNULL)
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    ca = make_ca(tmp, "server-ca")
    other_ca = make_ca(tmp, "other-ca")
    server = make_cert(tmp, "server", ca, cn="warm-a")
    cert_path, key_path = os.path.join(tmp, "serving.pem"), os.path.join(tmp, "serving.key")
    shutil.copyfile(server["cert"], cert_path)
    shutil.copyfile(server["key"], key_path)
    os.chmod(key_path, 0o600)

    d = Warmd(tmp, "tls", "--token-file", token_file, "--tls-cert", cert_path, "--tls-key", key_path)
    try:
        reference = Warmd(tmp, "plain")
        try:
            stub = served_over_tls(d, ca, reference)
        finally:
            check(reference.stop() == 0, "warmd (plain) stops cleanly")
        refusals(d, ca, other_ca)
        reload(d, tmp, ca, stub, cert_path, key_path)
        check(established(d.port) >= 1, "the open channel's connection is seen")
        del stub
        import gc
        gc.collect()
        check(wait_for(lambda: established(d.port) == 0, 20), "every relayed connection is closed once its client goes")
        mutual_tls(tmp, server, ca)
        check(d.stop() == 0, "warmd stops cleanly")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    if failures:
        print(d.log()[-4000:])
        print(f"grpc_tls_test: {failures} check(s) failed (left {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("grpc_tls_test: all checks passed")


main()
