#!/usr/bin/python3
"""warm-mmesh confines the runtime it starts (docs/runtimes.md, "Runtimes that speak ModelMesh's
interface"): warmd with --runtime py=grpc-exec:warm-pyruntime and a repository whose scikit-learn
"model" is a hostile pickle, whose code, run at load, tries to read a file outside the
repositories (and /etc/shadow when root), write files, connect to a TCP port on 127.0.0.1 and
exec a program that writes a marker file, and reports what it got in its exception's message.
Confined, every attempt is denied: no marker, no connection, no file written, the outside file's
content in no answer; a plain scikit-learn model in the same runtime still answers as
scikit-learn does. With WARM_MMESH_CONFINE=0 in warmd's environment the same pickle does all of
it: the sandbox is what stops it.

Usage: mmesh_sandbox_test.py WARMD WARMCTL SOURCE_ROOT BUILD_DIR. Exits 77 (skipped) when
scikit-learn or gRPC is missing in /usr/bin/python3, warm-mmesh was not built, or the kernel has
no Landlock.
"""
import ctypes
import json
import os
import pickle
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

warmd, warmctl, root, build = sys.argv[1:5]
root, build = os.path.abspath(root), os.path.abspath(build)  # runtime commands name them
sys.path.insert(0, os.path.join(root, "tests", "support"))
from warm_cli import Checks, WarmCtl  # noqa: E402
from warmd_process import Warmd, manifest  # noqa: E402

try:
    import numpy as np
    import grpc  # noqa: F401  (warm-pyruntime needs it)
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
except ImportError as e:
    print(f"mmesh_sandbox_test: skipped, {e}")
    sys.exit(77)
bridge = os.path.join(build, "warm-mmesh")
pyruntime = os.path.join(build, "warm-pyruntime")
for tool in (bridge, pyruntime):
    if not os.access(tool, os.X_OK):
        print(f"mmesh_sandbox_test: skipped, {tool} was not built")
        sys.exit(77)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint(1)) < 1:  # landlock_create_ruleset
    print("mmesh_sandbox_test: skipped, the kernel has no Landlock")
    sys.exit(77)

checks = Checks()
check = checks.check
cli = WarmCtl(warmctl)
root_user = os.geteuid() == 0

# The code the hostile pickle runs at load: every attempt recorded, then an exception carrying
# the record (a load's error reaches warmd's status). Paths and port are filled in per run.
HOSTILE = r'''
import json, os, socket, subprocess
r = {}
def attempt(name, f):
    try:
        r[name] = f()
    except Exception as e:
        r[name] = "denied: " + type(e).__name__
attempt("read", lambda: open(SECRET).read())
attempt("shadow", lambda: "read %d bytes" % len(open("/etc/shadow", "rb").read()))
def write(path):
    with open(path, "w") as f:
        f.write("written by a model")
    return "written"
attempt("write_outside", lambda: write(OUTSIDE + "/written"))
attempt("write_repo", lambda: write(REPO + "/written"))
def tcp():
    with socket.create_connection(("127.0.0.1", PORT), timeout=5) as s:
        s.sendall(b"hello from a model")
    return "connected"
attempt("tcp", tcp)
attempt("exec", lambda: "exit %d" % subprocess.run(
    ["/bin/sh", "-c", "echo pwned > " + MARKER], timeout=20).returncode)
attempt("uid", lambda: os.getuid())
raise RuntimeError("HOSTILE " + json.dumps(r))
'''


class Hostile:
    """Unpickling it runs `code` (pickle calls exec(code))."""

    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code, {}))  # its own globals


