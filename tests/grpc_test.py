#!/usr/bin/python3
"""warmd --grpc from a client that is not warm's code: Python stubs that Debian's grpc_tools
generates from schemas/kserve_v2.proto, over python3-grpcio.

Usage: grpc_test.py WARMD WARMCTL SOURCE_ROOT. Exits 77 (skipped) when python3-grpcio or
python3-grpc-tools is missing. Covers every method, typed and raw inputs (equal answers), the
error codes (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, UNAUTHENTICATED, DEADLINE_EXCEEDED),
versions, the token rule with --allow-remote, the connection limit, idle connections closed, and
a listener that survives running out of file descriptors.
"""
import json
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time

try:
    import grpc
    from grpc_tools import protoc
except ImportError as e:
    print(f"grpc_test: skipped, {e}")
    sys.exit(77)

warmd, warmctl, root = sys.argv[1:4]
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {what}")


def expect_code(call, code, what, contains=""):
    try:
        call()
    except grpc.RpcError as e:
        check(e.code() == code, f"{what}: {e.code()} ({e.details()}), want {code}")
        check(contains in (e.details() or ""), f"{what}: details {e.details()!r} lack {contains!r}")
        return
    check(False, f"{what}: succeeded, want {code}")


def start(tmp, name, *extra, device="host:64MiB", open_files=None):
    log = open(os.path.join(tmp, name + ".log"), "w+")
    sock = os.path.join(tmp, name + ".sock")
    # open_files: soft and hard limit on descriptors, so that warmd cannot raise it.
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))) if open_files else None
    proc = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
                             "--device", device, "--listen", "unix:" + sock, "--grpc", "127.0.0.1:0",
                             "--log-level", "info", *extra], stdout=open(log.name, "a"), stderr=subprocess.STDOUT, preexec_fn=limit)
    for _ in range(200):
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    # The log line may reach the file after the socket appears (warmd's stdout is buffered).
    port, text = None, ""
    for _ in range(200):
        log.seek(0)
        text = log.read()
        port = re.search(r"serving gRPC on 127\.0\.0\.1:(\d+)", text)
        if port or proc.poll() is not None:
            break
        time.sleep(0.05)
    if not port:
        proc.kill()
        sys.exit(f"FAIL: warmd did not serve gRPC: {text}")
    return proc, sock, int(port.group(1))


def stop(proc):
    proc.terminate()
    code = proc.wait(timeout=60)
    check(code == 0, f"warmd exited {code} after SIGTERM (a sanitizer's report exits non-zero)")


def log_of(tmp, name):
    with open(os.path.join(tmp, name + ".log")) as f:
        return f.read()


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def live(stub, seconds):
    try:
        return stub.ServerLive(pb.ServerLiveRequest(), timeout=seconds).live
    except grpc.RpcError as e:
        print(f"ServerLive: {e.code()} {e.details()}")
        return False


def closed_by_server(conn, seconds):
    """True when the server closes `conn` (which sends nothing) within `seconds`."""
    conn.settimeout(seconds)
    try:
        while True:  # the server's HTTP/2 settings and GOAWAY come first, then the end
            if conn.recv(4096) == b"":
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


