#!/usr/bin/python3
"""Ctrl-C at a terminal running warmd with a model runtime: the terminal's SIGINT reaches warmd's
process group only, so warmd stops its runtime itself, exits 0, and never logs the runtime as
killed or restarting (the runtime runs in a process group of its own).

Usage: runtime_ctrl_c_test.py WARMD WARM_RUNTIME
"""
import os
import pty
import select
import shutil
import sys
import tempfile
import time

warmd, runtime = sys.argv[1:3]


def read_until(fd, text, seconds):
    out, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline and text not in out:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def stat(pid):
    """(state, parent pid, process group) of `pid`, or None when it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def main():
    tmp = tempfile.mkdtemp(prefix="warm-ctrl-c-")
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(warmd, [warmd, "--repo", repo, "--state", os.path.join(tmp, "state"), "--listen",
                         "unix:" + os.path.join(tmp, "s.sock"), "--runtime", f"r1={runtime} --capacity 64KiB",
                         "--log-level", "info"])
    out = read_until(fd, b"warmd ready", 30)
    if b"warmd ready" not in out:
        print(out.decode(errors="replace"))
        print("FAIL: warmd did not start")
        sys.exit(1)
    time.sleep(0.5)  # the runtime is up and its link open
    # The mechanism: the runtime (warmd's child) is in a process group of its own, which the
    # terminal's SIGINT does not reach. (Its effect alone depends on which side notices first.)
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and stat(int(p)) and stat(int(p))[1] == pid]
    same_group = [c for c in children if stat(c)[2] == stat(pid)[2]]
    os.write(fd, b"\x03")  # Ctrl-C: the terminal sends SIGINT to its foreground process group
    out += read_until(fd, b"\x00never", 30)  # everything until warmd exits and the pty closes
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    failures = []
    if not children:
        failures.append("warmd has no runtime process")
    if same_group:
        failures.append(f"the runtime {same_group} shares warmd's process group")
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        failures.append(f"warmd's exit status: {status}")
    for word in ("restart", "killed", "lost"):
        if word in text.split("warmd ready", 1)[1]:
            failures.append(f"the log after ready says '{word}'")
    if failures:
        print(text[-3000:])
        for f in failures:
            print("FAIL:", f)
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("runtime_ctrl_c_test: all checks passed")


main()
