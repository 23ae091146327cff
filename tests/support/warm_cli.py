"""What the black-box tests of warmd share: failed checks counted, warmctl run against a socket,
models made and their answers read, /metrics read, free loopback ports, waiting for a condition.

    from warm_cli import Checks, WarmCtl, free_port, metric, wait_for, eventually
    checks = Checks()
    checks.check(ok, "what should hold")        # prints FAIL: ... and counts it when not ok
    cli = WarmCtl(warmctl_path)
    rc, out, err = cli.run(sock, "register", "m", "m")
    data = cli.make_model(directory, "16,8,4", seed)   # the file's bytes
    cli.outputs(sock, "m")                      # the outputs of one seeded random request,
                                                # or ("error", message)
    return 1 if checks.failures else 0
"""

import json
import os
import re
import socket
import subprocess
import time
import urllib.request


class Checks:
    """Counts the checks that did not hold; each one is printed as it fails."""

    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        if not ok:
            self.failures += 1
            print("FAIL:", what, flush=True)


class WarmCtl:
    """warmctl, run against a warmd's Unix socket."""

    def __init__(self, path):
        self.path = path

    def run(self, sock, *args, timeout=60):
        r = subprocess.run([self.path, "--connect", "unix:" + sock, *args], capture_output=True,
                           text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def make_model(self, out, layers, seed):
        """A dense model in `out`/model.safetensors (warmctl make-model); its bytes."""
        subprocess.run([self.path, "make-model", "--out", out, "--layers", layers, "--seed", str(seed)],
                       check=True, capture_output=True)
        with open(os.path.join(out, "model.safetensors"), "rb") as f:
            return f.read()

    def outputs(self, sock, model, seed=7):
        rc, out, err = self.run(sock, "--json", "infer", model, "--random", "--seed", str(seed))
        return json.loads(out)["outputs"] if rc == 0 else ("error", err.strip())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port, name, labels=""):
    """A sample of warmd's /metrics on 127.0.0.1:`port` (None when absent)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = re.search("^" + re.escape(name + labels) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_for(predicate, seconds):
    """Whether predicate() became true within `seconds` (polled every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def eventually(f, want, seconds=10):
    """f()'s value once it equals `want`, or its last value after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        got = f()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)
