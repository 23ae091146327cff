"""The checks of single calls and their answers (docs/conformance.md): status, load,
metadata-infer, load-twice, unload, sizes, bad-input. Each is independent: it makes its own ids
and the runner unloads them after it."""

import os
import time

import grpc

from . import tensors
from .context import Failed, expect_error, fmt_bytes
from .rpc import attempt

STATUS_SETTLE_S = 2.0   # how long after the first READY the status must stay READY
TWICE_SLACK = 4 << 20   # resident growth below this on a second load is noise, not a copy


def check_status(ctx):
    """From the start: UNAVAILABLE (not listening yet) or STARTING, then READY, never anything
    else after; READY with capacityInBytes > 0 and maxLoadingConcurrency >= 1."""
    ready = ctx.watcher.wait_ready(ctx.timeout, ctx.process)
    seen = ctx.watcher.seen()
    if ready is None:
        raise Failed(f"READY within {ctx.timeout:g} s; runtimeStatus answered "
                     f"{' -> '.join(name for _, name in seen) or 'nothing'}")
    first = next(t for t, name in seen if name == "READY")
    time.sleep(max(0.0, first + STATUS_SETTLE_S - time.monotonic()))
    names = [name for _, name in ctx.watcher.seen()]
    at = names.index("READY")
    before = [n for n in names[:at] if n not in ("UNAVAILABLE", "STARTING")]
    after = [n for n in names[at:] if n != "READY"]
    if before or after:
        raise Failed(f"STARTING (or UNAVAILABLE) then READY and never back; runtimeStatus "
                     f"answered {' -> '.join(names)}")
    if ready.capacityInBytes <= 0 or ready.maxLoadingConcurrency < 1:
        raise Failed(f"READY with capacityInBytes > 0 and maxLoadingConcurrency >= 1; got "
                     f"capacityInBytes {ready.capacityInBytes}, maxLoadingConcurrency "
                     f"{ready.maxLoadingConcurrency}")
    return (f"{' -> '.join(names)}; capacity {fmt_bytes(ready.capacityInBytes)}, "
            f"{ready.maxLoadingConcurrency} loads at once")


def check_load(ctx):
    """loadModel answers OK with a size (sizeInBytes, or modelSize when 0) > 0, and modelSize of
    the loaded id equals it."""
    mid = ctx.new_id()
    size = ctx.load(mid)
    o = attempt(ctx.client.size, mid)
    if not o.ok or o.answer != size:
        raise Failed(f"modelSize of loaded {mid}: expected {size}, got "
                     f"{o.answer if o.ok else o.describe()}")
    return fmt_bytes(size)


def check_metadata_infer(ctx):
    """ModelMetadata declares inputs and outputs; ModelInfer with zero-filled inputs of the
    declared datatypes and shapes (-1 = 2 rows) answers every declared output with a fitting
    shape and as many bytes as that shape takes; the same request named only by the mm-model-id
    header (model_name empty) answers the same."""
    mid = ctx.new_id()
    ctx.load(mid)
    o = attempt(ctx.client.metadata, mid)
    if not o.ok:
        raise Failed(f"ModelMetadata of loaded {mid}: expected OK, got {o.describe()}")
    meta = o.answer
    if not meta.inputs or not meta.outputs:
        raise Failed(f"ModelMetadata of {mid}: expected inputs and outputs, got "
                     f"{len(meta.inputs)} inputs, {len(meta.outputs)} outputs")
    try:
        request = tensors.request_for(ctx.client.v2, meta)
    except ValueError as e:
        raise Failed(f"ModelMetadata of {mid}: {e}")
    what = ", ".join(tensors.describe(t) for t in request.inputs)
    o = attempt(ctx.client.infer, request, mid)
    if not o.ok:
        raise Failed(f"ModelInfer of {mid} with {what}: expected OK, got {o.describe()}")
    problems = tensors.output_problems(meta, o.answer)
    if problems:
        raise Failed(f"ModelInfer of {mid} with {what}: " + "; ".join(problems))
    h = attempt(ctx.client.infer, request, mid, by_header=True)
    if not h.ok:
        raise Failed(f"ModelInfer with model_name empty and {mid} in mm-model-id: expected OK, "
                     f"got {h.describe()}")
    if not tensors.same_answer(o.answer, h.answer):
        raise Failed(f"ModelInfer by mm-model-id: expected the answer given by model_name, got "
                     f"another ({[tensors.describe(t) for t in h.answer.outputs]})")
    return f"{what} -> " + ", ".join(tensors.describe(t) for t in o.answer.outputs)


