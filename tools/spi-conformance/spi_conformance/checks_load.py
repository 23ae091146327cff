"""The checks of loads in flight and of memory (docs/conformance.md): cancelled-load,
honest-sizes, concurrency. Each is independent: it makes its own ids and the runner unloads them
after it."""

import concurrent.futures
import math
import time

from . import tensors
from .context import MIB, Failed, fmt_bytes
from .rpc import attempt

CANCEL_DEADLINE_S = 0.001   # the cancelled load's deadline
HONEST_TARGET = 64 * MIB    # honest-sizes loads models until this much is reported or estimated
HONEST_MAX_LOADS = 50
HONEST_RATIO = 0.5          # reported total >= HONEST_RATIO * resident growth - HONEST_SLACK
HONEST_SLACK = 8 * MIB      # allocator noise: arenas, thread caches, gRPC buffers, lazy imports
CONCURRENT_LOADS_MAX = 16   # at most this many loads at once, whatever the runtime declares
CONCURRENT_INFERENCES = 16


def check_cancelled_load(ctx):
    """Two cancelled loads, each followed at once by unloadModel of its id: one with a 1 ms
    deadline, one cancelled after a quarter of the time a reference load of the model took (so
    that the runtime is surely loading it). After each unload, and for three times as long as
    the reference load took (at least 1 s, at most --timeout), modelSize of the id fails and
    ModelInfer does not answer; then a real load of the id works."""
    reference = ctx.new_id("reference")
    began = time.monotonic()
    ctx.load(reference, what="a reference loadModel")
    took = time.monotonic() - began
    meta = attempt(ctx.client.metadata, reference)
    request = None
    if meta.ok:
        try:
            request = tensors.request_for(ctx.client.v2, meta.answer)
        except ValueError:
            pass
    attempt(ctx.client.unload, reference)
    watch = min(max(1.0, 3 * took), ctx.timeout)
    answers = []
    for deadline in (CANCEL_DEADLINE_S, max(CANCEL_DEADLINE_S, took / 4)):
        mid = ctx.new_id()
        cancelled = attempt(ctx.client.load_future(mid, ctx.model, deadline).result)
        answers.append(cancelled.code.name)
        how = f"a load cancelled after {deadline * 1000:.0f} ms ({cancelled.code.name})"
        u = attempt(ctx.client.unload, mid)
        if not u.ok:
            raise Failed(f"unloadModel right after {how} of {mid}: expected OK, got "
                         f"{u.describe()}")
        end = time.monotonic() + watch
        while True:
            s = attempt(ctx.client.size, mid)
            if s.ok:
                raise Failed(f"nothing held after {how} and unloadModel of {mid}; modelSize "
                             f"answered {s.answer}")
            if time.monotonic() >= end:
                break
            time.sleep(0.05)
        if request is not None:
            i = attempt(ctx.client.infer, request, mid)
            if i.ok:
                raise Failed(f"ModelInfer of {mid} to fail after {how} and unloadModel; it "
                             f"answered")
        ctx.load(mid, what=f"a real loadModel after {how}")
    return f"the cancelled loads answered {', '.join(answers)}; each watched {watch:.1f} s"


def check_honest_sizes(ctx):
    """Needs --exec. After one warm-up load (not counted), loads N more distinct ids of the
    model, N = min(50, 64 MiB / max(reported size, file size)) within 80% of the capacity, and
    compares the sizes reported for them with the growth of the runtime's resident memory:
    reported >= 0.5 * growth - 8 MiB, or the runtime under-reports."""
    proc = ctx.need_process()
    warm = ctx.new_id("warm-up")
    first = ctx.load(warm, what="a warm-up loadModel")
    estimate = max(first, ctx.model.file_bytes(), 1)
    n = min(HONEST_MAX_LOADS, max(1, math.ceil(HONEST_TARGET / estimate)))
    capacity = ctx.limits().capacityInBytes
    if capacity:
        n = max(1, min(n, int(0.8 * capacity) // estimate - 1))
    base = proc.settled_resident()
    reported = 0
    for _ in range(n):
        reported += ctx.load(ctx.new_id())
    growth = proc.settled_resident() - base
    allowed = HONEST_RATIO * growth - HONEST_SLACK
    summary = (f"{n} loads reported {fmt_bytes(reported)}; resident memory grew "
               f"{fmt_bytes(growth)}")
    if reported < allowed:
        raise Failed(f"reported sizes >= {HONEST_RATIO:g} x growth - "
                     f"{fmt_bytes(HONEST_SLACK)} = {fmt_bytes(int(allowed))}; {summary}")
    return summary


def check_concurrency(ctx):
    """maxLoadingConcurrency loads of distinct ids at once (at most 16) all answer OK; then 16
    ModelInfer calls at once on a loaded model all answer OK."""
    k = max(1, min(ctx.limits().maxLoadingConcurrency, CONCURRENT_LOADS_MAX))
    ids = [ctx.new_id() for _ in range(k)]
    with concurrent.futures.ThreadPoolExecutor(max(k, CONCURRENT_INFERENCES)) as pool:
        loads = list(pool.map(lambda mid: attempt(ctx.client.load, mid, ctx.model), ids))
        bad = [(mid, o) for mid, o in zip(ids, loads) if not o.ok]
        if bad:
            raise Failed(f"{k} loads at once to answer OK; {len(bad)} failed, e.g. {bad[0][0]}: "
                         f"{bad[0][1].describe()}")
        meta = attempt(ctx.client.metadata, ids[0])
        if not meta.ok:
            raise Failed(f"ModelMetadata of {ids[0]}: expected OK, got {meta.describe()}")
        try:
            request = tensors.request_for(ctx.client.v2, meta.answer)
        except ValueError as e:
            raise Failed(f"ModelMetadata of {ids[0]}: {e}")
        targets = [ids[i % k] for i in range(CONCURRENT_INFERENCES)]
        answers = list(pool.map(lambda mid: attempt(ctx.client.infer, request, mid), targets))
    bad = [(mid, o) for mid, o in zip(targets, answers) if not o.ok]
    if bad:
        raise Failed(f"{CONCURRENT_INFERENCES} inferences at once to answer; {len(bad)} failed, "
                     f"e.g. {bad[0][0]}: {bad[0][1].describe()}")
    return f"{k} loads, {CONCURRENT_INFERENCES} inferences at once"
