#!/usr/bin/python3
"""Black-box: models from S3 and HTTP through the real warmd and warmctl.

warmd with a remote repository root (s3rver behind a proxy that checks every SigV4 signature) and
a disk tier: a model registered by name resolves to its highest version in S3 and answers exactly
as the same file loaded from local disk; one named by URL (S3 or nginx) does too; a registration
fetches the file once, and loads after it read the tier's copy; a transient 503 is retried; a
missing object is not_found; a wrong secret is refused with an error that shows no key; a tier
too small for both models evicts one, which is fetched again at its next load; warmd killed with
-9 in the middle of a fetch leaves nothing the restarted warmd loads, and after the restart the
tier's files serve without fetching again. /metrics counts the tier's hits, misses and fetches.

Usage: remote_sources_test.py WARMD WARMCTL
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
from warm_cli import Checks, WarmCtl, free_port, metric  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
checks, cli = Checks(), WarmCtl(warmctl)
check, ctl, outputs = checks.check, cli.run, cli.outputs
make_model = cli.make_model


def gets_of(servers, key):
    """Ranged GETs the S3 proxy took for `key` (each fetch of a small file is one)."""
    return sum(1 for r in servers.s3.proxy.requests if r[0] == "GET" and r[1].split("?")[0].endswith("/" + key))


class Warmd:
    def __init__(self, tmp, name, servers, *extra, env=None):
        self.sock = os.path.join(tmp, name + ".sock")
        self.http = free_port()
        self.log_path = os.path.join(tmp, name + ".log")
        self.args = [warmd, "--repo", os.path.join(tmp, "local"), "--repo", servers.s3.url("prod"),
                     "--s3-endpoint", servers.s3.endpoint, "--state", os.path.join(tmp, name + "-state"),
                     "--device", "host:64MiB", "--listen", "unix:" + self.sock,
                     "--http", f"127.0.0.1:{self.http}", *extra]
        self.env = env or servers.s3.env()
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

    def log(self):
        with open(self.log_path) as f:
            return f.read()


def status_json(sock, model):
    rc, out, err = ctl(sock, "--json", "status", model)
    return json.loads(out) if rc == 0 else {"error": err.strip()}


def tier_json(sock):
    rc, out, err = ctl(sock, "--json", "inspect", "tier")
    return json.loads(out)["tier"] if rc == 0 else {"error": err.strip()}


def check_tier_reports(tmp, servers):
    """warmctl status and inspect say where a remote model's bytes are and what the tier did.

    A model over 64 KiB registers from its header alone: its status says it is at the source only.
    Its first load fetches it: its status then says the tier holds it, with the file's bytes, and
    inspect tier lists that file with its model and counts one miss and one fetch of those bytes.
    A second registration of the same file and its load are hits. A model from local disk shows
    nothing tier-related."""
    s3 = servers.s3
    wide = make_model(os.path.join(tmp, "made", "prod/wide/1"), "256,256,4", 5)
    check(len(wide) > 64 * 1024, "the wide model is over the header's first look")
    s3.put("prod/wide/1/model.safetensors", wide)
    tier_dir = os.path.join(tmp, "tier-c")
    capacity = 8 << 20
    d = Warmd(tmp, "c", servers, "--cache-dir", tier_dir, "--cache-bytes", str(capacity))
    try:
        check(ctl(d.sock, "register", "copy-m1", "copy-m1")[0] == 0, "register a local model")
        check(ctl(d.sock, "ensure", "copy-m1")[0] == 0, "load the local model")
        local = status_json(d.sock, "copy-m1")
        check("source" not in local and "tier" not in local, f"a local model shows no tier: {local}")
        rc, out, _ = ctl(d.sock, "status", "copy-m1")
        check(rc == 0 and "disk tier" not in out and "source:" not in out, f"local status text: {out}")
        t = tier_json(d.sock)
        check(t.get("open") is True and t.get("files") == 0 and t.get("capacity") == capacity
              and t.get("used") == 0 and t.get("held") == [], f"an empty tier: {t}")

        rc, _, err = ctl(d.sock, "register", "wide", "wide")
        check(rc == 0, f"register wide: {err}")
        url = s3.url("prod/wide/1/model.safetensors")
        st = status_json(d.sock, "wide")
        check(st.get("source") == url and st.get("tier") == {"held": False, "bytes": 0},
              f"wide after its registration is at the source only: {st}")
        rc, out, _ = ctl(d.sock, "status", "wide")
        check(rc == 0 and url in out and "not held (at the source only)" in out, f"wide's status text: {out}")
        t = tier_json(d.sock)
        check(t.get("files") == 0 and t.get("fetches", {}).get("ok") == 0, f"nothing fetched at registration: {t}")

        check(ctl(d.sock, "ensure", "wide")[0] == 0, "load wide")
        # The fetch's file is committed by the tier just after the load that followed it ends.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not status_json(d.sock, "wide").get("tier", {}).get("held"):
            time.sleep(0.05)
        st = status_json(d.sock, "wide")
        check(st.get("state") == "LOADED" and st.get("tier") == {"held": True, "bytes": len(wide)},
              f"wide is loaded and held by the tier with its file's bytes: {st}")
        rc, out, _ = ctl(d.sock, "status", "wide")
        check(rc == 0 and "held, " in out and f"({len(wide)} bytes)" in out, f"wide's status text once held: {out}")
        t = tier_json(d.sock)
        check(t.get("files") == 1 and t.get("used") == len(wide) and t.get("reserved") == 0
              and t.get("misses") == 1 and t.get("fetches") == {"ok": 1, "failed": 0}
              and t.get("fetch_bytes") == len(wide) and t.get("fetch_seconds", 0) > 0
              and t.get("evictions") == 0, f"the tier's totals after one fetch: {t}")
        check(t.get("held") == [{"source": url, "bytes": len(wide), "models": ["wide"]}],
              f"the tier lists wide's file: {t.get('held')}")

        # The same file again: described and loaded from the tier (hits), never fetched again.
        hits_before = t.get("hits", 0)
        check(ctl(d.sock, "register", "wide2", "wide")[0] == 0, "register wide's file again")
        check(ctl(d.sock, "ensure", "wide2")[0] == 0, "load wide2")
        t = tier_json(d.sock)
        check(t.get("hits", 0) >= hits_before + 2 and t.get("misses") == 1
              and t.get("fetches", {}).get("ok") == 1, f"wide2's registration and load are hits: {t}")
        check(t.get("hits") == metric(d.http, "warm_tier_requests_total", '{outcome="hit"}'),
              f"inspect's hits are /metrics' hits: {t.get('hits')}")
        check(t.get("held", [{}])[0].get("models") == ["wide", "wide2"], f"both models of the file: {t.get('held')}")
        st = status_json(d.sock, "wide2")
        check(st.get("tier") == {"held": True, "bytes": len(wide)}, f"wide2 is held too: {st}")

        rc, out, _ = ctl(d.sock, "inspect", "tier")
        check(rc == 0 and f"disk tier {tier_dir}" in out and "misses 1" in out and "fetches 1 ok, 0 failed" in out
              and url in out and "wide,wide2" in out, f"inspect tier's text: {out}")
        rc, out, _ = ctl(d.sock, "inspect")
        check(rc == 0 and f"disk tier {tier_dir}" in out, f"inspect's summary shows the tier: {out[-600:]}")
        rc, out, _ = ctl(d.sock, "--json", "inspect", "models")
        models = {m["id"]: m for m in json.loads(out)["models"]} if rc == 0 else {}
        check(models.get("wide", {}).get("tier") == {"held": True, "bytes": len(wide)}
              and "copy-m1" in models and "tier" not in models["copy-m1"]
              and "source" not in models["copy-m1"], f"inspect models: {sorted(models)}")
    finally:
        d.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="warm-remote-")
    os.makedirs(os.path.join(tmp, "local"))
    try:
        servers = ObjectServers(bucket="models")
    except MissingComponent as e:
        print(f"remote_sources_test: {e}")
        return 1
    with servers:
        s3 = servers.s3
        files = {}
        for key, layers, seed in [("prod/m1/1/model.safetensors", "16,8,4", 1),
                                  ("prod/m1/2/model.safetensors", "16,8,4", 2),
                                  ("prod/m2/1/model.safetensors", "16,32,4", 3),
                                  ("other/big/1/model.safetensors", "64,64,4", 4)]:
            files[key] = make_model(os.path.join(tmp, "made", key.rsplit("/", 1)[0]), layers, seed)
            s3.put(key, files[key])
        servers.http.write("h1/3/model.safetensors", files["prod/m2/1/model.safetensors"])
        # The same files on local disk, to compare answers with.
        local = os.path.join(tmp, "local")
        for name, key in [("copy-m1", "prod/m1/2/model.safetensors"), ("copy-m2", "prod/m2/1/model.safetensors")]:
            os.makedirs(os.path.join(local, name, "1"))
            with open(os.path.join(local, name, "1", "model.safetensors"), "wb") as f:
                f.write(files[key])

        m1_bytes = len(files["prod/m1/2/model.safetensors"])
        m2_bytes = len(files["prod/m2/1/model.safetensors"])
        big_bytes = len(files["other/big/1/model.safetensors"])
        # Room in the tier for every small model, or for the big one and one more, not for all.
        budget = big_bytes + m2_bytes + 100
        check(4 * m2_bytes + big_bytes > budget and m1_bytes <= m2_bytes, "the sizes this test needs")
        d = Warmd(tmp, "a", servers, "--cache-dir", os.path.join(tmp, "tier"), "--cache-bytes", str(budget),
                  "--policy", "lru")

        # By name under the remote root: its highest version, fetched once, answering as on disk.
        rc, _, err = ctl(d.sock, "register", "m1", "m1")
        check(rc == 0, f"register m1 from s3: {err}")
        rc, out, _ = ctl(d.sock, "--json", "status", "m1")
        check(rc == 0 and json.loads(out).get("version") == 2, f"m1 is version 2 of s3: {out}")
        check(ctl(d.sock, "register", "copy-m1", "copy-m1")[0] == 0, "register the local copy of m1")
        for _ in range(3):
            check(outputs(d.sock, "m1") == outputs(d.sock, "copy-m1"), "m1 from s3 answers as its local copy")
            check(ctl(d.sock, "unregister", "m1")[0] == 0, "unregister m1")
            check(ctl(d.sock, "register", "m1", "m1")[0] == 0, "register m1 again")
        check(gets_of(servers, "prod/m1/2/model.safetensors") == 1,
              f"m1's file was fetched once for 4 registrations and 3 loads, not "
              f"{gets_of(servers, 'prod/m1/2/model.safetensors')} times")
        check(not s3.proxy.denied, f"every request warmd signed was verified: {s3.proxy.denied}")

        # By URL: an S3 version directory and a file on nginx.
        rc, _, err = ctl(d.sock, "register", "m2", s3.url("prod/m2/1"))
        check(rc == 0, f"register m2 by s3 URL: {err}")
        rc, _, err = ctl(d.sock, "register", "h1", servers.http.url("h1/3"))
        check(rc == 0, f"register h1 from nginx: {err}")
        check(ctl(d.sock, "register", "copy-m2", "copy-m2")[0] == 0, "register the local copy of m2")
        expected = outputs(d.sock, "copy-m2")
        check(outputs(d.sock, "m2") == expected, "m2 from s3 answers as its local copy")
        check(outputs(d.sock, "h1") == expected, "h1 from nginx answers as the same file on disk")
        rc, out, _ = ctl(d.sock, "--json", "status", "h1")
        check(rc == 0 and json.loads(out).get("version") == 3, f"h1's version from its URL: {out}")

        # A 503 once is retried; a missing object is not_found; an HTTP directory needs a version.
        s3.put("prod/m3/1/model.safetensors", files["prod/m1/1/model.safetensors"])
        s3.proxy.add_fault("status", status=503, code="SlowDown", method="GET", path_contains="m3/1/model")
        rc, _, err = ctl(d.sock, "register", "m3", "m3")
        check(rc == 0, f"a 503 on m3's fetch is retried: {err}")
        rc, _, err = ctl(d.sock, "register", "nothing", s3.url("prod/nothing/1/model.safetensors"))
        check(rc != 0 and "not_found" in err and "nothing/1/model.safetensors" in err, f"a missing object: {err}")
        rc, _, err = ctl(d.sock, "register", "nodir", servers.http.url("h1"))
        check(rc != 0 and "cannot be listed" in err, f"an HTTP model directory without a version: {err}")
        rc, _, err = ctl(d.sock, "register", "cred", "https://user:pw@127.0.0.1/x/model.safetensors")
        check(rc != 0 and "user information" in err and "pw@" not in err, f"credentials in a URL: {err}")

        # The tier's budget: the big model does not fit beside the others; m1, least recently
        # used (--policy lru), goes, and is fetched again when it is loaded next.
        rc, _, err = ctl(d.sock, "register", "big", s3.url("other/big/1"))
        check(rc == 0, f"register big: {err}")
        evictions = metric(d.http, "warm_tier_evictions_total")
        check(evictions is not None and evictions >= 1, f"the tier evicted to make room: {evictions}")
        before = gets_of(servers, "prod/m1/2/model.safetensors")
        check(outputs(d.sock, "m1") == outputs(d.sock, "copy-m1"), "m1 answers after its copy was evicted")
        check(gets_of(servers, "prod/m1/2/model.safetensors") == before + 1, "m1 was fetched again")
        check((metric(d.http, "warm_fetches_total", '{outcome="ok"}') or 0) >= 5, "fetches counted")
        check((metric(d.http, "warm_tier_requests_total", '{outcome="hit"}') or 0) >= 3, "tier hits counted")
        check((metric(d.http, "warm_tier_capacity_bytes") or 0) == budget, "the tier's budget")

        # kill -9 in the middle of a fetch: nothing half-written is kept or loaded. First every
        # fetch so far has ended, committed or failed (a load that followed its fetch answers
        # before the tier has synced and recorded the file).
        def fetches_pending():
            started = metric(d.http, "warm_tier_requests_total", '{outcome="miss"}') or 0
            ended = sum(metric(d.http, "warm_fetches_total", '{outcome="%s"}' % o) or 0 for o in ("ok", "failed"))
            return started - ended
        deadline = time.monotonic() + 20
        while fetches_pending() > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        check(fetches_pending() == 0, "every fetch so far has ended")
        incoming = os.path.join(tmp, "tier", "incoming")
        s3.put("prod/slow/1/model.safetensors", files["other/big/1/model.safetensors"])
        s3.proxy.add_fault("slow", method="GET", path_contains="slow/1/model", chunk=1024, delay=0.2)
        slow = subprocess.Popen([warmctl, "--connect", "unix:" + d.sock, "register", "slow", "slow"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(os.path.getsize(os.path.join(incoming, n)) > 0
                                                      for n in os.listdir(incoming)):
            time.sleep(0.05)
        check(any(os.listdir(incoming)), "a fetch is being written to incoming/")
        d.stop(signal.SIGKILL)
        slow.wait(30)
        fetched_before = gets_of(servers, "prod/m1/2/model.safetensors")
        # Restarted with room for every model: the registrations it resolves at start evict
        # nothing, so what the tier kept is what serves.
        d.args[d.args.index("--cache-bytes") + 1] = str(4 * budget)
        d.start()
        check(not os.listdir(incoming), f"the restarted tier removed the half file: {os.listdir(incoming)}")
        check(outputs(d.sock, "m1") == outputs(d.sock, "copy-m1"), "m1 serves after the restart")
        check(gets_of(servers, "prod/m1/2/model.safetensors") == fetched_before,
              "m1 loaded from the tier after the restart, without fetching")
        rc, _, err = ctl(d.sock, "register", "slow", "slow")
        check(rc == 0, f"the model whose fetch was killed registers after the restart: {err}")
        d.stop()

        # A wrong secret: refused, and no key in the error or the log.
        bad = Warmd(tmp, "b", servers, env=s3.env(secret="not-the-secret"))
        rc, _, err = ctl(bad.sock, "register", "m1", "m1")
        check(rc != 0 and "access denied" in err and "SignatureDoesNotMatch" in err,
              f"a wrong secret is refused: {err}")
        bad.stop()
        for text in (err, bad.log()):
            check("not-the-secret" not in text and s3.access_key not in text, "no credential is shown")

        check_tier_reports(tmp, servers)
        print(f"remote_sources_test: {len(s3.proxy.requests)} S3 requests, {len(s3.proxy.denied)} refused")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