def check_load_twice(ctx):
    """A second loadModel of a loaded id answers OK with the same size, modelSize is unchanged,
    and (with --exec) resident memory grows by less than half the model's size (or 4 MiB)."""
    mid = ctx.new_id()
    size = ctx.load(mid)
    before = ctx.process.settled_resident() if ctx.process else None
    again = ctx.load(mid, what="the second loadModel")
    if again != size:
        raise Failed(f"the second loadModel of {mid}: expected the same size {size}, got {again}")
    o = attempt(ctx.client.size, mid)
    if not o.ok or o.answer != size:
        raise Failed(f"modelSize after loading {mid} twice: expected {size}, got "
                     f"{o.answer if o.ok else o.describe()}")
    if before is None:
        return "resident memory not watched (no --exec)"
    growth = ctx.process.settled_resident() - before
    if growth > max(size // 2, TWICE_SLACK):
        raise Failed(f"a second load of {mid} held once: resident memory grew "
                     f"{fmt_bytes(growth)} for a model of {fmt_bytes(size)}")
    return f"resident memory grew {fmt_bytes(growth)}"


def check_unload(ctx):
    """unloadModel answers OK; afterwards ModelInfer and modelSize of the id fail (NOT_FOUND is
    expected, any error is accepted); unloading it again, and an id never loaded, answer OK."""
    mid = ctx.new_id()
    ctx.load(mid)
    meta = attempt(ctx.client.metadata, mid)
    request = None
    if meta.ok:
        try:
            request = tensors.request_for(ctx.client.v2, meta.answer)
        except ValueError:
            pass
    o = attempt(ctx.client.unload, mid)
    if not o.ok:
        raise Failed(f"unloadModel of loaded {mid}: expected OK, got {o.describe()}")
    expect_error(attempt(ctx.client.size, mid), f"modelSize of unloaded {mid}")
    if request is not None:
        expect_error(attempt(ctx.client.infer, request, mid), f"ModelInfer of unloaded {mid}")
    o = attempt(ctx.client.unload, mid)
    if not o.ok:
        raise Failed(f"a second unloadModel of {mid}: expected OK, got {o.describe()}")
    unknown = ctx.new_id("never-loaded")
    o = attempt(ctx.client.unload, unknown)
    if not o.ok:
        raise Failed(f"unloadModel of an id never loaded: expected OK, got {o.describe()}")
    return None if request is not None else "ModelInfer not tried: no usable metadata"


def check_sizes(ctx):
    """predictModelSize answers UNIMPLEMENTED or a size > 0; modelSize of an unknown id fails."""
    mid = ctx.new_id()
    o = attempt(ctx.client.predict_size, mid, ctx.model)
    if o.ok and o.answer <= 0:
        raise Failed(f"predictModelSize of {ctx.model.label}: expected a size > 0 or "
                     f"UNIMPLEMENTED, got 0")
    if not o.ok and o.code != grpc.StatusCode.UNIMPLEMENTED:
        raise Failed(f"predictModelSize of {ctx.model.label}: expected a size > 0 or "
                     f"UNIMPLEMENTED, got {o.describe()}")
    expect_error(attempt(ctx.client.size, ctx.new_id("unknown")), "modelSize of an unknown id")
    return f"predicted {fmt_bytes(o.answer)}" if o.ok else "predictModelSize UNIMPLEMENTED"


def check_bad_input(ctx):
    """loadModel of a path that does not exist (in the model's folder) fails, and the runtime
    still serves: runtimeStatus answers and a real load of the model works."""
    missing = os.path.join(os.path.dirname(ctx.model.path), f"spi-missing-{os.getpid()}")
    bad = type(ctx.model)(ctx.model.type, missing, ctx.model.key)
    mid = ctx.new_id("missing")
    o = attempt(ctx.client.load, mid, bad)
    expect_error(o, f"loadModel of {missing} (no such file)")
    s = attempt(ctx.client.status)
    if not s.ok:
        raise Failed(f"runtimeStatus after a failed load: expected OK, got {s.describe()}")
    if ctx.process is not None and not ctx.process.alive():
        raise Failed(f"the runtime serving after a failed load; it exited "
                     f"({ctx.process.exit_code()})")
    ctx.load(ctx.new_id(), what="loadModel after a failed load")
    return f"{o.code.name}"
