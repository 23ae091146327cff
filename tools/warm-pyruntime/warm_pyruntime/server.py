"""The two gRPC services on one address (docs/pyruntime.md): mmesh.ModelRuntime (loads, sizes,
status) and inference.GRPCInferenceService (KServe V2: metadata and ModelInfer). The only module
that knows gRPC: it reads requests, calls ModelTable and tensors, and turns a Failure into its
status once, in _wrap. The message modules are build/schemas' model_runtime_pb2 and
kserve_v2_pb2 (meson's python-protos target)."""

import logging
import threading

import grpc

import kserve_v2_pb2 as v2
import model_runtime_pb2 as mm

from . import VERSION, tensors
from .errors import Failure, INTERNAL, UNAVAILABLE, invalid
from .models import ModelTable

log = logging.getLogger("warm-pyruntime")

_CODES = {k: getattr(grpc.StatusCode, k) for k in
          ("NOT_FOUND", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED",
           "UNAVAILABLE", "CANCELLED", "INTERNAL")}
READY_WAIT_S = 60.0  # how long a load that arrives while starting waits for READY
ID_HEADER = "mm-model-id"


def _wrap(fn):
    """A handler that answers fn's Failure as its status, and anything else as INTERNAL."""
    def handler(request, context):
        try:
            return fn(request, context)
        except Failure as f:
            failure = f
        except Exception as ex:
            log.exception("%s failed", fn.__name__)
            failure = Failure(INTERNAL, f"{type(ex).__name__}: {ex}")
        context.abort(_CODES[failure.kind], failure.message)
    return handler


