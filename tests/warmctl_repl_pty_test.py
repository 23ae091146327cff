#!/usr/bin/python3
"""Black-box: warmctl's REPL at a real terminal (a pty, so libedit reads the lines), against the real
warmd, with the real timing a person at the prompt has.

- A pause at the prompt longer than --connect-timeout (5 s) does not make the next command fail to
  connect: the connect deadline is counted from when the command runs, not from when the event
  loop last ran (before the REPL sat in readline).
- Tab completes `inspect cl` to `inspect cluster`.

Takes about 8 s (the pause is 6 s). Usage: warmctl_repl_pty_test.py WARMD WARMCTL
"""

import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

warmd, warmctl = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


class Terminal:
    """warmctl's REPL on a pty: write keys, read what it shows until a pattern appears."""

    def __init__(self, args, env):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.seen = ""

    def read_until(self, pattern, seconds=10):
        """Everything shown since the last call, up to and including `pattern`; None on a timeout."""
        deadline = time.monotonic() + seconds
        while True:
            match = re.search(pattern, self.seen)
            if match:
                shown, self.seen = self.seen[:match.end()], self.seen[match.end():]
                return shown
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.master], [], [], left)[0]:
                return None
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the REPL exited: the pty is closed
                return None
            self.seen += chunk.decode(errors="replace")

    def send(self, keys):
        os.write(self.master, keys.encode())

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        os.close(self.master)


with tempfile.TemporaryDirectory() as tmp:
    sock = os.path.join(tmp, "warm.sock")
    subprocess.run([warmctl, "make-model", "--out", os.path.join(tmp, "repo", "small", "1"), "--layers", "8,4"],
                   check=True, capture_output=True)
    log = open(os.path.join(tmp, "warmd.log"), "w+")
    daemon = subprocess.Popen([warmd, "--repo", os.path.join(tmp, "repo"), "--state", os.path.join(tmp, "state"),
                               "--device", "host:64MiB", "--listen", "unix:" + sock],
                              stdout=open(log.name, "a"), stderr=subprocess.STDOUT)
    term = None
    try:
        for _ in range(100):
            if os.path.exists(sock) or daemon.poll() is not None:
                break
            time.sleep(0.1)
        if not os.path.exists(sock):
            log.seek(0)
            sys.exit("FAIL: warmd did not start: " + log.read())
        r = subprocess.run([warmctl, "--connect", "unix:" + sock, "register", "small", "small"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, f"register: {r.stdout} {r.stderr}")

        env = dict(os.environ, HOME=tmp, TERM="xterm")  # HOME: the history file goes to the scratch directory
        term = Terminal([warmctl, "--connect", "unix:" + sock], env)
        prompt = r"warm> "
        check(term.read_until(prompt) is not None, f"the REPL shows its prompt: {term.seen!r}")

        # A person reads the banner, thinks, then asks: longer than the 5 s connect timeout.
        time.sleep(6)
        term.send("models\r")
        shown = term.read_until(prompt, 15)
        check(shown is not None and re.search(r"small +NOT_LOADED", shown) and "cannot connect" not in shown,
              f"models after 6 s at the prompt lists the model: {shown!r} {term.seen!r}")

        term.send("inspect cl\t\r")
        shown = term.read_until(prompt, 15)
        check(shown is not None and "alone: this warmd is not in a cluster" in shown,
              f"tab completes `inspect cl` to `inspect cluster`: {shown!r} {term.seen!r}")

        term.send("quit\r")
        check(term.proc.wait(timeout=10) == 0, "quit leaves with status 0")
    finally:
        if term:
            term.close()
        daemon.terminate()
        daemon.wait(timeout=30)

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
