#!/usr/bin/python3
"""Black-box: served models whose versions live in S3, through the real warmd and warmctl.

warmd with an S3 repository root (s3rver behind a proxy that checks every SigV4 signature) and
--serve-repo serves the model directory it finds there at its highest version, answering as the
same file loaded from local disk; a version uploaded later is served within a few polls and one
deleted is retired (the name goes back to the version before); a burst of 503s on the listings
(the model's own and --serve-repo's rescan of the root) changes nothing that is served and shows
as the model's source error until it passes; a
served-models file may name an S3 model directory by URL; an HTTP root cannot be listed and
--serve-repo refuses it at start.

Usage: remote_versions_test.py WARMD WARMCTL
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from object_servers import MissingComponent, ObjectServers  # noqa: E402
from warm_cli import Checks, WarmCtl, free_port, metric, wait_for  # noqa: E402

warmd, warmctl = sys.argv[1], sys.argv[2]
checks, cli = Checks(), WarmCtl(warmctl)
check, ctl, outputs = checks.check, cli.run, cli.outputs
POLL = 0.2  # --poll-seconds


def make_model(out, seed):
    return cli.make_model(out, "16,8,4", seed)


def versions(sock, name):
    rc, out, _ = ctl(sock, "--json", "versions", name)
    if rc != 0:
        return {}
    v = json.loads(out)
    return v[0] if isinstance(v, list) and v else v


def served(sock, name):
    """The version the name serves and the versions it has."""
    v = versions(sock, name)
    return v.get("default_version"), [x["version"] for x in v.get("versions", [])]


def start(tmp, name, servers, *extra):
    """warmd serving Cap'n Proto on a socket and HTTP on a free port: (process, socket, log, port)."""
    sock = os.path.join(tmp, name + ".sock")
    port = free_port()
    log_path = os.path.join(tmp, name + ".log")
    proc = subprocess.Popen(
        [warmd, "--state", os.path.join(tmp, name + "-state"), "--s3-endpoint", servers.s3.endpoint,
         "--device", "host:64MiB", "--listen", "unix:" + sock, "--poll-seconds", str(POLL),
         "--version-settle", "100ms", "--http", f"127.0.0.1:{port}", *extra],
        stdout=open(log_path, "a"), stderr=subprocess.STDOUT, env=servers.s3.env())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(sock) and ctl(sock, "models")[0] == 0:
            return proc, sock, log_path, port
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"FAIL: warmd did not start: {open(log_path).read()[-2000:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="warm-remote-versions-")
    local = os.path.join(tmp, "local")
    try:
        servers = ObjectServers(bucket="models")
    except MissingComponent as e:
        print(f"remote_versions_test: {e}")
        return 1
    with servers:
        s3 = servers.s3
        # The same files on local disk, to compare answers with: copy1 is m's version 1, copy2 its 2.
        v1 = make_model(os.path.join(local, "copy1", "1"), 1)
        v2 = make_model(os.path.join(local, "copy2", "1"), 2)
        s3.put("prod/m/1/model.safetensors", v1)
        s3.put("prod/m/007/model.safetensors", v2)  # not a version's name
        s3.put("prod/m/3/notes.txt", b"no model file")  # not a version
        s3.put("prod/m/README", b"text")
        s3.put("elsewhere/u/4/model.safetensors", v1)
        s3.put("elsewhere/u/5/model.safetensors", v2)
        config = os.path.join(tmp, "models.toml")
        with open(config, "w") as f:
            f.write('[[model]]\nname = "u"\nbase-path = "%s"\nversions = "all"\n'
                    % s3.url("elsewhere/u"))

        proc, sock, log_path, port = start(tmp, "a", servers, "--repo", local, "--repo", s3.url("prod"),
                                     "--serve-repo", "--model-config", config)
        try:
            check(wait_for(lambda: served(sock, "m") == (1, [1]), 20),
                  f"m serves version 1 from S3: {versions(sock, 'm')}")
            check(wait_for(lambda: served(sock, "copy1")[0] == 1, 20), "the local copies are served")
            check(wait_for(lambda: served(sock, "copy2")[0] == 1, 20), "the local copies are served")
            expected1, expected2 = outputs(sock, "copy1"), outputs(sock, "copy2")
            check(expected1 != expected2 and "error" not in expected1, f"two different models: {expected1}")
            check(outputs(sock, "m") == expected1, "m@1 from S3 answers as its local copy")
            check(wait_for(lambda: served(sock, "u") == (5, [4, 5]), 20),
                  f"a served-models file's S3 URL: every version, the highest the default: "
                  f"{versions(sock, 'u')}")
            check(outputs(sock, "u@4") == expected1 and outputs(sock, "u@5") == expected2,
                  "u's versions answer as their files")

            # A version uploaded later is served within a few polls, with its own weights.
            uploaded = time.monotonic()
            s3.put("prod/m/2/model.safetensors", v2)
            check(wait_for(lambda: served(sock, "m") == (2, [2]), 20),
                  f"m rolls to version 2: {versions(sock, 'm')}")
            took = time.monotonic() - uploaded
            check(took < 15 * POLL + 2, f"version 2 was served {took:.1f} s after its upload")
            check(outputs(sock, "m") == expected2, "m answers with version 2's weights")
            check(outputs(sock, "m@2") == expected2, "m@2 answers with version 2's weights")

            # Deleted: retired, and the name goes back to version 1.
            s3.client.delete_object(Bucket=s3.bucket, Key="prod/m/2/model.safetensors")
            check(wait_for(lambda: served(sock, "m") == (1, [1]), 20),
                  f"m goes back to version 1 when 2 is deleted: {versions(sock, 'm')}")
            check(outputs(sock, "m") == expected1, "m answers with version 1's weights again")

            # A burst of 503s on the listings: what is served stays; the error shows meanwhile.
            before = len(s3.proxy.requests)
            s3.proxy.add_fault("status", status=503, code="SlowDown", method="GET",
                               path_contains="list-type", times=1000)
            check(wait_for(lambda: "SlowDown" in versions(sock, "m").get("source_error", "")
                           or "503" in versions(sock, "m").get("source_error", ""), 20),
                  f"the listing's error shows: {versions(sock, 'm')}")
            # --serve-repo's rescan of the root (every 5 s) fails too, and retires nothing.
            check(wait_for(lambda: "repositories cannot be listed now" in open(log_path).read(), 15),
                  "the rescan's failed listing is logged")
            time.sleep(5 * POLL)
            check(served(sock, "m") == (1, [1]), f"m keeps serving version 1 through the 503s: "
                                                 f"{versions(sock, 'm')}")
            check(served(sock, "u") == (5, [4, 5]), f"u keeps its versions: {versions(sock, 'u')}")
            check(outputs(sock, "m") == expected1, "m answers during the 503s")
            check((metric(port, "warm_version_source_errors_total") or 0) >= 2,
                  "the failed listings are counted")
            listings = sum(1 for r in s3.proxy.requests[before:] if "list-type" in r[1])
            check(listings >= 5, f"the listing was retried at every poll: {listings}")
            s3.proxy.clear()
            check(wait_for(lambda: not versions(sock, "m").get("source_error"), 20),
                  f"the error clears once the store answers: {versions(sock, 'm')}")
            s3.put("prod/m/6/model.safetensors", v2)
            check(wait_for(lambda: served(sock, "m") == (6, [6]), 20),
                  f"after the burst a new version is served: {versions(sock, 'm')}")
            check(not s3.proxy.denied, f"every request warmd signed was verified: {s3.proxy.denied}")
        finally:
            proc.terminate()
            check(proc.wait(timeout=60) == 0, "warmd exits 0 after SIGTERM")
        with open(log_path) as f:
            log = f.read()
        check(s3.access_key not in log and s3.secret_key not in log, "no credential in the log")

        # An HTTP root cannot be listed: --serve-repo refuses it at start.
        r = subprocess.run([warmd, "--repo", servers.http.url("models"), "--serve-repo", "--state",
                            os.path.join(tmp, "h-state"), "--device", "host:64MiB", "--listen",
                            "unix:" + os.path.join(tmp, "h.sock")],
                           capture_output=True, text=True, timeout=60, env=s3.env())
        check(r.returncode == 2 and "cannot be listed" in r.stderr,
              f"--serve-repo refuses an HTTP root: {r.returncode} {r.stderr[-500:]}")
        print(f"remote_versions_test: {len(s3.proxy.requests)} S3 requests")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
