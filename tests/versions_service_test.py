#!/usr/bin/python3
"""Black-box: served models through the real warmd and warmctl.

warmd --model-config serves a model whose versions come from its directory: a new version is
taken and becomes the default, the old one goes; `warmctl versions` shows it (text and --json);
KServe V2 HTTP reaches a version by /versions/{v}/ and a label the same way, and a model's metadata
and an unknown version's error name every version it serves; a served-models file
with an error is refused whole by `warmctl reload` and by SIGHUP, the running state unchanged; a
fixed file is taken by SIGHUP; --serve-repo serves every model directory, one that appears later
too; and a warmd without one says there is nothing to reload. `warmctl status` takes what `infer` takes: a
served model's name, NAME@LABEL, --version.

Usage: versions_service_test.py WARMD WARMCTL
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

warmd, warmctl = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def ctl(sock, *args):
    r = subprocess.run([warmctl, "--connect", "unix:" + sock, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def versions(sock, name):
    rc, out, _ = ctl(sock, "--json", "versions", name)
    return json.loads(out) if rc == 0 else None


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def make_model(repo, name, version):
    subprocess.run([warmctl, "make-model", "--out", os.path.join(repo, name, str(version)), "--layers", "16,8"],
                   check=True, capture_output=True)


def http(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def start(tmp, name, *extra):
    log = open(os.path.join(tmp, name + ".log"), "w+")
    sock = os.path.join(tmp, name + ".sock")
    proc = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, name + "-state"),
                             "--device", "host:64MiB", "--listen", "unix:" + sock, "--http", "127.0.0.1:0",
                             "--poll-seconds", "0.05", "--version-settle", "100ms", *extra],
                            stdout=open(log.name, "a"), stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    port = re.search(r"serving HTTP on 127\.0\.0\.1:(\d+)", log.read())
    if not port:
        proc.kill()
        log.seek(0)
        sys.exit("FAIL: warmd did not start: " + log.read())
    return proc, sock, int(port.group(1))


def stop(proc):
    proc.terminate()
    check(proc.wait(timeout=60) == 0, "warmd exits 0 after SIGTERM")


with tempfile.TemporaryDirectory() as tmp:
    repo = os.path.join(tmp, "repo")
    make_model(repo, "m", 1)
    config = os.path.join(tmp, "models.toml")
    with open(config, "w") as f:
        f.write('[[model]]\nname = "m"\nversions = "latest:1"\n')
    proc, sock, port = start(tmp, "a", "--model-config", config)
    try:
        check(wait_for(lambda: (versions(sock, "m") or {}).get("default_version") == 1), "m serves version 1")
        rc, out, err = ctl(sock, "--json", "infer", "m", "--random")
        check(rc == 0 and json.loads(out)["model"] == "m@1", f"infer m: {out} {err}")
        rc, out, err = ctl(sock, "--json", "infer", "m", "--version", "1", "--random")
        check(rc == 0 and json.loads(out)["model"] == "m@1", f"infer m --version 1: {out} {err}")
        rc, out, err = ctl(sock, "--json", "status", "m", "--version", "1")
        check(rc == 0 and json.loads(out)["id"] == "m@1", f"status m --version 1: {out} {err}")
        rc, out, err = ctl(sock, "infer", "m@9", "--random")
        check(rc == 1 and "not_found" in err, f"infer an unknown version: {rc} {err}")
        rc, out, _ = ctl(sock, "versions")
        check(rc == 0 and "m  versions latest:1  availability-preserving  default 1" in out, f"versions text: {out}")

        make_model(repo, "m", 2)
        check(wait_for(lambda: (lambda v: v and v["default_version"] == 2 and
                                [x["version"] for x in v["versions"]] == [2])(versions(sock, "m"))),
              f"m rolls to version 2: {versions(sock, 'm')}")
        code, _ = http(port, "GET", "/v2/models/m/versions/2/ready")
        check(code == 200, f"version 2 ready over HTTP: {code}")
        code, body = http(port, "GET", "/v2/models/m/versions/1/ready")
        check(code == 404, f"version 1 is gone: {code} {body}")
        request = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]}
        code, body = http(port, "POST", "/v2/models/m/versions/2/infer", request)
        check(code == 200 and body.get("model_name") == "m@2", f"infer version 2 over HTTP: {code} {body}")
        code, body = http(port, "POST", "/v2/models/m/infer", request)
        check(code == 200 and body.get("model_name") == "m@2", f"infer m over HTTP: {code} {body}")

        # A file with an error is refused whole; nothing changes.
        with open(config, "w") as f:
            f.write('[[model]]\nname = "m"\nversions = "latest:1"\n[[model]]\nname = "n"\nversions = "newest"\n')
        rc, out, err = ctl(sock, "reload")
        check(rc == 1 and "newest" in err and config in err, f"reload refuses a bad file: {rc} {out} {err}")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        check(proc.poll() is None, "SIGHUP does not stop warmd")
        rc, out, _ = ctl(sock, "versions", "n")
        check(rc == 1, "n is not served after a refused file")
        check((versions(sock, "m") or {}).get("default_version") == 2, "m still serves 2")

        # Fixed, with a label and a model serving two versions; SIGHUP takes it.
        make_model(repo, "n", 5)
        make_model(repo, "w", 1)
        make_model(repo, "w", 2)
        with open(config, "w") as f:
            f.write('[[model]]\nname = "m"\nversions = "latest:1"\nlabels = { stable = 2 }\n'
                    '[[model]]\nname = "n"\nversions = "all"\n'
                    '[[model]]\nname = "w"\nversions = "latest:2"\n')
        proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: (versions(sock, "n") or {}).get("default_version") == 5), "n served after SIGHUP")
        check(wait_for(lambda: [(x["version"], x["state"]) for x in (versions(sock, "w") or {}).get("versions", [])] ==
                       [(1, "READY"), (2, "READY")]), f"w serves versions 1 and 2: {versions(sock, 'w')}")
        # Metadata lists every version the name serves, whichever version was asked for; an unknown
        # version's error names them all.
        for path in ("/v2/models/w", "/v2/models/w/versions/1", "/v2/models/w/versions/2"):
            code, body = http(port, "GET", path)
            check(code == 200 and body.get("versions") == ["1", "2"], f"GET {path}: {code} {body}")
        code, body = http(port, "GET", "/v2/models/w/versions/7")
        check(code == 404 and "has no version 7; it serves versions 1 and 2" in body.get("error", ""),
              f"an unknown version names those served: {code} {body}")
        code, body = http(port, "POST", "/v2/models/w/versions/9/infer", request)
        check(code == 404 and "it serves versions 1 and 2" in body.get("error", ""), f"infer version 9: {code} {body}")
        code, body = http(port, "POST", "/v2/models/w/versions/1/infer", request)
        check(code == 200 and body.get("model_name") == "w@1", f"infer w version 1: {code} {body}")
        code, body = http(port, "GET", "/v2/models/m")
        check(code == 200 and body.get("versions") == ["2"], f"m serves version 2 alone: {code} {body}")
        check(wait_for(lambda: (versions(sock, "m") or {}).get("labels") == {"stable": 2}), "m@stable in effect")
        code, body = http(port, "POST", "/v2/models/m/versions/stable/infer", request)
        check(code == 200 and body.get("model_name") == "m@2", f"infer a label over HTTP: {code} {body}")
        # status takes what infer takes: the name (its default version), a label, --version.
        for args, vmodel in ((["m"], "m"), (["m@stable"], "m@stable"), (["m", "--version", "stable"], "m@stable"),
                             (["m", "--version", "2"], None)):
            rc, out, err = ctl(sock, "--json", "status", *args)
            doc = json.loads(out) if rc == 0 else {}
            check(rc == 0 and doc["id"] == "m@2" and doc.get("vmodel") == vmodel and doc["kind"] == "dense",
                  f"status {' '.join(args)}: {rc} {out} {err}")
        rc, out, err = ctl(sock, "status", "m@stable")
        check(rc == 0 and re.search(r"^vmodel: +m@stable\n^id: +m@2\n^state:", out, re.M),
              f"status m@stable: {out} {err}")
        rc, out, err = ctl(sock, "status", "m@canary")
        check(rc == 1 and "not_found: no model or vmodel 'm@canary'" in err, f"status an unknown label: {rc} {err}")
        # A model registered on its own from a version directory: --version names that directory.
        make_model(repo, "p", 1)
        make_model(repo, "p", 2)
        rc, out, err = ctl(sock, "register", "plain", "p")
        check(rc == 0, f"register plain p: {rc} {out} {err}")
        rc, out, err = ctl(sock, "--json", "status", "plain", "--version", "2")
        doc = json.loads(out) if rc == 0 else {}
        check(rc == 0 and doc.get("id") == "plain" and doc.get("version") == 2, f"status plain --version 2: {rc} {out} {err}")
        rc, out, err = ctl(sock, "status", "plain")
        check(rc == 0 and re.search(r"^version: +2$", out, re.M), f"status plain shows its version: {out} {err}")
        rc, out, err = ctl(sock, "status", "plain@1")
        check(rc == 1 and "'plain' is a model registered on its own, from version 2" in err,
              f"status plain@1 says which version it serves: {rc} {err}")
        rc, out, err = ctl(sock, "--json", "reload")
        check(rc == 0 and json.loads(out)["models"] == 3, f"reload: {rc} {out} {err}")
    finally:
        stop(proc)

    # --serve-repo: every model directory, and one that appears later.
    proc, sock, port = start(tmp, "r", "--serve-repo")
    try:
        check(wait_for(lambda: (versions(sock, "n") or {}).get("default_version") == 5), "--serve-repo serves n")
        make_model(repo, "late", 3)
        check(wait_for(lambda: (versions(sock, "late") or {}).get("default_version") == 3, 30),
              "a model directory that appears is served")
    finally:
        stop(proc)

    proc, sock, port = start(tmp, "b")
    try:
        rc, out, err = ctl(sock, "reload")
        check(rc == 1 and "nothing to reload" in err, f"reload without a served-models file: {rc} {err}")
        rc, out, _ = ctl(sock, "versions")
        check(rc == 0 and "no served models" in out, f"versions without served models: {out}")
    finally:
        stop(proc)

    # A served-models file with an error stops the start.
    with open(config, "w") as f:
        f.write('[[model]]\nname = "m@1"\n')
    r = subprocess.run([warmd, "--repo", repo, "--state", os.path.join(tmp, "c-state"), "--listen",
                        "unix:" + os.path.join(tmp, "c.sock"), "--model-config", config],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "may not hold '@'" in r.stderr, f"bad file at start: {r.returncode} {r.stderr}")

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
