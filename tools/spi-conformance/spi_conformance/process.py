"""The runtime started by the suite (--exec): `/bin/sh -c 'exec COMMAND'` in its own session,
with WARM_GRPC_ADDRESS=unix:<tmpdir>/runtime.sock and WARM_RUNTIME_REPOS naming the folders of
the models; its output goes to <tmpdir>/runtime.log. Its resident memory is read from /proc,
summed over the process and its descendants (a runtime may load models in worker processes)."""

import os
import signal
import subprocess
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children():
    """{ppid: [pid, ...]} of every process now."""
    tree = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


class RuntimeProcess:
    """A runtime this suite started and must stop (stop(), also on error). Not thread-safe."""

    def __init__(self, command, folder, repos):
        self.socket = os.path.join(folder, "runtime.sock")
        self.address = "unix:" + self.socket
        self.log_path = os.path.join(folder, "runtime.log")
        env = dict(os.environ, WARM_GRPC_ADDRESS=self.address,
                   WARM_RUNTIME_REPOS=":".join(repos))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(["/bin/sh", "-c", "exec " + command], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def exit_code(self):
        return self.proc.poll()

    def resident(self):
        """Resident bytes of the runtime and its descendants now (/proc/PID/statm)."""
        tree = _children()
        total, todo = 0, [self.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/statm") as f:
                    total += int(f.read().split()[1]) * PAGE
            except (OSError, ValueError, IndexError):
                pass
            todo.extend(tree.get(pid, ()))
        return total

    def settled_resident(self, wait=0.2):
        """resident() after a short pause, for memory a call freed or touched late to settle."""
        time.sleep(wait)
        return self.resident()

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace=5.0):
        """SIGTERM, then SIGKILL to its whole session after `grace` seconds. Answers the exit
        status (None when it had to be killed)."""
        code = self.proc.poll()
        if code is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                code = self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
                code = None
        self._log.close()
        return code
