#!/usr/bin/python3
"""lying_runtime.py: a small but real model runtime for tests. It serves ModelMesh's model-runtime
interface (mmesh.ModelRuntime: loadModel, unloadModel, predictModelSize, modelSize,
runtimeStatus) and KServe V2 inference (inference.GRPCInferenceService: ModelMetadata,
ModelInfer, ServerLive, ServerReady, ModelReady) on one gRPC address, for one model type:

  echo   a file (or a directory: its files' bytes together) of N bytes. Loading it makes the
         runtime hold N bytes of memory, allocated and every page written (resident), reported as
         its size. Input 'input' FP32 [-1, 4]; output 'output' FP32 [-1, 4] = input * 2. The
         file's content is not read.

Honest by default; each fault flag breaks one promise of the contract (docs/conformance.md), so
that the conformance suite (tools/spi-conformance) and warmd's tests can watch it being caught.
The flags are used by other tests: keep them stable.

  --address ADDR         where to listen, unix:PATH or host:port (default $WARM_GRPC_ADDRESS)
  --schemas DIR          where model_runtime_pb2.py and kserve_v2_pb2.py are (default
                         $WARM_SCHEMAS_DIR, else build/schemas beside this source tree)
  --capacity SIZE        capacityInBytes in runtimeStatus: bytes, or 512MiB, 1GiB, ...
                         (default 1GiB; not enforced)
  --loading-concurrency N  maxLoadingConcurrency (default 4)
  --start-delay S        seconds of STARTING before READY (default 0.5)
  --repo DIR             accepted and ignored (the real runtime's flag; also $WARM_RUNTIME_REPOS)
  --capacity-file FILE   capacityInBytes read from FILE (a size, as --capacity) at every status,
                         --capacity when it cannot be read: an orchestrator resizing the runtime
  --load-timeout-ms N    modelLoadingTimeoutMs in runtimeStatus (default 0; not enforced here:
                         the cache must give up a load that takes longer)
  --max-concurrency N    limitModelConcurrency, and each load answers maxConcurrency N; an
                         inference of a model that already runs N fails RESOURCE_EXHAUSTED (the
                         cache must hold the rest back)
  --infer-delay S        every inference takes S seconds
  Faults:
  --lie-size             every size answered (loadModel, modelSize) is 1 KiB, whatever is held
  --keep-after-unload    unloadModel answers OK and does nothing: the model stays held and served
  --never-ready          runtimeStatus answers STARTING forever (everything else works)
  --ready-then-starting  READY for 0.5 s after the first READY answer, then STARTING again
  --ignore-cancel        a load whose call is cancelled, or whose id is unloaded while it loads,
                         completes anyway and stays held (use --slow-load to make the load last
                         long enough for a cancel to arrive during it)
  --double-load          loading a loaded id again holds another copy and adds its size
  --slow-load S          every load takes S seconds more (a cancel or unload stops the wait)
  --bad-output           ModelInfer answers 4 bytes fewer than the output's shape takes

Errors: an unknown type, an empty id or a path that does not exist: INVALID_ARGUMENT (nothing
held); an id not loaded: NOT_FOUND (modelSize, inference); a cancelled load: CANCELLED. SIGTERM
or SIGINT stop it (exit 0); exit 2 for bad flags.
"""
import argparse
import array
import concurrent.futures
import os
import signal
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
LIE_BYTES = 1024
ID_HEADER = "mm-model-id"


def parse_size(text):
    """'4096', '512MiB', '1GiB', '2G' (as warm-pyruntime's --capacity) to bytes."""
    units = {"": 1, "B": 1, "K": 1000, "KB": 1000, "KIB": 1 << 10, "M": 1000**2, "MB": 1000**2,
             "MIB": 1 << 20, "G": 1000**3, "GB": 1000**3, "GIB": 1 << 30}
    number = text.rstrip("KMGBikmgb")
    try:
        return int(float(number) * units[text[len(number):].upper()])
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 4096, 512MiB, 1GiB)")