class Listener:
    """A TCP port on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except socket.timeout:
                pass

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


def launcher_env():
    """WARM_MMESH_READ for the launcher's package directory, unless the launcher declares it
    itself (a "# warm-mmesh-read:" line)."""
    with open(pyruntime) as f:
        if "# warm-mmesh-read:" in f.read(4096):
            return {}
    return {"WARM_MMESH_READ": os.path.join(root, "tools", "warm-pyruntime")}


def run(work, confined):
    """One warmd, confined or not: what the hostile pickle reported (a dict, {} when its report
    never came back), the secret, the marker and written paths, and the listener's count."""
    label = "confined" if confined else "WARM_MMESH_CONFINE=0"
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    outside = tempfile.mkdtemp(prefix="outside.", dir=work)  # not under any repository
    secret = "secret-" + secrets.token_hex(16)
    with open(os.path.join(outside, "secret.txt"), "w") as f:
        f.write(secret)
    # Open to every user, so that what stops a runtime that dropped root to nobody is the
    # sandbox, not the permission bits (warmd refuses a repository every user may write).
    os.chmod(outside, 0o777)
    os.chmod(os.path.join(outside, "secret.txt"), 0o644)
    marker = os.path.join(outside, "marker")
    listener = Listener()
    code = (f"SECRET = {os.path.join(outside, 'secret.txt')!r}\nOUTSIDE = {outside!r}\n"
            f"REPO = {repo!r}\nPORT = {listener.port}\nMARKER = {marker!r}\n" + HOSTILE)
    os.makedirs(os.path.join(repo, "hostile", "1"))
    with open(os.path.join(repo, "hostile", "1", "model.joblib"), "wb") as f:
        pickle.dump(Hostile(code), f)
    manifest(os.path.join(repo, "hostile", "1"), type="sklearn", path="model.joblib")

    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X, y)
    os.makedirs(os.path.join(repo, "iris", "1"))
    joblib.dump(clf, os.path.join(repo, "iris", "1", "model.joblib"))
    manifest(os.path.join(repo, "iris", "1"), type="sklearn", path="model.joblib")

    env = launcher_env()
    env["WARM_MMESH_CONFINE"] = "1" if confined else "0"
    d = Warmd(checks, warmd, cli, os.path.join(work, "warmd"), repo,
              [f"py=grpc-exec:{pyruntime} --capacity 256MiB"], env=env)
    report, text = {}, ""
    try:
        for name in ("iris", "hostile"):
            rc, out, err = d.ctl("register", name, name)
            check(rc == 0, f"{label}: register {name}: {out} {err}")
        rows = X[::30]
        code, body = d.infer("iris", [{"name": "input", "datatype": "FP64",
                                       "shape": list(rows.shape), "data": rows.flatten().tolist()}])
        check(code == 200, f"{label}: iris answers: {code} {body}\n{d.tail()}")
        if code == 200:
            got = {o["name"]: np.array(o["data"]).reshape(o["shape"])
                   for o in body["outputs"]}
            check(np.array_equal(got.get("predict"), clf.predict(rows)) and
                  np.allclose(got.get("predict_proba"), clf.predict_proba(rows), rtol=0, atol=1e-12),
                  f"{label}: iris answers as scikit-learn does: {got}")

        code, body = d.infer("hostile", [{"name": "input", "datatype": "FP64", "shape": [1, 4],
                                          "data": [1, 2, 3, 4]}], timeout=120)
        st = d.status("hostile")
        text = json.dumps(body) + json.dumps(st)
        check(code != 200, f"{label}: the hostile pickle serves nothing: {code} {body}")
        at = text.find("HOSTILE ")
        if at >= 0:
            raw = text[at + len("HOSTILE "):]
            # The report sits inside JSON strings (escaped once or twice): unescape until it parses.
            for _ in range(3):
                try:
                    report = json.JSONDecoder().raw_decode(raw)[0]
                    break
                except json.JSONDecodeError:
                    raw = raw.replace('\\"', '"').replace("\\\\", "\\")
        check(isinstance(report, dict) and "read" in report,
              f"{label}: the pickle's code ran and its report came back: {text[:2000]}")
        if confined and root_user:
            check(report.get("uid") == 65534,
                  f"{label}: started as root, the runtime runs as nobody: uid {report.get('uid')}")
    finally:
        d.stop()
        listener.close()
    written = [p for p in (os.path.join(outside, "written"), os.path.join(repo, "written"))
               if os.path.exists(p)]
    return report, text, secret, os.path.exists(marker), written, listener.accepted


def main():
    work = tempfile.mkdtemp(prefix="mmesh-sandbox.")
    os.chmod(work, 0o755)
    for sub in ("on", "off"):
        os.makedirs(os.path.join(work, sub))
    try:
        report, text, secret, marked, written, accepted = run(os.path.join(work, "on"), True)
        print(f"mmesh_sandbox_test: confined, the pickle reported {report}")
        check(secret not in text, "confined: the outside file's content leaks through no answer")
        check(str(report.get("read", "")).startswith("denied"),
              f"confined: reading a file outside the repositories is denied: {report.get('read')}")
        if root_user:
            check(str(report.get("shadow", "")).startswith("denied"),
                  f"confined: reading /etc/shadow is denied: {report.get('shadow')}")
        check(not written, f"confined: no file is written: {written}")
        check(str(report.get("write_outside", "")).startswith("denied") and
              str(report.get("write_repo", "")).startswith("denied"),
              f"confined: writes are denied: {report}")
        check(accepted == 0 and str(report.get("tcp", "")).startswith("denied"),
              f"confined: no TCP connection reaches 127.0.0.1: {accepted} accepted, {report.get('tcp')}")
        check(not marked, f"confined: a program the pickle execs writes no marker: {report.get('exec')}")

        report, text, secret, marked, written, accepted = run(os.path.join(work, "off"), False)
        print(f"mmesh_sandbox_test: unconfined, the pickle reported {str(report)[:300]}")
        check(secret in text, "unconfined: the same pickle reads the outside file (its content in the "
              "load's error)")
        if root_user:
            check(str(report.get("shadow", "")).startswith("read"),
                  f"unconfined: the pickle reads /etc/shadow: {report.get('shadow')}")
        check(len(written) == 2, f"unconfined: the pickle writes outside and into the repository: {written}")
        check(accepted >= 1, f"unconfined: the pickle connects to 127.0.0.1: {accepted} accepted")
        check(marked, f"unconfined: a program the pickle execs writes its marker: {report.get('exec')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if checks.failures:
        print(f"mmesh_sandbox_test: {checks.failures} failed")
        sys.exit(1)
    print("mmesh_sandbox_test: ok")


main()
