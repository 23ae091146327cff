"""The table of models (docs/pyruntime.md, Loads and sizes): loads on a pool of loading threads,
their measured sizes, the capacity, unloads, and the lookup inference uses. No gRPC: server.py
calls it and maps its Failures.

A model id's entry moves LOADING -> LOADED -> (removed by unload), or LOADING -> removed (the
load failed, was refused for capacity, timed out, was cancelled by its last caller, or was
unloaded). Once removed, an entry is never served again; a load still running for it drops its
model when it ends, and the bytes reserved for it stay counted until then.

Accounting, under _lock: used = the measured sizes of LOADED entries; reserved = the file sizes
of loads still running; both are reported, not enforced. Keeping the models within the capacity
is the cache's job, as in ModelMesh: the cache above (warmd) charges each model the size a load
answers and evicts for it, and an unload it sent to make room may still be on its way when the
next load arrives. A second accountant here would refuse loads the cache has made room for. So
a load is refused, RESOURCE_EXHAUSTED, only for a model that alone exceeds the capacity: before
it starts when its file does, and after it ends when its measured size does."""

import concurrent.futures
import gc
import logging
import os
import threading
import time

from . import model_key
from .errors import (CANCELLED, DEADLINE_EXCEEDED, Failure, NOT_FOUND,
                     RESOURCE_EXHAUSTED, UNAVAILABLE, invalid)
from .loaders import resolve
from .sizes import resident_bytes

log = logging.getLogger("warm-pyruntime")

MIB = 1 << 20
MIN_SIZE = 64 << 10        # no model is answered smaller than this
UNLOAD_WAIT_S = 30.0       # how long unload waits for a load it abandons to end
FULL_COLLECT_S = 5.0       # a full garbage collection after a drop at most this often

LOADING, LOADED, GONE = "loading", "loaded", "gone"


def predicted_size(file_bytes):
    """predictModelSize's conservative estimate: three times the file, plus 1 MiB."""
    return 3 * file_bytes + MIB


class _Entry:
    """One model id. Fields other than result and done are guarded by ModelTable._lock."""

    def __init__(self, model_id, reserved, deadline):
        self.model_id = model_id
        self.state = LOADING
        self.model = None
        self.size = 0
        self.reserved = reserved
        self.deadline = deadline       # monotonic seconds, None: no limit
        self.waiters = 0               # loadModel calls waiting for this load
        self.result = concurrent.futures.Future()  # the size, or a Failure; set once
        self.done = threading.Event()  # the loading thread is finished with this entry