def parse(argv):
    p = argparse.ArgumentParser(prog="lying_runtime.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--address", default=os.environ.get("WARM_GRPC_ADDRESS", ""))
    p.add_argument("--schemas", default=os.environ.get("WARM_SCHEMAS_DIR", ""))
    p.add_argument("--capacity", type=parse_size, default=1 << 30)
    p.add_argument("--loading-concurrency", type=int, default=4)
    p.add_argument("--start-delay", type=float, default=0.5)
    p.add_argument("--repo", action="append", default=[])
    p.add_argument("--capacity-file", default="")
    p.add_argument("--load-timeout-ms", type=int, default=0)
    p.add_argument("--max-concurrency", type=int, default=0)
    p.add_argument("--infer-delay", type=float, default=0.0)
    p.add_argument("--lie-size", action="store_true")
    p.add_argument("--keep-after-unload", action="store_true")
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--ready-then-starting", action="store_true")
    p.add_argument("--ignore-cancel", action="store_true")
    p.add_argument("--double-load", action="store_true")
    p.add_argument("--slow-load", type=float, default=0.0)
    p.add_argument("--bad-output", action="store_true")
    a = p.parse_args(argv)
    if not a.address:
        p.error("no address: give --address or set WARM_GRPC_ADDRESS")
    return a


