"""One warmd for the black-box tests of model runtimes: started on a Unix socket and a loopback
HTTP port with the given --runtime specs, driven through warmctl and HTTP V2, stopped with SIGTERM.

    from warmd_process import Warmd, manifest
    d = Warmd(checks, warmd_path, cli, work, repo, ["py=grpc-exec:build/warm-pyruntime"])
    code, body = d.infer("iris", [{"name": "input", "datatype": "FP64", "shape": [1, 4],
                                   "data": [5.1, 3.5, 1.4, 0.2]}])   # body parsed from JSON
    d.status("iris")                 # warmctl --json status, or {"error": ...}
    d.stop()
"""

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request

from warm_cli import free_port, wait_for


class Warmd:
    def __init__(self, checks, warmd, cli, work, repo, runtimes, extra=(), env=None):
        os.makedirs(work, exist_ok=True)
        self.checks, self.cli = checks, cli
        self.sock = os.path.join(work, "warm.sock")
        self.port = free_port()
        self.log = os.path.join(work, "warmd.log")
        args = [warmd, "--repo", repo, "--listen", "unix:" + self.sock, "--http",
                f"127.0.0.1:{self.port}", "--state", os.path.join(work, "state"), *extra]
        for spec in runtimes:
            args += ["--runtime", spec]
        self.proc = subprocess.Popen(args, stdout=open(self.log, "a"), stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        if not wait_for(lambda: self.ctl("models")[0] == 0, 60):
            print(open(self.log).read())
            raise SystemExit("warmd did not start")

    def ctl(self, *args, timeout=60):
        return self.cli.run(self.sock, *args, timeout=timeout)

    def status(self, model):
        rc, out, err = self.ctl("--json", "status", model)
        return json.loads(out) if rc == 0 else {"error": err}

    def infer(self, model, inputs, timeout=60):
        """POST /v2/models/MODEL/infer: (HTTP status, body parsed from JSON; {} when empty)."""
        body = json.dumps({"inputs": inputs}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v2/models/{model}/infer",
                                     data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.checks.check(False, "warmd stopped within 30 s of SIGTERM")

    def tail(self):
        return open(self.log).read()[-4000:]


def manifest(directory, **fields):
    """Writes DIRECTORY/warm.json with `fields` (type, path, key)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "warm.json"), "w") as f:
        json.dump(fields, f)
