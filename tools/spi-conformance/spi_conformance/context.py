"""What a check is given and how it answers: a Context (the client, the runtime process when the
suite started it, the model under test, fresh ids, the status watcher) and two exceptions,
Failed and Skipped. A check is a function (ctx) -> optional detail string; it passes when it
returns, and unloads every id it made (ctx.cleanup) whatever happens."""

import dataclasses
import itertools
import os
import threading
import time

import grpc

from .rpc import attempt

MIB = 1 << 20


class Failed(Exception):
    """The check failed: the message says what was expected and what came."""


class Skipped(Exception):
    """The check cannot run here (e.g. it needs --exec): the message says why."""


@dataclasses.dataclass(frozen=True)
class Model:
    """A --model TYPE:PATH[:KEY]; path is absolute."""
    type: str
    path: str
    key: str = ""

    @staticmethod
    def parse(text):
        parts = text.split(":", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError(f"--model {text!r}: expected TYPE:PATH[:KEY]")
        return Model(parts[0], os.path.abspath(parts[1]), parts[2] if len(parts) > 2 else "")

    @property
    def label(self):
        return f"{self.type}:{os.path.basename(self.path)}"

    def file_bytes(self):
        if os.path.isdir(self.path):
            return sum(os.path.getsize(os.path.join(d, f))
                       for d, _, fs in os.walk(self.path) for f in fs)
        return os.path.getsize(self.path)


def fmt_bytes(n):
    return f"{n / MIB:.1f} MiB" if abs(n) >= MIB else f"{n} bytes"


class StatusWatcher:
    """Polls runtimeStatus every `period` seconds on its own thread from start() until stop(),
    keeping every change of answer: 'UNAVAILABLE' (not listening), another error's code name,
    or the status name. The first READY answer is kept for its limits. Thread-safe.

    connect() answers a new rpc.Client. Until a first answer, every poll uses a new one: a
    channel whose connection failed waits out gRPC's reconnect backoff (seconds, whatever the
    backoff options say) and would hide STARTING and delay READY."""

    def __init__(self, connect, period=0.05):
        self._connect, self._period = connect, period
        self._lock = threading.Lock()
        self._seen = []          # [(monotonic time, name)], one entry per change
        self._ready = None       # the first READY answer
        self._ready_event = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="status")

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        client, answered = None, False
        while not self._stop.is_set():
            if client is None:
                client = self._connect()
            o = attempt(client.status, timeout=max(self._period * 20, 1.0))
            name = client.mm.RuntimeStatusResponse.Status.Name(o.answer.status) if o.ok \
                else o.code.name
            answered = answered or o.ok
            if not answered:
                client.close()
                client = None
            with self._lock:
                if not self._seen or self._seen[-1][1] != name:
                    self._seen.append((time.monotonic(), name))
                if name == "READY" and self._ready is None:
                    self._ready = o.answer
                    self._ready_event.set()
            self._stop.wait(self._period)
        if client is not None:
            client.close()

    def wait_ready(self, timeout, process=None):
        """The first READY answer, or None when none came within timeout seconds (or, given
        the RuntimeProcess, when it exited first)."""
        end = time.monotonic() + timeout
        while not self._ready_event.wait(max(0.0, min(0.1, end - time.monotonic()))):
            if time.monotonic() >= end or (process is not None and not process.alive()):
                break
        with self._lock:
            return self._ready

    def seen(self):
        with self._lock:
            return list(self._seen)


class Context:
    """One check's view of the runtime. `model` is the model under test (None for checks of the
    runtime as a whole); `process` the RuntimeProcess, None with --address."""

    _serial = itertools.count(1)

    def __init__(self, check, client, process, model, models, watcher, timeout):
        self.check, self.client, self.process = check, client, process
        self.model, self.models, self.watcher, self.timeout = model, models, watcher, timeout
        self._ids = []

    def new_id(self, what=""):
        """A model id no other check (nor an earlier run) uses; unloaded by cleanup()."""
        mid = f"spi-{self.check}-{what or 'm'}-{os.getpid()}-{next(self._serial)}"
        self._ids.append(mid)
        return mid

    def need_process(self):
        if self.process is None:
            raise Skipped("needs --exec (the runtime's process, to watch its memory)")
        return self.process

    def limits(self):
        """A runtimeStatus answer for the limits (the first READY one when there was one)."""
        ready = self.watcher.wait_ready(0)
        if ready is not None:
            return ready
        o = attempt(self.client.status)
        if not o.ok:
            raise Failed(f"runtimeStatus answered {o.describe()}")
        return o.answer

    def load(self, mid, model=None, what="loadModel"):
        """Loads and answers the size (sizeInBytes, else modelSize); Failed when it fails."""
        model = model or self.model
        o = attempt(self.client.load, mid, model)
        if not o.ok:
            raise Failed(f"{what} of {model.label} as {mid}: expected OK, got {o.describe()}")
        size = o.answer.sizeInBytes
        if size == 0:
            s = attempt(self.client.size, mid)
            if not s.ok:
                raise Failed(f"{what} answered size 0 and modelSize {s.describe()}")
            size = s.answer
        if size <= 0:
            raise Failed(f"{what} of {mid}: size 0 from both sizeInBytes and modelSize")
        return size

    def cleanup(self):
        for mid in self._ids:
            attempt(self.client.unload, mid)
        self._ids.clear()


def expect_error(outcome, what, codes=None):
    """Failed unless outcome is an error (one of codes, when given)."""
    if outcome.ok:
        raise Failed(f"{what}: expected an error, got OK")
    if codes and outcome.code not in codes:
        names = " or ".join(c.name for c in codes)
        raise Failed(f"{what}: expected {names}, got {outcome.describe()}")


NOT_FOUND = (grpc.StatusCode.NOT_FOUND,)
