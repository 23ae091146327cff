#!/usr/bin/python3
"""Black-box: large models from S3, registered from their header and loaded as they arrive.

warmd with a remote repository root (s3rver behind a proxy that checks every SigV4 signature),
64 KiB fetch parts and a 2 MiB model:
- registering it reads one 64 KiB range (its header) and keeps nothing in the disk tier;
- its first request loads it while its ranges arrive, and answers exactly as the same file
  loaded from local disk; the tier then holds it, and a later registration and load fetch nothing;
- an object replaced in the middle of that load is never served: the load fails naming the
  replacement, and the next load serves the new object, exactly;
- a range refused (403) in the middle of the load fails it with access denied, keeps nothing,
  and the next load fetches and serves it;
- warmd killed with -9 while a load follows a slow fetch leaves no file that a restarted warmd
  loads, and after the restart the model serves.

Usage: remote_streaming_test.py WARMD WARMCTL
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from object_servers import MissingComponent, ObjectServers  # noqa: E402
from warm_cli import Checks, WarmCtl, eventually, free_port, metric  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
checks, cli = Checks(), WarmCtl(warmctl)
check, ctl, outputs = checks.check, cli.run, cli.outputs
make_model = cli.make_model
PART = 64 << 10


def gets(servers, key):
    """The Range headers of the GETs the S3 proxy took for `key`, in order."""
    return [r[2].get("Range", "") for r in servers.s3.proxy.requests
            if r[0] == "GET" and r[1].split("?")[0].endswith("/" + key)]


class Warmd:
    def __init__(self, tmp, servers):
        self.sock = os.path.join(tmp, "w.sock")
        self.http = free_port()
        self.log_path = os.path.join(tmp, "w.log")
        self.args = [warmd, "--repo", os.path.join(tmp, "local"), "--repo", servers.s3.url("prod"),
                     "--s3-endpoint", servers.s3.endpoint, "--state", os.path.join(tmp, "state"),
                     "--device", "host:64MiB", "--listen", "unix:" + self.sock,
                     "--http", f"127.0.0.1:{self.http}", "--cache-dir", os.path.join(tmp, "tier"),
                     "--fetch-part-bytes", "64KiB", "--fetch-streams", "4"]
        self.env = servers.s3.env()
        self.start()

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.proc = subprocess.Popen(self.args, stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(self.sock) and ctl(self.sock, "models")[0] == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"warmd did not start: {open(self.log_path).read()[-2000:]}")

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        self.proc.wait(30)


def reregister(sock, name, path):
    ctl(sock, "unregister", name)
    # s3rver writes a replaced object in place, not atomically as S3 does: a registration that
    # meets it half-written is told to try again (unavailable), and does.
    for _ in range(3):
        rc, _, err = ctl(sock, "register", name, path)
        if rc == 0 or "try again" not in err:
            break
        time.sleep(0.5)
    check(rc == 0, f"register {name} again: {err}")


def main():
    tmp = tempfile.mkdtemp(prefix="warm-streaming-")
    local = os.path.join(tmp, "local")
    os.makedirs(local)
    try:
        servers = ObjectServers(bucket="models")
    except MissingComponent as e:
        print(f"remote_streaming_test: {e}")
        return 1
    with servers:
        s3 = servers.s3
        layers = "512,512,512,8"
        made = {seed: make_model(os.path.join(tmp, "made", str(seed)), layers, seed) for seed in (1, 2, 3)}
        size = len(made[1])
        parts = (size + PART - 1) // PART
        check(size > 2 * PART * 4 and len(made[3]) == size, f"the sizes this test needs: {size}")
        for name, seed in [("copy-1", 1), ("copy-3", 3)]:
            os.makedirs(os.path.join(local, name, "1"))
            with open(os.path.join(local, name, "1", "model.safetensors"), "wb") as f:
                f.write(made[seed])
        for key, seed in [("prod/wide/1/model.safetensors", 1), ("prod/flip/1/model.safetensors", 2),
                          ("prod/deny/1/model.safetensors", 1), ("prod/slow/1/model.safetensors", 1)]:
            s3.put(key, made[seed])

        d = Warmd(tmp, servers)
        for name in ("copy-1", "copy-3"):
            check(ctl(d.sock, "register", name, name)[0] == 0, f"register {name}")
        want1, want3 = outputs(d.sock, "copy-1"), outputs(d.sock, "copy-3")
        check(isinstance(want1, list) and want1 != want3, f"two models that answer apart: {want1}")

        # Registered from its header: one range, nothing kept.
        wide = "prod/wide/1/model.safetensors"
        rc, _, err = ctl(d.sock, "register", "wide", "wide")
        check(rc == 0, f"register wide: {err}")
        check(gets(servers, wide) == [f"bytes=0-{PART - 1}"],
              f"the registration read the header's range only: {gets(servers, wide)}")
        check(metric(d.http, "warm_tier_files") == 0, "the tier holds nothing after a registration")
        rc, out, _ = ctl(d.sock, "--json", "status", "wide")
        check(rc == 0 and json.loads(out).get("bytes", 0) > size - PART, f"its size from the header: {out}")

        # Its first request loads it as it arrives; the answer is the file's.
        check(outputs(d.sock, "wide") == want1, "wide answers as its local copy")
        check(len(gets(servers, wide)) == 1 + parts, f"the load fetched {parts} parts: {len(gets(servers, wide))}")
        check(eventually(lambda: metric(d.http, "warm_tier_files"), 1) == 1, "the tier holds it after the load")
        check(metric(d.http, "warm_fetches_total", '{outcome="ok"}') == 1, "one fetch")
        reregister(d.sock, "wide", "wide")
        ctl(d.sock, "unregister", "copy-1")  # room is not an issue; just another load of wide
        check(outputs(d.sock, "wide") == want1, "wide answers again from the tier")
        check(len(gets(servers, wide)) == 1 + parts, "nothing fetched for the second registration and load")

        # Replaced in the middle of its load: never served; the next load serves the new object.
        flip = "prod/flip/1/model.safetensors"
        check(ctl(d.sock, "register", "flip", "flip")[0] == 0, "register flip")
        s3.proxy.add_fault("replace", nth=3, method="GET", path_contains="flip/1/model", data=made[3])
        got = outputs(d.sock, "flip")
        check(got != outputs(d.sock, "wide") and (got == want3 or (got[0] == "error" and "replaced" in got[1])),
              f"a model replaced while it loads is not served mixed: {str(got)[:300]}")
        reregister(d.sock, "flip", "flip")
        check(outputs(d.sock, "flip") == want3, "the next load serves the new object")

        # A range refused in the middle: the load fails, nothing is kept, the next one serves.
        deny = "prod/deny/1/model.safetensors"
        check(ctl(d.sock, "register", "deny", "deny")[0] == 0, "register deny")
        files = metric(d.http, "warm_tier_files")
        s3.proxy.add_fault("status", nth=4, status=403, code="AccessDenied", method="GET",
                           path_contains="deny/1/model")
        got = outputs(d.sock, "deny")
        check(got[0] == "error" and "access denied" in got[1], f"a 403 mid-load fails it: {str(got)[:300]}")
        check(metric(d.http, "warm_tier_files") == files, "the tier kept nothing of it")
        incoming = os.path.join(tmp, "tier", "incoming")
        check(eventually(lambda: os.listdir(incoming), []) == [], "no partial file is left")
        reregister(d.sock, "deny", "deny")
        check(outputs(d.sock, "deny") == want1, "the next load fetches and serves it")

        # kill -9 while a load follows a slow fetch.
        check(ctl(d.sock, "register", "slow", "slow")[0] == 0, "register slow")
        s3.proxy.add_fault("slow", nth=2, times=1000, method="GET", path_contains="slow/1/model",
                           chunk=4096, delay=0.05)
        infer = subprocess.Popen([warmctl, "--connect", "unix:" + d.sock, "infer", "slow", "--random"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(os.path.getsize(os.path.join(incoming, n)) > 0
                                                      for n in os.listdir(incoming)):
            time.sleep(0.05)
        check(any(os.listdir(incoming)), "the slow fetch is being written")
        d.stop(signal.SIGKILL)
        infer.wait(30)
        s3.proxy.clear()
        d.start()
        check(not os.listdir(incoming), f"the restarted tier removed the half file: {os.listdir(incoming)}")
        check(outputs(d.sock, "slow") == want1, "slow serves after the restart")
        check(outputs(d.sock, "wide") == want1, "wide serves from the tier after the restart")
        check(not s3.proxy.denied, f"every request warmd signed was verified: {s3.proxy.denied}")
        d.stop()
        print(f"remote_streaming_test: {len(s3.proxy.requests)} S3 requests, model {size} bytes, {parts} parts")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
