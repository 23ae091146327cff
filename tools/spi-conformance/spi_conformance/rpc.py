"""The runtime seen over gRPC: one channel, the five model-runtime methods and the two V2 methods
the suite calls, each a plain function of a request message. Errors are grpc.RpcError; `attempt`
turns a call into an Outcome (an answer or a status code) so that checks can compare both."""

import dataclasses

import grpc

ID_HEADER = "mm-model-id"
MAX_MESSAGE = 64 << 20


@dataclasses.dataclass
class Outcome:
    """An answer (code OK) or a failed call's status code and details."""
    code: grpc.StatusCode
    answer: object = None
    details: str = ""

    @property
    def ok(self):
        return self.code == grpc.StatusCode.OK

    def describe(self):
        return "OK" if self.ok else f"{self.code.name} ({self.details})"


def attempt(fn, *args, **kwargs):
    """fn(*args, **kwargs) as an Outcome; a grpc.RpcError is its code, never raised."""
    try:
        return Outcome(grpc.StatusCode.OK, fn(*args, **kwargs))
    except grpc.RpcError as e:
        return Outcome(e.code(), None, e.details() or "")


class Client:
    """Calls on one runtime's address. `timeout` (seconds) is every call's deadline unless a call
    gives its own. Thread-safe: gRPC channels are."""

    def __init__(self, address, mm, v2, timeout):
        self.mm, self.v2, self.timeout = mm, v2, timeout
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE)])

        def method(service, name, req, resp):
            return self.channel.unary_unary(f"/{service}/{name}",
                                            request_serializer=req.SerializeToString,
                                            response_deserializer=resp.FromString)
        r = "mmesh.ModelRuntime"
        self._load = method(r, "loadModel", mm.LoadModelRequest, mm.LoadModelResponse)
        self._unload = method(r, "unloadModel", mm.UnloadModelRequest, mm.UnloadModelResponse)
        self._predict = method(r, "predictModelSize", mm.PredictModelSizeRequest,
                               mm.PredictModelSizeResponse)
        self._size = method(r, "modelSize", mm.ModelSizeRequest, mm.ModelSizeResponse)
        self._status = method(r, "runtimeStatus", mm.RuntimeStatusRequest,
                              mm.RuntimeStatusResponse)
        i = "inference.GRPCInferenceService"
        self._metadata = method(i, "ModelMetadata", v2.ModelMetadataRequest,
                                v2.ModelMetadataResponse)
        self._infer = method(i, "ModelInfer", v2.ModelInferRequest, v2.ModelInferResponse)

    def close(self):
        self.channel.close()

    def _t(self, timeout):
        return self.timeout if timeout is None else timeout

    def load_request(self, model_id, model):
        return self.mm.LoadModelRequest(modelId=model_id, modelType=model.type,
                                        modelPath=model.path, modelKey=model.key)

    def load(self, model_id, model, timeout=None):
        return self._load(self.load_request(model_id, model), timeout=self._t(timeout))

    def load_future(self, model_id, model, timeout):
        """A load left running: the future's result() is the answer or raises grpc.RpcError."""
        return self._load.future(self.load_request(model_id, model), timeout=timeout)

    def loaded_size(self, model_id, model, timeout=None):
        """Loads and answers the model's size: sizeInBytes, or modelSize when that is 0."""
        size = self.load(model_id, model, timeout).sizeInBytes
        return size if size else self.size(model_id)

    def unload(self, model_id, timeout=None):
        return self._unload(self.mm.UnloadModelRequest(modelId=model_id), timeout=self._t(timeout))

    def predict_size(self, model_id, model):
        return self._predict(self.mm.PredictModelSizeRequest(
            modelId=model_id, modelType=model.type, modelPath=model.path, modelKey=model.key),
            timeout=self.timeout).sizeInBytes

    def size(self, model_id):
        return self._size(self.mm.ModelSizeRequest(modelId=model_id),
                          timeout=self.timeout).sizeInBytes

    def status(self, timeout=None):
        return self._status(self.mm.RuntimeStatusRequest(), timeout=self._t(timeout))

    def metadata(self, model_id):
        return self._metadata(self.v2.ModelMetadataRequest(name=model_id), timeout=self.timeout,
                              metadata=((ID_HEADER, model_id),))

    def infer(self, request, model_id, by_header=False):
        """ModelInfer of request for model_id: named in model_name and the mm-model-id header,
        or (by_header) in the header only, model_name empty."""
        r = self.v2.ModelInferRequest()
        r.CopyFrom(request)
        r.model_name = "" if by_header else model_id
        return self._infer(r, timeout=self.timeout, metadata=((ID_HEADER, model_id),))