def model_bytes(path):
    """The bytes of a file, or of every file under a directory."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def hold(n):
    """n bytes of memory, every page written so that it is resident."""
    buf = bytearray(n)
    if n:
        buf[::PAGE] = b"\x01" * len(range(0, n, PAGE))
    return buf


class Entry:
    """One model id: loading (done unset) or loaded; guarded by Runtime.lock."""

    def __init__(self):
        self.buffers = []
        self.size = 0
        self.cancelled = False
        self.loaded = False
        self.running = 0  # inferences in progress
        self.done = threading.Event()


class Runtime:
    def __init__(self, opts, mm, v2, grpc):
        self.o, self.mm, self.v2, self.grpc = opts, mm, v2, grpc
        self.lock = threading.Lock()
        self.entries = {}
        self.started = time.monotonic()
        self.first_ready = None

    # --- mmesh.ModelRuntime ---

    def runtime_status(self, request, context):
        S = self.mm.RuntimeStatusResponse
        now = time.monotonic()
        status = S.STARTING
        if not self.o.never_ready and now - self.started >= self.o.start_delay:
            with self.lock:
                if self.first_ready is None:
                    self.first_ready = now
                first = self.first_ready
            status = S.READY
            if self.o.ready_then_starting and now - first > 0.5:
                status = S.STARTING
        capacity = self.o.capacity
        if self.o.capacity_file:
            try:
                with open(self.o.capacity_file) as f:
                    capacity = parse_size(f.read().strip())
            except (OSError, argparse.ArgumentTypeError):
                pass
        return S(status=status, capacityInBytes=capacity,
                 maxLoadingConcurrency=self.o.loading_concurrency,
                 modelLoadingTimeoutMs=self.o.load_timeout_ms,
                 limitModelConcurrency=self.o.max_concurrency > 0,
                 defaultModelSizeInBytes=1 << 20, runtimeVersion="lying_runtime 1")

    def _check_load(self, request, context):
        if request.modelType != "echo":
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT,
                          f"type {request.modelType!r}: only 'echo' is served")
        if not request.modelId:
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, "no modelId")
        if not os.path.exists(request.modelPath):
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT,
                          f"{request.modelPath}: no such file")
        return model_bytes(request.modelPath)

    def load_model(self, request, context):
        n = self._check_load(request, context)
        mid = request.modelId
        with self.lock:
            e = self.entries.get(mid)
            if e is not None and e.loaded:
                if self.o.double_load:
                    e.buffers.append(hold(n))
                    e.size += n
                return self._load_response(e)
            joining = e is not None
            if not joining:
                e = self.entries[mid] = Entry()
        if joining:  # another call loads it: answer what that load answers
            e.done.wait()
            with self.lock:
                if self.entries.get(mid) is e and e.loaded:
                    return self._load_response(e)
            context.abort(self.grpc.StatusCode.CANCELLED, f"the load of {mid} was given up")

        def on_end():  # the call ended: answered, or cancelled by its client
            if not self.o.ignore_cancel:
                with self.lock:
                    if not e.loaded:
                        e.cancelled = True
        context.add_callback(on_end)
        deadline = time.monotonic() + self.o.slow_load
        while time.monotonic() < deadline and not (e.cancelled and not self.o.ignore_cancel):
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
        buf = hold(n)
        with self.lock:
            if e.cancelled and not self.o.ignore_cancel:
                if self.entries.get(mid) is e:
                    del self.entries[mid]
                buf = None
            else:
                e.buffers, e.size, e.loaded = [buf], n, True
                self.entries[mid] = e  # --ignore-cancel: back even when unloaded meanwhile
            e.done.set()
        if buf is None:
            context.abort(self.grpc.StatusCode.CANCELLED, f"the load of {mid} was cancelled")
        return self._load_response(e)

    def _load_response(self, e):
        return self.mm.LoadModelResponse(sizeInBytes=self._reported(e),
                                         maxConcurrency=self.o.max_concurrency)

    def _reported(self, e):
        return LIE_BYTES if self.o.lie_size else e.size

    def unload_model(self, request, context):
        if self.o.keep_after_unload:
            return self.mm.UnloadModelResponse()
        with self.lock:
            e = self.entries.pop(request.modelId, None)
            if e is not None and not e.loaded and not self.o.ignore_cancel:
                e.cancelled = True
        if e is not None:
            e.done.wait(30)  # its memory is returned when unload answers
        return self.mm.UnloadModelResponse()

    def predict_model_size(self, request, context):
        return self.mm.PredictModelSizeResponse(sizeInBytes=self._check_load(request, context))

    def _loaded(self, mid, context):
        with self.lock:
            e = self.entries.get(mid)
            if e is not None and e.loaded:
                return e
        context.abort(self.grpc.StatusCode.NOT_FOUND, f"model {mid!r} is not loaded")

    def model_size(self, request, context):
        return self.mm.ModelSizeResponse(
            sizeInBytes=self._reported(self._loaded(request.modelId, context)))

    # --- inference.GRPCInferenceService ---

    def _model_id(self, name, context):
        if name:
            return name
        for key, value in context.invocation_metadata() or ():
            if key == ID_HEADER and value:
                return value
        context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, f"no model name and no {ID_HEADER}")

    def model_metadata(self, request, context):
        mid = self._model_id(request.name, context)
        self._loaded(mid, context)
        r = self.v2.ModelMetadataResponse(name=mid, platform="echo")
        r.inputs.add(name="input", datatype="FP32", shape=[-1, 4])
        r.outputs.add(name="output", datatype="FP32", shape=[-1, 4])
        return r

    def model_infer(self, request, context):
        mid = self._model_id(request.model_name, context)
        e = self._loaded(mid, context)
        with self.lock:
            if self.o.max_concurrency and e.running >= self.o.max_concurrency:
                context.abort(self.grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"model {mid} already runs {e.running} inferences, its "
                              f"maxConcurrency")
            e.running += 1
        try:
            if self.o.infer_delay:
                time.sleep(self.o.infer_delay)
            return self._echo(mid, request, context)
        finally:
            with self.lock:
                e.running -= 1

    def _echo(self, mid, request, context):
        bad = self.grpc.StatusCode.INVALID_ARGUMENT
        if len(request.inputs) != 1:
            context.abort(bad, "echo takes one input, 'input' FP32 [-1, 4]")
        t = request.inputs[0]
        if t.datatype != "FP32" or len(t.shape) != 2 or t.shape[1] != 4 or t.shape[0] < 0:
            context.abort(bad, f"echo takes 'input' FP32 [-1, 4], got {t.datatype} {list(t.shape)}")
        x = array.array("f")
        if request.raw_input_contents:
            raw = request.raw_input_contents[0]
            if len(raw) != t.shape[0] * 16:
                context.abort(bad, f"FP32 {list(t.shape)} takes {t.shape[0] * 16} bytes")
            x.frombytes(raw)
            if sys.byteorder == "big":
                x.byteswap()
        else:
            x.extend(t.contents.fp32_contents)
            if len(x) != t.shape[0] * 4:
                context.abort(bad, f"FP32 {list(t.shape)} takes {t.shape[0] * 4} elements")
        y = array.array("f", (v * 2 for v in x))
        if sys.byteorder == "big":
            y.byteswap()
        out = y.tobytes()
        if self.o.bad_output:
            out = out[:-4] if out else b"\0\0\0"
        r = self.v2.ModelInferResponse(model_name=mid, id=request.id)
        r.outputs.add(name="output", datatype="FP32", shape=[t.shape[0], 4])
        r.raw_output_contents.append(out)
        return r

    def handlers(self):
        grpc, mm, v2 = self.grpc, self.mm, self.v2

        def unary(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
        runtime = grpc.method_handlers_generic_handler("mmesh.ModelRuntime", {
            "loadModel": unary(self.load_model, mm.LoadModelRequest, mm.LoadModelResponse),
            "unloadModel": unary(self.unload_model, mm.UnloadModelRequest, mm.UnloadModelResponse),
            "predictModelSize": unary(self.predict_model_size, mm.PredictModelSizeRequest,
                                      mm.PredictModelSizeResponse),
            "modelSize": unary(self.model_size, mm.ModelSizeRequest, mm.ModelSizeResponse),
            "runtimeStatus": unary(self.runtime_status, mm.RuntimeStatusRequest,
                                   mm.RuntimeStatusResponse),
        })
        inference = grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
            "ServerLive": unary(lambda r, c: v2.ServerLiveResponse(live=True),
                                v2.ServerLiveRequest, v2.ServerLiveResponse),
            "ServerReady": unary(lambda r, c: v2.ServerReadyResponse(ready=True),
                                 v2.ServerReadyRequest, v2.ServerReadyResponse),
            "ModelReady": unary(self.model_ready, v2.ModelReadyRequest, v2.ModelReadyResponse),
            "ModelMetadata": unary(self.model_metadata, v2.ModelMetadataRequest,
                                   v2.ModelMetadataResponse),
            "ModelInfer": unary(self.model_infer, v2.ModelInferRequest, v2.ModelInferResponse),
        })
        return (runtime, inference)

    def model_ready(self, request, context):
        with self.lock:
            e = self.entries.get(request.name)
            return self.v2.ModelReadyResponse(ready=e is not None and e.loaded)


def main(argv):
    opts = parse(argv)
    schemas = opts.schemas or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                           "..", "..", "build", "schemas")
    sys.path.insert(0, schemas)
    import grpc
    import kserve_v2_pb2 as v2
    import model_runtime_pb2 as mm

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    runtime = Runtime(opts, mm, v2, grpc)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(64),
                         handlers=runtime.handlers(),
                         options=[("grpc.so_reuseport", 0),
                                  ("grpc.max_receive_message_length", 64 << 20),
                                  ("grpc.max_send_message_length", 64 << 20)])
    if server.add_insecure_port(opts.address) == 0:
        print(f"lying_runtime: cannot listen on {opts.address}", file=sys.stderr)
        return 1
    server.start()
    while not stop.wait(0.2):
        pass
    server.stop(grace=1).wait(3)
    if opts.address.startswith("unix:"):
        try:
            os.unlink(opts.address[len("unix:"):])
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
