#!/usr/bin/python3
"""Black-box: tools/cluster as a person at a terminal runs it, then stops it with Ctrl-C.

Ctrl-C at a terminal signals the whole foreground process group: the script and everything it
started. etcd must not be among them: the instances leave the cluster through it (revoking their
leases), so it has to outlive them. With etcd gone first, each instance retried etcd until its
deadline (seconds) and logged etcd errors on the way out.

Checks that every process is gone within a few seconds of the Ctrl-C, that etcd went after the
last instance, and that the instances' logs show no etcd errors.
Takes about 5 s. Skipped (77) without etcd. Usage: cluster_script_test.py WARMD WARMCTL SOURCE_ROOT
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

warmd, warmctl, root = sys.argv[1:4]
if shutil.which("etcd") is None:
    print("etcd is not installed: skipped")
    sys.exit(77)
build = os.path.dirname(os.path.abspath(warmd))
if os.path.dirname(os.path.abspath(warmctl)) != build:
    print("warmd and warmctl must be in one build directory")
    sys.exit(1)

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def alive(pid):
    """Running: neither gone nor a zombie (tools/cluster, their parent, reaps them in its own order)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


with tempfile.TemporaryDirectory() as tmp:
    repo = os.path.join(tmp, "repo")
    cluster = os.path.join(tmp, "cluster")
    # The demo repository's dense models, written small beforehand (tools/demo-repo keeps models
    # already there): the script's behaviour, not 330 MB of weights, is under test.
    for i in range(20):
        subprocess.run([warmctl, "make-model", "--out", f"{repo}/dense-{i:02d}/1", "--layers", "8,4,2",
                        "--seed", str(i + 1)], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, WARM_BUILD_DIR=build, WARM_CLUSTER_DIR=cluster, WARM_DEMO_REPO=repo,
               WARM_DEMO_TORCH="0")
    # A session of its own, as a shell gives a foreground job its own process group.
    script = subprocess.Popen([os.path.join(root, "tools", "cluster"), "2"], env=env, cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    shown = ""
    deadline = time.monotonic() + 60
    while "Ctrl-C stops them" not in shown and time.monotonic() < deadline:
        line = script.stdout.readline()
        if not line:
            break
        shown += line
    check("Ctrl-C stops them" in shown, f"tools/cluster became ready; it printed:\n{shown}")

    # The processes to watch: etcd and both instances, found by their command lines.
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    etcd_pids = [int(l.split()[0]) for l in ps.splitlines() if f"--data-dir {cluster}/etcd" in l]
    warmd_pids = [int(l.split()[0]) for l in ps.splitlines() if f"--state {cluster}/i" in l]
    check(len(etcd_pids) == 1 and len(warmd_pids) == 2, f"one etcd and two warmd running: {ps}")

    started = time.monotonic()
    os.killpg(script.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    # When each process is first seen gone (polled every 10 ms). Processes found gone in one pass
    # share its time: their order within 10 ms cannot be told.
    gone = {}
    while time.monotonic() - started < 30 and len(gone) < len(etcd_pids) + len(warmd_pids):
        seen_at = time.monotonic() - started
        for pid in etcd_pids + warmd_pids:
            if pid not in gone and not alive(pid):
                gone[pid] = seen_at
        time.sleep(0.01)
    try:
        rest, _ = script.communicate(timeout=30)
        shown += rest
    except subprocess.TimeoutExpired:
        os.killpg(script.pid, signal.SIGKILL)
        check(False, "tools/cluster exited within 30 s of Ctrl-C")
    for pid in etcd_pids + warmd_pids:
        check(pid in gone, f"process {pid} is gone after Ctrl-C")
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    took = max(gone.values(), default=99)
    check(took < 2.5, f"everything stopped within 2.5 s of Ctrl-C (took {took:.1f} s)")
    if len(gone) == 3:
        last_instance = max(gone[p] for p in warmd_pids)
        check(gone[etcd_pids[0]] >= last_instance,
              f"etcd outlived the instances (etcd gone at {gone[etcd_pids[0]]:.2f} s, the last instance at "
              f"{last_instance:.2f} s)")

    for i in (1, 2):
        log = open(os.path.join(cluster, f"i{i}.log")).read()
        errors = [l for l in log.splitlines() if "etcd" in l.lower() and ("[error]" in l or "[warning]" in l)]
        check(not errors, f"instance i{i} logged no etcd errors while stopping: {errors}")

print("FAIL" if failures else "PASS", f"({failures} failures)")
sys.exit(1 if failures else 0)