class ModelTable:
    """Models by id, thread-safe: every method may be called from any thread at once.

    registry: loaders.Registry; options: options.Options (capacity, repos, loading_threads,
    load_timeout_ms). clock: monotonic seconds (tests may give their own)."""

    def __init__(self, registry, options, clock=time.monotonic):
        self._registry = registry
        self._options = options
        self._clock = clock
        self._lock = threading.Lock()
        self._entries = {}
        self._used = 0
        self._last_full_collect = float("-inf")
        self._reserved = 0
        self._pool = concurrent.futures.ThreadPoolExecutor(options.loading_threads,
                                                           thread_name_prefix="load")

    # --- the model-runtime interface ---

    def _resolve(self, model_type, model_path, key):
        loader = self._registry.get(model_type)
        settings = model_key.parse(key, model_type)
        return loader, settings, resolve(model_path, loader, self._options.repos)

    def predict_size(self, model_type, model_path, key):
        """predicted_size of the model's file; Failure(INVALID_ARGUMENT) as load refuses it."""
        _, _, path = self._resolve(model_type, model_path, key)
        return predicted_size(os.path.getsize(path))

    def load(self, model_id, model_type, model_path, key):
        """Starts loading model_id, or joins its load, and answers the entry to give wait (which
        answers the measured size in bytes) and cancel_wait. Idempotent: a loaded id's wait
        answers its size at once, a loading id's waits for that load. Raises (here or from wait)
        Failure: INVALID_ARGUMENT before anything is held (type, key, path) or when the framework
        cannot load the file; RESOURCE_EXHAUSTED for the capacity; DEADLINE_EXCEEDED past
        --load-timeout-ms; CANCELLED when unloaded or cancelled while loading. Every entry
        returned must be given to wait exactly once."""
        if not model_id:
            raise invalid("no modelId")
        loader, settings, path = self._resolve(model_type, model_path, key)
        file_bytes = os.path.getsize(path)
        with self._lock:
            e = self._entries.get(model_id)
            if e is None:
                capacity = self._options.capacity
                if file_bytes > capacity:
                    raise Failure(RESOURCE_EXHAUSTED, self._full(model_id, file_bytes, "its file"))
                timeout = self._options.load_timeout_ms
                e = _Entry(model_id, file_bytes,
                           self._clock() + timeout / 1000 if timeout else None)
                self._entries[model_id] = e
                self._reserved += file_bytes
                self._pool.submit(self._run, e, loader, path, settings)
            e.waiters += 1
        return e

    def wait(self, e):
        """The size e's load answers, waiting at most until its deadline; see load."""
        try:
            timeout = None if e.deadline is None else max(0.0, e.deadline - self._clock())
            try:
                return e.result.result(timeout)
            except concurrent.futures.TimeoutError:
                with self._lock:
                    self._abandon(e, Failure(DEADLINE_EXCEEDED,
                                             f"loading model {e.model_id} took longer than "
                                             f"{self._options.load_timeout_ms} ms; given up"))
                return e.result.result()
        finally:
            with self._lock:
                e.waiters -= 1

    def cancel_wait(self, e):
        """A loadModel call waiting for e was cancelled by its client: when no other call waits
        for e and it is still loading, the load is given up (nothing is held once it ends)."""
        with self._lock:
            if e.state == LOADING and e.waiters <= 1:
                self._abandon(e, Failure(CANCELLED, f"loading model {e.model_id} was cancelled"))

    def unload(self, model_id):
        """Removes model_id (loaded or loading); nothing for an id not held. A load in progress is
        given up, and unload waits for it to end (at most UNLOAD_WAIT_S) so that its memory is
        returned when unload answers; a load that does not end by then drops its model when it
        does."""
        with self._lock:
            e = self._entries.get(model_id)
            if e is None:
                return
            if e.state == LOADED:
                del self._entries[model_id]
                self._used -= e.size
                e.state, e.model = GONE, None
            else:
                self._abandon(e, Failure(CANCELLED, f"model {model_id} was unloaded while loading"))
        if not e.done.wait(UNLOAD_WAIT_S):
            log.warning("unload %s: its load is still running; its model is dropped when it ends",
                        model_id)
        self._collect()
        log.info("unloaded %s", model_id)

    def _collect(self):
        """Frees what a dropped model left in reference cycles: the young generations at once,
        everything at most every FULL_COLLECT_S. A full pass over a process holding many models
        takes tens of milliseconds with the GIL held, which every unload of a busy cache paid."""
        now = time.monotonic()
        if now - self._last_full_collect >= FULL_COLLECT_S:
            self._last_full_collect = now
            gc.collect()
        else:
            gc.collect(1)

    def size(self, model_id):
        """The measured size of a loaded model; Failure NOT_FOUND or UNAVAILABLE (loading)."""
        with self._lock:
            return self._loaded(model_id).size

    # --- inference ---

    def get(self, model_id):
        """The LoadedModel of model_id; Failure NOT_FOUND when not held, UNAVAILABLE while it
        loads. The model stays usable by the caller after an unload (it is dropped when the
        last caller lets go)."""
        with self._lock:
            return self._loaded(model_id).model

    def loaded(self):
        """[(model id, state)] of every entry, sorted by id."""
        with self._lock:
            return sorted((i, e.state) for i, e in self._entries.items())

    def close(self):
        """Drops every model; loads still running end on their own (the process is ending)."""
        with self._lock:
            for e in list(self._entries.values()):
                if e.state == LOADED:
                    e.state, e.model = GONE, None
                else:
                    self._abandon(e, Failure(UNAVAILABLE, "the runtime is stopping"))
            self._entries.clear()
            self._used = 0
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- inside ---

    def _loaded(self, model_id):
        e = self._entries.get(model_id)
        if e is None:
            raise Failure(NOT_FOUND, f"model {model_id} is not loaded")
        if e.state != LOADED:
            raise Failure(UNAVAILABLE, f"model {model_id} is loading")
        return e

    def _full(self, model_id, need, what):
        held = sum(1 for e in self._entries.values() if e.state == LOADED)
        return (f"model {model_id} needs {need} bytes ({what}), more than the whole capacity of"
                f" {self._options.capacity} bytes ({self._used} used by {held} models,"
                f" {self._reserved} reserved by loads in progress)")

    def _abandon(self, e, failure):
        """Under _lock: e is no longer served; its waiters get failure."""
        if self._entries.get(e.model_id) is e:
            del self._entries[e.model_id]
        if e.state == LOADING:
            e.state = GONE
            if not e.result.done():
                e.result.set_exception(failure)

    def _run(self, e, loader, path, settings):
        """On a loading thread: loads, measures, and settles e under _lock."""
        model, size, failure = None, 0, None
        try:
            if e.state == LOADING:  # not given up while it queued
                before = resident_bytes()
                model = loader.load(path, settings)
                size = max(resident_bytes() - before, model.floor_bytes, MIN_SIZE)
        except Failure as f:
            failure = f
        except MemoryError:
            failure = Failure(RESOURCE_EXHAUSTED, f"loading model {e.model_id} ran out of memory")
        except BaseException as ex:  # a pickle's code may raise anything, SystemExit included
            what = str(ex).split("\nStack trace:")[0].strip()  # XGBoost appends its C++ stack
            failure = invalid(f"loading model {e.model_id} from {path} failed: "
                              f"{type(ex).__name__}: {what}")
        with self._lock:
            self._reserved -= e.reserved
            e.reserved = 0
            if e.state != LOADING:
                model = None
            elif failure is None and size > self._options.capacity:
                failure = Failure(RESOURCE_EXHAUSTED, self._full(e.model_id, size, "measured"))
            if e.state == LOADING and failure is not None:
                self._abandon(e, failure)
                model = None
            elif e.state == LOADING:
                e.state, e.model, e.size = LOADED, model, size
                self._used += size
                e.result.set_result(size)
        e.done.set()
        if model is None:
            self._collect()
            if failure:
                log.warning("load of %s failed: %s", e.model_id, failure.message)
            else:
                log.info("load of %s given up (cancelled, unloaded or timed out); its model is "
                         "dropped", e.model_id)
        else:
            log.info("loaded %s from %s: %d bytes", e.model_id, path, size)
