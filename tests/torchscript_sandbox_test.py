#!/usr/bin/python3
"""Black-box: TorchScript models are code, and warmd runs it only in a sandbox.

Hostile archives made by PyTorch here (each does what it says when loaded in a plain process):
a model whose forward() returns the bytes of a file outside its repository, one whose forward()
creates a file, one whose __setstate__ creates a file when it is loaded (so at registration,
when warmd describes it), one whose __setstate__ never ends, and a deflated archive that
inflates 1000 to 1. warmd (without --in-process-code) describes TorchScript files in a
short-lived sandboxed helper and runs them in a model runtime that confines itself: the secret
never comes back, no file is written, the endless describe is stopped at --describe-timeout while
other registrations go on, the bomb is refused before anything is inflated, and a good model is
still served through the runtime with PyTorch's answer.

Also warm-runtime --listen: the socket is created 0600, and a regular file at its path is left
alone. Exits 77 (skipped) without PyTorch in /usr/bin/python3.

Usage: torchscript_sandbox_test.py WARMD WARMCTL WARM_RUNTIME
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

warmd, warmctl, warm_runtime = sys.argv[1:4]
failures = 0

GENERATOR = r'''
import os, sys, zipfile, torch
from typing import Tuple
out, secret, target = sys.argv[1:4]

class Reader(torch.nn.Module):
    def __init__(self, path: str, n: int):
        super().__init__()
        self.path = path
        self.n = n
    def forward(self, x):
        return torch.from_file(self.path, shared=False, size=self.n, dtype=torch.uint8).to(torch.float32) + x.sum() * 0

class Writer(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
    def forward(self, x):
        written = torch.from_file(self.path, shared=True, size=16, dtype=torch.uint8).fill_(65)
        return x + written.sum().to(torch.float32) * 0

class LoadWriter(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.k = 0
    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool]:
        return (self.path, self.training)
    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool]):
        self.path = state[0]
        self.training = state[1]
        self.k = int(torch.from_file(self.path, shared=True, size=16, dtype=torch.uint8).fill_(66).sum())
    def forward(self, x):
        return x + self.k * 0

class Spinner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1
    @torch.jit.export
    def __getstate__(self) -> Tuple[int, bool]:
        return (self.k, self.training)
    @torch.jit.export
    def __setstate__(self, state: Tuple[int, bool]):
        i = state[0]
        while i > 0:
            i += 1
        self.k = i
        self.training = state[1]
    def forward(self, x):
        return x

class Looper(torch.nn.Module):
    def forward(self, x):
        i = 1
        while i > 0:
            i += 1
        return x + i

class Good(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    def forward(self, x):
        return x * self.w

def save(name, m):
    d = os.path.join(out, name, "1")
    os.makedirs(d, exist_ok=True)
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    return os.path.join(d, "model.pt")

save("reader", Reader(secret, 16))
save("writer", Writer(target + ".infer"))
save("loadwriter", LoadWriter(target + ".load"))
save("spinner", Spinner())
save("looper", Looper())
good = save("good", Good())
d = os.path.join(out, "bomb", "1")
os.makedirs(d, exist_ok=True)
with zipfile.ZipFile(good) as src, zipfile.ZipFile(os.path.join(d, "model.pt"), "w") as dst:
    for item in src.infolist():
        dst.writestr(item, src.read(item.filename))
    prefix = src.infolist()[0].filename.split("/")[0]
    dst.writestr(prefix + "/extra/padding", b"\0" * (256 << 20), compress_type=zipfile.ZIP_DEFLATED)
'''


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def ctl(sock, *args, timeout=60):
    r = subprocess.run([warmctl, "--connect", "unix:" + sock, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def infer(port, model, values):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [len(values)], "data": values}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=json.dumps(body).encode(),
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024


if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
    print("torchscript_sandbox_test: skipped, no PyTorch in /usr/bin/python3")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    repo, secret, target = os.path.join(tmp, "repo"), os.path.join(tmp, "secret"), os.path.join(tmp, "target")
    with open(secret, "w") as f:
        f.write("secret-bytes-1234567890\n")
    os.chmod(secret, 0o600)
    generator = os.path.join(tmp, "make_models.py")  # TorchScript reads a model's source from its file
    with open(generator, "w") as f:
        f.write(GENERATOR)
    made = subprocess.run(["/usr/bin/python3", generator, repo, secret, target], capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit("FAIL: the models could not be made: " + made.stderr[-2000:])
    check(not os.path.exists(target + ".load"), "saving the load-time writer wrote nothing")

    log = open(os.path.join(tmp, "warmd.log"), "w+")
    sock = os.path.join(tmp, "w.sock")
    proc = subprocess.Popen([warmd, "--repo", repo, "--state", os.path.join(tmp, "state"), "--device", "host:64MiB",
                             "--runtime", f"rt={warm_runtime} --capacity 256MiB --call-cpu-seconds 2", "--listen", "unix:" + sock,
                             "--http", "127.0.0.1:0", "--describe-timeout", "15s", "--failure-expiry", "1s"],
                            stdout=open(log.name, "a"), stderr=subprocess.STDOUT)
    try:
        for _ in range(400):
            log.seek(0)
            if os.path.exists(sock) and "serving HTTP on" in log.read() or proc.poll() is not None:
                break
            time.sleep(0.05)
        log.seek(0)
        port = re.search(r"serving HTTP on 127\.0\.0\.1:(\d+)", log.read())
        if not port:
            log.seek(0)
            sys.exit("FAIL: warmd did not start: " + log.read()[-3000:])
        port = int(port.group(1))

        # A good model: described by the helper, run in the runtime, PyTorch's answer.
        rc, out = ctl(sock, "register", "good", "good")
        check(rc == 0, f"register good: {out}")
        code, body = infer(port, "good", [1.0, 1.0, 1.0, 1.0])
        check(code == 200 and json.loads(body)["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0], f"good: {code} {body}")
        rc, out = ctl(sock, "--json", "status", "good")
        check(rc == 0 and json.loads(out).get("device") == "rt", f"good runs in the runtime, not warmd: {out}")

        # Its forward() reads a file outside the repository: refused by the runtime's sandbox.
        rc, out = ctl(sock, "register", "reader", "reader")
        check(rc == 0, f"register reader: {out}")
        code, body = infer(port, "reader", [0.0])
        check(code != 200 and "secret-bytes" not in body, f"reader got the secret: {code} {body}")
        secret_bytes = ",".join(str(b) for b in b"secret")  # as the model would return them
        check(secret_bytes not in body.replace(" ", "").replace(".0", ""), f"reader's answer holds the secret: {body}")

        # Its forward() creates a file: refused.
        rc, out = ctl(sock, "register", "writer", "writer")
        check(rc == 0, f"register writer: {out}")
        code, body = infer(port, "writer", [0.0])
        check(code != 200, f"writer's inference succeeded: {code} {body}")
        check(not os.path.exists(target + ".infer"), "writer created a file from its forward()")

        # Its __setstate__ creates a file when it is loaded: describing it (at registration)
        # happens in the helper, where it cannot.
        rc, out = ctl(sock, "register", "loadwriter", "loadwriter")
        check(not os.path.exists(target + ".load"), "loadwriter created a file when it was described")
        if rc == 0:
            code, body = infer(port, "loadwriter", [0.0])
            check(code != 200, f"loadwriter loaded and ran: {code} {body}")
        check(not os.path.exists(target + ".load"), "loadwriter created a file when it was loaded")

        # The bomb: refused from its central directory, before anything is inflated.
        before = rss_mib(proc.pid)
        rc, out = ctl(sock, "register", "bomb", "bomb")
        check(rc != 0 and "ratio" in out, f"the bomb was not refused for its ratio: {out}")
        check(rss_mib(proc.pid) - before < 64, "warmd grew on the bomb")

        # A forward() that never ends: past 2 s of CPU (--call-cpu-seconds) the runtime ends itself,
        # naming the model; warmd fails the request, blames the model, and starts the runtime again.
        rc, out = ctl(sock, "register", "looper", "looper")
        check(rc == 0, f"register looper: {out}")
        started = time.monotonic()
        code, body = infer(port, "looper", [0.0])
        took = time.monotonic() - started
        check(code != 200, f"looper's endless forward() answered: {code} {body}")
        check(took < 30, f"looper's request took {took:.1f} s (the runtime's limit is 2 s of CPU)")
        def logged(pattern):  # the lines may reach the log after the answer
            for _ in range(200):
                log.seek(0)
                if re.search(pattern, log.read()):
                    return True
                time.sleep(0.05)
            return False
        check(logged(r"model looper\S* used [0-9.]+ s of CPU in one inference"),
              "the runtime says which model went past its CPU limit")
        check(logged(r"rt: the runtime \(pid \d+\) exited with status 3"), "warmd saw the runtime end with status 3")
        code, body = infer(port, "good", [1.0, 1.0, 1.0, 1.0])
        for _ in range(60):  # the runtime starts again after its back-off
            if code == 200:
                break
            time.sleep(0.5)
            code, body = infer(port, "good", [1.0, 1.0, 1.0, 1.0])
        check(code == 200, f"good answers from the restarted runtime: {code} {body}")

        # A describe that never ends is stopped at the deadline; other registrations go on.
        result = {}
        spinning = threading.Thread(target=lambda: result.setdefault("spin", ctl(sock, "register", "spinner", "spinner")))
        started = time.monotonic()
        spinning.start()
        time.sleep(0.3)
        # (Describes run at once, not in turn: this one is answered while the endless one still
        # runs, however slow a busy machine makes it.)
        rc, out = ctl(sock, "register", "good2", "good")
        took = time.monotonic() - started
        check(rc == 0 and spinning.is_alive(),
              f"a registration behind the endless describe waited for it ({took:.1f} s): {out}")
        spinning.join(60)
        rc, out = result.get("spin", (0, "no answer"))
        took = time.monotonic() - started
        check(rc != 0 and "was not described within 15" in out, f"the endless describe: {out}")
        check(14.5 < took < 45, f"the endless describe was stopped after {took:.1f} s, want about 15")

        check(proc.poll() is None, "warmd is still running")
        code, body = infer(port, "good", [2.0, 2.0, 2.0, 2.0])
        check(code == 200, f"good still answers: {code} {body}")
    finally:
        proc.terminate()
        check(proc.wait(timeout=60) == 0, "warmd exits 0 after SIGTERM")
        log.seek(0)
        text = log.read()
        if failures:
            print(text[-4000:])

    # warm-runtime --listen: its socket is born 0600, and a regular file at its path is kept.
    path = os.path.join(tmp, "rt.sock")
    with open(path, "w") as f:
        f.write("precious")
    r = subprocess.run([warm_runtime, "--listen", "unix:" + path, "--repo", repo], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode != 0 and "not a socket" in r.stderr, f"warm-runtime replaced a regular file: {r.stderr}")
    check(open(path).read() == "precious", "the file at --listen's path is intact")
    os.unlink(path)
    rt = subprocess.Popen([warm_runtime, "--listen", "unix:" + path, "--repo", repo], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if os.path.exists(path):
                break
            time.sleep(0.05)
        check(os.path.exists(path) and stat.S_IMODE(os.lstat(path).st_mode) == 0o600,
              f"the runtime's socket is 0600: {oct(os.lstat(path).st_mode) if os.path.exists(path) else 'absent'}")
    finally:
        rt.terminate()
        rt.wait(timeout=30)

print(f"torchscript_sandbox_test: {'FAILED' if failures else 'ok'} ({failures} failures)")
sys.exit(1 if failures else 0)