with tempfile.TemporaryDirectory() as tmp:
    stubs = os.path.join(tmp, "stubs")
    os.mkdir(stubs)
    if protoc.main(["protoc", "-I" + os.path.join(root, "schemas"), "--python_out=" + stubs,
                    "--grpc_python_out=" + stubs, "kserve_v2.proto"]) != 0:
        sys.exit("FAIL: grpc_tools.protoc could not compile schemas/kserve_v2.proto")
    sys.path.insert(0, stubs)
    import kserve_v2_pb2 as pb
    import kserve_v2_pb2_grpc as rpc

    for model, layers in (("small", "8,16,4"), ("big", "4096,4096")):
        subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "repo", model, "1"), "--layers", layers],
                       check=True, stdout=subprocess.DEVNULL)

    proc, sock, port = start(tmp, "plain", "--max-request-bytes", "1MiB")
    try:
        subprocess.run([warmctl, "--connect", "unix:" + sock, "register", "small", "small"], check=True,
                       stdout=subprocess.DEVNULL)
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))

        check(stub.ServerLive(pb.ServerLiveRequest()).live, "ServerLive")
        check(stub.ServerReady(pb.ServerReadyRequest()).ready, "ServerReady")
        meta = stub.ServerMetadata(pb.ServerMetadataRequest())
        check(meta.name == "warm" and "model_repository" in meta.extensions, f"ServerMetadata: {meta}")

        m = stub.ModelMetadata(pb.ModelMetadataRequest(name="small"))
        check(list(m.versions) == ["1"], f"ModelMetadata versions: {m.versions}")
        check([(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [("input", "FP32", [-1, 8])], f"inputs: {m.inputs}")
        check([(t.name, list(t.shape)) for t in m.outputs] == [("output", [-1, 4])], f"outputs: {m.outputs}")
        expect_code(lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="small", version="2")),
                    grpc.StatusCode.NOT_FOUND, "ModelMetadata of an absent version", "has no version 2")
        expect_code(lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="nope")),
                    grpc.StatusCode.NOT_FOUND, "ModelMetadata of an unknown model")

        check(not stub.ModelReady(pb.ModelReadyRequest(name="small")).ready, "ModelReady before a load")
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="small"))
        check(stub.ModelReady(pb.ModelReadyRequest(name="small", version="1")).ready, "ModelReady after a load")
        expect_code(lambda: stub.ModelReady(pb.ModelReadyRequest(name="small", version="01")),
                    grpc.StatusCode.NOT_FOUND, "ModelReady of version 01")

        rows = [[0.1 * (r + 1) * (c - 3) for c in range(8)] for r in range(2)]
        flat = [v for row in rows for v in row]
        typed = pb.ModelInferRequest(model_name="small", id="req-1")
        t = typed.inputs.add(name="input", datatype="FP32", shape=[2, 8])
        t.contents.fp32_contents.extend(flat)
        a = stub.ModelInfer(typed)
        check(a.id == "req-1" and a.model_name == "small", f"ModelInfer echo: {a.id} {a.model_name}")
        check([(o.name, o.datatype, list(o.shape)) for o in a.outputs] == [("output", "FP32", [2, 4])], f"outputs {a.outputs}")
        typed_out = struct.unpack("<8f", a.raw_output_contents[0])

        raw = pb.ModelInferRequest(model_name="small", model_version="1")
        raw.inputs.add(name="input", datatype="FP32", shape=[2, 8])
        raw.raw_input_contents.append(struct.pack("<16f", *flat))
        b = stub.ModelInfer(raw)
        check(struct.unpack("<8f", b.raw_output_contents[0]) == typed_out, "raw and typed inputs give one answer")
        check(b.model_version == "1", f"the version asked for answers it: {b.model_version!r}")
        check(b.parameters["warm_cache_hit"].bool_param, "a loaded model's answer is a hit")

        def infer(**fields):
            def call():
                r = pb.ModelInferRequest(model_name=fields.get("model", "small"), model_version=fields.get("version", ""))
                i = r.inputs.add(name=fields.get("name", "input"), datatype=fields.get("datatype", "FP32"),
                                 shape=fields.get("shape", [1, 8]))
                if "raw" in fields:
                    r.raw_input_contents.append(fields["raw"])
                else:
                    i.contents.fp32_contents.extend(fields.get("data", [0.0] * 8))
                for name in fields.get("outputs", []):
                    r.outputs.add(name=name)
                return stub.ModelInfer(r)
            return call

        invalid = grpc.StatusCode.INVALID_ARGUMENT
        expect_code(infer(datatype="INT32"), invalid, "INT32 input in fp32_contents", "goes in int_contents")
        expect_code(infer(datatype="INT32", raw=b"\0" * 32), invalid, "INT32 input to an FP32 model", "must be F32 (FP32), not I32 (INT32)")
        expect_code(infer(datatype="BYTES"), invalid, "BYTES input", "not supported")
        expect_code(infer(data=[0.0] * 7), invalid, "7 elements for [1, 8]", "fp32_contents holds 7")
        expect_code(infer(shape=[1, 7], data=[0.0] * 7), invalid, "a width of 7")
        expect_code(infer(shape=[1, -8]), invalid, "a negative dimension", "non-negative")
        expect_code(infer(raw=b"\0" * 12), invalid, "12 raw bytes for [1, 8]", "needs 32")
        expect_code(infer(outputs=["logits"]), invalid, "an unknown requested output", "'logits'")
        expect_code(infer(model="nope"), grpc.StatusCode.NOT_FOUND, "an unknown model")
        expect_code(infer(version="3"), grpc.StatusCode.NOT_FOUND, "an absent version", "has no version 3")
        expect_code(infer(shape=[40000, 8], raw=b"\0" * (40000 * 32)), grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "a message over --max-request-bytes")
        check(stub.ServerLive(pb.ServerLiveRequest()).live, "still live after the refusals")

        index = stub.RepositoryIndex(pb.RepositoryIndexRequest())
        check([(e.name, e.state) for e in index.models] == [("small", "READY")], f"RepositoryIndex: {index}")
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="small"))
        for _ in range(100):
            if not stub.ModelReady(pb.ModelReadyRequest(name="small")).ready:
                break
            time.sleep(0.05)
        check(not stub.ModelReady(pb.ModelReadyRequest(name="small")).ready, "ModelReady after an unload")
        check(len(stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models) == 0, "index ready=true")
        expect_code(lambda: stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="nope")),
                    grpc.StatusCode.NOT_FOUND, "loading an unknown model")
        # A cold start answered through gRPC: the model loads on demand.
        c = stub.ModelInfer(typed)
        check(not c.parameters["warm_cache_hit"].bool_param, "a cold answer is a miss")
        check(c.raw_output_contents[0] == a.raw_output_contents[0], "the cold answer equals the warm one")
    finally:
        stop(proc)

    # A served model with versions 1 and 2 (latest:2) and a label: metadata lists both, an unknown
    # version's error names both, and each answer's model_version is the version that served it.
    for version in (1, 2):
        subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "served", "v", str(version)), "--layers",
                        "8,4"], check=True, stdout=subprocess.DEVNULL)
    config = os.path.join(tmp, "models.toml")
    with open(config, "w") as f:
        f.write('[[model]]\nname = "v"\nversions = "latest:2"\nlabels = { stable = 1 }\n')
    proc, sock, port = start(tmp, "versions", "--repo", os.path.join(tmp, "served"), "--model-config", config,
                             "--version-settle", "0s")
    try:
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))

        def served_versions():
            r = subprocess.run([warmctl, "--connect", "unix:" + sock, "--json", "versions", "v"], capture_output=True,
                               text=True)
            doc = json.loads(r.stdout) if r.returncode == 0 else {}
            return [(x["version"], x["state"]) for x in doc.get("versions", [])], doc.get("labels")

        check(wait_for(lambda: served_versions() == ([(1, "READY"), (2, "READY")], {"stable": 1}), 20),
              f"v serves versions 1 and 2: {served_versions()}")
        for version in ("", "1", "2", "stable"):
            m = stub.ModelMetadata(pb.ModelMetadataRequest(name="v", version=version))
            check(list(m.versions) == ["1", "2"], f"ModelMetadata of v version {version!r}: {m.versions}")
        expect_code(lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="v", version="3")),
                    grpc.StatusCode.NOT_FOUND, "ModelMetadata of v version 3",
                    "has no version 3; it serves versions 1 and 2")
        for version, served in (("", "2"), ("2", "2"), ("1", "1"), ("stable", "1")):
            r = pb.ModelInferRequest(model_name="v", model_version=version)
            r.inputs.add(name="input", datatype="FP32", shape=[1, 8]).contents.fp32_contents.extend([0.5] * 8)
            a = stub.ModelInfer(r)
            check(a.model_name == "v@" + served and a.model_version == served,
                  f"ModelInfer v version {version!r}: {a.model_name} {a.model_version!r}, want v@{served} {served!r}")
    finally:
        stop(proc)

    # The server's own limit: a cold load of 64 MiB takes longer than --request-timeout 1ms, and
    # the call gets DEADLINE_EXCEEDED from warmd (the client sets no deadline of its own).
    proc, sock, port = start(tmp, "slow", "--request-timeout", "1ms", device="host:256MiB")
    try:
        subprocess.run([warmctl, "--connect", "unix:" + sock, "register", "big", "big"], check=True,
                       stdout=subprocess.DEVNULL)
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        r = pb.ModelInferRequest(model_name="big")
        r.inputs.add(name="input", datatype="FP32", shape=[1, 4096]).contents.fp32_contents.extend([0.5] * 4096)
        expect_code(lambda: stub.ModelInfer(r), grpc.StatusCode.DEADLINE_EXCEEDED, "a cold load past --request-timeout",
                    "no answer within 1 ms")
    finally:
        stop(proc)

    # With --allow-remote every method but ServerLive and ServerReady needs the token.
    token = "0123456789abcdef-grpc-test-token"
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    proc, sock, port = start(tmp, "remote", "--allow-remote", "--token-file", token_file)
    try:
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        check(stub.ServerLive(pb.ServerLiveRequest()).live, "ServerLive needs no token")
        expect_code(lambda: stub.ServerMetadata(pb.ServerMetadataRequest()), grpc.StatusCode.UNAUTHENTICATED,
                    "no token", "authorization")
        expect_code(lambda: stub.ServerMetadata(pb.ServerMetadataRequest(), metadata=[("authorization", "Bearer wrong")]),
                    grpc.StatusCode.UNAUTHENTICATED, "a wrong token")
        meta = stub.ServerMetadata(pb.ServerMetadataRequest(), metadata=[("authorization", "Bearer " + token)])
        check(meta.name == "warm", "the right token is served")
        # Wrong tokens count against the client's address, not the connection's descriptor.
        check(wait_for(lambda: "grpc: failed login from 127.0.0.1: wrong token" in log_of(tmp, "remote"), 5),
              "the failed login names the client's address: " + log_of(tmp, "remote")[-1500:])
    finally:
        stop(proc)

    # A token given without --allow-remote guards the loopback port too; nothing is parsed before
    # the token is checked, and what a request costs to parse is bounded. A 60 MiB ModelInfer of
    # empty inputs (2 bytes each on the wire, a message object each once parsed) took warmd from
    # 0.3 to 7 GB when it was parsed before the token was looked at.
    proc, sock, port = start(tmp, "hostile", "--token-file", token_file)
    try:
        auth = [("authorization", "Bearer " + token)]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        raw_call = lambda method: channel.unary_unary("/inference.GRPCInferenceService/" + method)  # bytes in, out
        stub = rpc.GRPCInferenceServiceStub(channel)
        expect_code(lambda: stub.ServerMetadata(pb.ServerMetadataRequest()), grpc.StatusCode.UNAUTHENTICATED,
                    "a loopback call without the token", "authorization")
        check(stub.ServerMetadata(pb.ServerMetadataRequest(), metadata=auth).name == "warm", "the token on loopback")

        def peak_growth(call):
            """What the call adds to warmd's peak resident memory, in MiB."""
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")  # the peak (VmHWM) starts again from what is resident now
            def read(field):
                with open(f"/proc/{proc.pid}/status") as f:
                    return next(int(l.split()[1]) for l in f if l.startswith(field + ":")) / 1024
            before = read("VmRSS")
            call()
            return read("VmHWM") - before

        bomb = pb.ModelInferRequest(model_name="small").SerializeToString() + b"\x2a\x00" * (30 << 20)
        grew = peak_growth(lambda: expect_code(lambda: raw_call("ModelInfer")(bomb), grpc.StatusCode.UNAUTHENTICATED,
                                               "60 MiB of empty inputs without the token", "authorization"))
        check(grew < 48, f"an unauthenticated request is not read: warmd grew by {grew:.0f} MiB")
        grew = peak_growth(lambda: expect_code(lambda: raw_call("ModelInfer")(bomb, metadata=auth),
                                               grpc.StatusCode.INVALID_ARGUMENT, "60 MiB of empty inputs with the token",
                                               "field 'inputs' has more than 256 entries"))
        check(grew < 200, f"a request over the bounds is not parsed: warmd grew by {grew:.0f} MiB")
        many = pb.ModelInferRequest(model_name="small")
        for i in range(257):
            many.inputs.add(name=f"in{i}", datatype="FP32", shape=[1])
        expect_code(lambda: stub.ModelInfer(many, metadata=auth), grpc.StatusCode.INVALID_ARGUMENT,
                    "257 inputs", "more than 256 entries")
        # Methods that carry no tensor take 64 KiB; ServerLive reads nothing at all.
        padded = pb.ServerMetadataRequest().SerializeToString() + b"\xf8\x01\x01" * 30000  # unknown fields, 90 kB
        expect_code(lambda: raw_call("ServerMetadata")(padded, metadata=auth), grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "a 90 kB ServerMetadata request", "at most 65536")
        check(raw_call("ServerLive")(bomb) == pb.ServerLiveResponse(live=True).SerializeToString(),
              "ServerLive answers a 60 MiB request without reading it")
        expect_code(lambda: raw_call("Nope")(b""), grpc.StatusCode.UNIMPLEMENTED, "an unknown method")
        check(stub.ServerLive(pb.ServerLiveRequest()).live, "live after the hostile requests")
    finally:
        stop(proc)
    check("gRPC on 127.0.0.1:0 has no token" in log_of(tmp, "plain"), "a front without a token is warned about")

    # Connections: at most --max-connections open (one more is closed at once), and one that
    # makes no call is closed after the idle timeout (5 s), so a client that never presents a
    # token cannot hold one.
    proc, sock, port = start(tmp, "bounded", "--max-connections", "4")
    try:
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", port))
        check(closed_by_server(extra, 2), "a connection past --max-connections is closed at once")
        check("closing a connection from 127.0.0.1: 4 connections are open" in log_of(tmp, "bounded"),
              "the refused connection is logged")
        started = time.monotonic()
        check(all(closed_by_server(c, 10) for c in held), "idle connections are closed")
        idle = time.monotonic() - started
        check(3 < idle < 9, f"idle connections closed after {idle:.1f} s, want about 5")
        for c in [extra] + held:
            c.close()
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        check(live(stub, 10), "a new client is served once the idle ones are gone")
    finally:
        stop(proc)

    # Out of file descriptors the listener pauses and accepts again; it never stops for good.
    proc, sock, port = start(tmp, "fds", open_files=128)
    try:
        held = []
        for _ in range(150):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break  # the backlog is full too
        check(wait_for(lambda: "grpc: accept failed (Too many open files)" in log_of(tmp, "fds"), 20),
              "warmd ran out of descriptors: " + log_of(tmp, "fds")[-2000:])
        for c in held:
            c.close()
        stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        check(live(stub, 30), "a new client is served after the descriptors came back")
        check("grpc: accepting connections again" in log_of(tmp, "fds"), "the recovery is logged")
    finally:
        stop(proc)

print(f"grpc_test: {'FAILED' if failures else 'ok'} ({failures} failures)")
sys.exit(1 if failures else 0)