class Services:
    """The runtime's state as both services see it. STARTING until become_ready is given the
    loader registry (READY) or learns that no framework imported (FAILING). Thread-safe."""

    def __init__(self, options):
        self._options = options
        self._started = threading.Event()
        self._status = mm.RuntimeStatusResponse.STARTING
        self._version = f"warm-pyruntime {VERSION}"
        self._registry = None
        self.table = None
        # Predictions at once: --threads. The gRPC pool is larger (__main__.worker_count), so
        # that requests waiting here leave workers for status, loads and unloads.
        self._predicting = threading.BoundedSemaphore(options.threads)

    def become_ready(self, registry):
        """Called once, after the frameworks were imported: READY when any loader is there."""
        self._registry = registry
        self.table = ModelTable(registry, self._options)
        names = {"sklearn": "scikit-learn", "xgboost": "xgboost"}
        parts = [f"{names.get(n, n)} {registry.get(n).version()}" for n in registry.names()]
        self._version = f"warm-pyruntime {VERSION} ({', '.join(parts)})"
        self._status = (mm.RuntimeStatusResponse.READY if registry.names()
                        else mm.RuntimeStatusResponse.FAILING)
        self._started.set()

    def close(self):
        if self.table is not None:
            self.table.close()

    def handlers(self):
        def unary(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(
                _wrap(fn), request_deserializer=req.FromString,
                response_serializer=resp.SerializeToString)
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
            "ServerLive": unary(self.server_live, v2.ServerLiveRequest, v2.ServerLiveResponse),
            "ServerReady": unary(self.server_ready, v2.ServerReadyRequest, v2.ServerReadyResponse),
            "ModelReady": unary(self.model_ready, v2.ModelReadyRequest, v2.ModelReadyResponse),
            "ServerMetadata": unary(self.server_metadata, v2.ServerMetadataRequest,
                                    v2.ServerMetadataResponse),
            "ModelMetadata": unary(self.model_metadata, v2.ModelMetadataRequest,
                                   v2.ModelMetadataResponse),
            "ModelInfer": unary(self.model_infer, v2.ModelInferRequest, v2.ModelInferResponse),
            "RepositoryIndex": unary(self.repository_index, v2.RepositoryIndexRequest,
                                     v2.RepositoryIndexResponse),
        })
        return (runtime, inference)

    # --- mmesh.ModelRuntime ---

    def _table(self, wait=False):
        if wait:
            self._started.wait(READY_WAIT_S)
        if self._status != mm.RuntimeStatusResponse.READY:
            raise Failure(UNAVAILABLE, "warm-pyruntime is " + (
                "starting" if self._status == mm.RuntimeStatusResponse.STARTING else
                f"failing: no framework imported ({self._registry.failed})"))
        return self.table

    def runtime_status(self, request, context):
        o = self._options
        return mm.RuntimeStatusResponse(
            status=self._status, capacityInBytes=o.capacity,
            maxLoadingConcurrency=o.loading_threads, modelLoadingTimeoutMs=o.load_timeout_ms,
            defaultModelSizeInBytes=o.default_model_size, runtimeVersion=self._version,
            limitModelConcurrency=True)

    def load_model(self, request, context):
        table = self._table(wait=True)
        entry = table.load(request.modelId, request.modelType, request.modelPath,
                           request.modelKey)
        answered = threading.Event()

        def on_end():  # called when the call ends: answered, or cancelled by its client first
            if not answered.is_set():
                table.cancel_wait(entry)
        if not context.add_callback(on_end):
            on_end()
        try:
            size = table.wait(entry)
        finally:
            answered.set()
        return mm.LoadModelResponse(sizeInBytes=size, maxConcurrency=self._options.threads)

    def unload_model(self, request, context):
        if self.table is not None:
            self.table.unload(request.modelId)
        return mm.UnloadModelResponse()

    def predict_model_size(self, request, context):
        size = self._table(wait=True).predict_size(request.modelType, request.modelPath,
                                                   request.modelKey)
        return mm.PredictModelSizeResponse(sizeInBytes=size)

    def model_size(self, request, context):
        return mm.ModelSizeResponse(sizeInBytes=self._table().size(request.modelId))

    # --- inference.GRPCInferenceService ---

    def server_live(self, request, context):
        return v2.ServerLiveResponse(live=True)

    def server_ready(self, request, context):
        return v2.ServerReadyResponse(ready=self._status == mm.RuntimeStatusResponse.READY)

    def server_metadata(self, request, context):
        return v2.ServerMetadataResponse(name="warm-pyruntime", version=VERSION)

    def model_ready(self, request, context):
        try:
            self._table().get(self._model_id(request.name, context))
            return v2.ModelReadyResponse(ready=True)
        except Failure:
            return v2.ModelReadyResponse(ready=False)

    def repository_index(self, request, context):
        r = v2.RepositoryIndexResponse()
        for model_id, state in (self.table.loaded() if self.table else []):
            if state == "loaded" or not request.ready:
                r.models.add(name=model_id, state="READY" if state == "loaded" else "LOADING")
        return r

    def model_metadata(self, request, context):
        model_id = self._model_id(request.name, context)
        model = self._table().get(model_id)
        r = v2.ModelMetadataResponse(name=model_id, platform=model.platform)
        for spec in model.inputs:
            r.inputs.add(name=spec.name, datatype=spec.datatype, shape=spec.shape)
        for spec in model.outputs:
            r.outputs.add(name=spec.name, datatype=spec.datatype, shape=spec.shape)
        return r

    def model_infer(self, request, context):
        model_id = self._model_id(request.model_name, context)
        model = self._table().get(model_id)
        x = tensors.read_input(request, model.inputs[0], model_id)
        declared = {spec.name: spec for spec in model.outputs}
        if request.outputs:
            names = [o.name for o in request.outputs]
            for name in names:
                if name not in declared:
                    raise invalid(f"model {model_id} has outputs {', '.join(declared)}; "
                                  f"got '{name}'")
            if len(set(names)) != len(names):
                raise invalid(f"model {model_id}: an output is asked for twice")
        else:
            names = list(declared)
        specs = [declared[n] for n in names]
        rows = x.shape[0]
        if rows == 0:
            arrays = [tensors.empty_output(s) for s in specs]
        else:
            try:
                with self._predicting:
                    # A writable copy: some models scale their input in place.
                    result = model.predict(x.copy(), names)
            except ValueError as ex:
                raise invalid(f"model {model_id}: {ex}")
            except Exception as ex:
                raise Failure(INTERNAL, f"model {model_id} failed: {type(ex).__name__}: {ex}")
            arrays = [tensors.check_output(s, result[s.name], rows, model_id) for s in specs]
        r = v2.ModelInferResponse(model_name=model_id, id=request.id)
        tensors.write_outputs(r, specs, arrays)
        return r

    def _model_id(self, name, context):
        """name, or the mm-model-id header when name is empty."""
        if name:
            return name
        for key, value in context.invocation_metadata() or ():
            if key == ID_HEADER and value:
                return value
        raise invalid(f"no model name and no {ID_HEADER} header")
