#!/usr/bin/python3
"""warm-pyruntime (docs/pyruntime.md) over the wire: real scikit-learn and XGBoost models made here,
the real build/warm-pyruntime on a unix socket in a temporary folder, driven through gRPC with the
message modules of build/schemas.

Usage: pyruntime_test.py RUNTIME (build/warm-pyruntime; its folder's schemas/ holds the _pb2
modules). Exits 77 (skipped) without python3-grpcio, python3-sklearn, python3-xgboost or joblib.

Covers: status READY and its limits; metadata of every model type (classifiers with integer and
string labels, a pipeline, regressors with one and two targets, a clusterer, XGBoost multi-class,
binary and regression); answers equal to the package's own predict / predict_proba /
Booster.predict on the same inputs (exact for labels, tight for floats), from raw and typed
inputs, with outputs named or not, by model_name and by the mm-model-id header, zero rows; wrong
inputs refused naming what the model expects; NOT_FOUND; paths outside the repository (also
through a symlink) refused; unknown types and key settings; corrupt files, a pickle that raises
and a file that is no booster refused while the server lives on; double load, unload of an
unknown id; sizes (measured >= the model's arrays, modelSize, predictModelSize); capacity
exhausted; a load cancelled by its client then unloaded leaves nothing; the runtime's own load
timeout; 32 concurrent requests; SIGTERM and SIGINT remove the socket; SIGTERM stops the runtime
at once even while a pickle's code hangs in a load; bad flags (exit 2).
"""
import concurrent.futures
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import grpc
    import joblib
    import numpy as np
    import xgboost as xgb
    from sklearn.datasets import load_iris, make_regression
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier
except ImportError as e:
    print(f"pyruntime_test: skipped, {e}")
    sys.exit(77)

runtime = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(runtime), "schemas"))
import kserve_v2_pb2 as v2  # noqa: E402
import model_runtime_pb2 as mm  # noqa: E402

failures = 0
MIB = 1 << 20


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {what}", flush=True)
    return condition


def expect_code(call, code, what, *contains):
    try:
        call()
    except grpc.RpcError as e:
        check(e.code() == code, f"{what}: {e.code()} ({e.details()}), want {code}")
        for c in contains:
            check(c in (e.details() or ""), f"{what}: details {e.details()!r} lack {c!r}")
        return e
    check(False, f"{what}: succeeded, want {code}")


class Client:
    """Both services' methods on one channel, as callables taking (request, **call options)."""

    def __init__(self, address):
        self.channel = grpc.insecure_channel(address)
        for service, module, methods in (
                ("mmesh.ModelRuntime", mm, {
                    "loadModel": "LoadModel", "unloadModel": "UnloadModel",
                    "predictModelSize": "PredictModelSize", "modelSize": "ModelSize",
                    "runtimeStatus": "RuntimeStatus"}),
                ("inference.GRPCInferenceService", v2, {
                    m: m for m in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata",
                                   "ModelMetadata", "ModelInfer", "RepositoryIndex")})):
            for method, base in methods.items():
                setattr(self, method, self.channel.unary_unary(
                    f"/{service}/{method}",
                    request_serializer=getattr(module, base + "Request").SerializeToString,
                    response_deserializer=getattr(module, base + "Response").FromString))

    def load(self, model_id, model_type, path, key="", timeout=60):
        return self.loadModel(mm.LoadModelRequest(modelId=model_id, modelType=model_type,
                                                  modelPath=path, modelKey=key), timeout=timeout)

    def unload(self, model_id):
        return self.unloadModel(mm.UnloadModelRequest(modelId=model_id), timeout=60)

    def status(self):
        return self.runtimeStatus(mm.RuntimeStatusRequest(), timeout=10)

    def infer(self, model_id, x, datatype, typed=None, outputs=(), header=False, shape=None):
        """Outputs {name: array} of a ModelInfer with x raw (or typed: the contents list)."""
        r = v2.ModelInferRequest(model_name="" if header else model_id, id="req-1")
        t = r.inputs.add(name="input", datatype=datatype,
                         shape=list(x.shape) if shape is None else shape)
        if typed:
            getattr(t.contents, typed).extend(x.ravel().tolist())
        else:
            r.raw_input_contents.append(np.ascontiguousarray(x).tobytes())
        for name in outputs:
            r.outputs.add(name=name)
        meta = [("mm-model-id", model_id)] if header else None
        resp = self.ModelInfer(r, timeout=60, metadata=meta)
        check(resp.id == "req-1" and resp.model_name == model_id, f"{model_id}: id and name echoed")
        dtypes = {"FP32": "<f4", "FP64": "<f8", "INT64": "<i8", "INT32": "<i4"}
        out = {}
        for o, raw in zip(resp.outputs, resp.raw_output_contents):
            out[o.name] = np.frombuffer(raw, dtype=dtypes[o.datatype]).reshape(list(o.shape))
        check(len(resp.outputs) == len(resp.raw_output_contents), "one raw entry per output")
        return resp, out


def start(tmp, name, repo, *flags):
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen([runtime, "--address", "unix:" + sock, *flags],
                            env=dict(os.environ, WARM_RUNTIME_REPOS=repo),
                            stdout=log, stderr=subprocess.STDOUT)
    client = Client("unix:" + sock)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            if client.status().status == mm.RuntimeStatusResponse.READY:
                return proc, client, sock
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    print(open(log.name).read())
    sys.exit(f"{name} did not become READY")


def tree_arrays(forest):
    """The bytes of a forest's trees' arrays (nodes and values), which its memory holds at least."""
    total = 0
    for tree in forest.estimators_:
        state = tree.tree_.__getstate__()
        total += state["nodes"].nbytes + state["values"].nbytes
    return total


class Slow:
    """Pickles to code that sleeps, then loads another model file (a load that takes a while)."""

    def __init__(self, seconds, path):
        self.seconds, self.path = seconds, path

    def __reduce__(self):
        return (eval, (f"__import__('time').sleep({self.seconds}) or "
                       f"__import__('joblib').load({self.path!r})",))


class Raises:
    def __reduce__(self):
        return (eval, ("1/0 if True else None",))


def make_models(repo, outside):
    """Fits the models, saves them under repo, answers {name: (object, path)}."""
    iris = load_iris()
    X, y = iris.data, iris.target
    models = {}
    logreg = LogisticRegression(max_iter=1000).fit(X, y)
    joblib.dump(logreg, os.path.join(repo, "logreg.joblib"))
    models["logreg"] = logreg

    Xr, yr = make_regression(n_samples=600, n_features=8, noise=0.5, random_state=0)
    forest = RandomForestRegressor(n_estimators=40, random_state=0).fit(Xr, yr)
    os.makedirs(os.path.join(repo, "forest"))
    joblib.dump(forest, os.path.join(repo, "forest", "model.joblib"))
    models["forest"] = forest

    svc = Pipeline([("scale", StandardScaler()),
                    ("svc", SVC(probability=True, random_state=0))]).fit(X, y)
    with open(os.path.join(repo, "svc.pkl"), "wb") as f:
        pickle.dump(svc, f)
    models["svc"] = svc

    names = iris.target_names[y]  # strings: setosa, versicolor, virginica
    strings = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, names)
    joblib.dump(strings, os.path.join(repo, "strings.pickle"))
    models["strings"] = strings

    booster_clf = xgb.XGBClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    booster_clf.save_model(os.path.join(repo, "xgb.json"))
    booster_clf.save_model(os.path.join(repo, "xgb.ubj"))
    models["xgb"] = booster_clf
    dtrain = xgb.DMatrix(Xr, label=yr)
    reg = xgb.train({"max_depth": 4, "objective": "reg:squarederror"}, dtrain, 15)
    os.makedirs(os.path.join(repo, "xgbreg"))
    reg.save_model(os.path.join(repo, "xgbreg", "model.bst"))
    models["xgbreg"] = reg

    multi = LinearRegression().fit(Xr, np.c_[yr, -2 * yr])  # two targets: [-1, 2]
    joblib.dump(multi, os.path.join(repo, "multi.joblib"))
    models["multi"] = multi
    kmeans = KMeans(n_clusters=3, n_init=3, random_state=0).fit(X)  # not a classifier: int labels
    joblib.dump(kmeans, os.path.join(repo, "kmeans.joblib"))
    models["kmeans"] = kmeans
    binary = xgb.XGBClassifier(n_estimators=10, max_depth=2).fit(X, (y == 1).astype(int))
    binary.save_model(os.path.join(repo, "binary.json"))  # binary:logistic: [-1]
    models["binary"] = binary

    joblib.dump(Slow(1.5, os.path.join(repo, "logreg.joblib")), os.path.join(repo, "slow.pkl"))
    joblib.dump(Slow(600, os.path.join(repo, "logreg.joblib")), os.path.join(repo, "hangs.pkl"))
    joblib.dump(Raises(), os.path.join(repo, "raises.pkl"))
    with open(os.path.join(repo, "corrupt.joblib"), "wb") as f:
        f.write(b"\x80\x04this is not a pickle" * 10)
    with open(os.path.join(repo, "notmodel.json"), "w") as f:
        f.write('{"hello": "world"}')
    with open(os.path.join(repo, "garbage.ubj"), "wb") as f:
        f.write(os.urandom(512))
    joblib.dump({"not": "a model"}, os.path.join(repo, "dict.joblib"))
    os.makedirs(os.path.join(repo, "two"))
    joblib.dump(logreg, os.path.join(repo, "two", "a.joblib"))
    joblib.dump(logreg, os.path.join(repo, "two", "b.joblib"))
    joblib.dump(logreg, os.path.join(outside, "evil.joblib"))
    os.symlink(os.path.join(outside, "evil.joblib"), os.path.join(repo, "link.joblib"))
    return models


def metadata(c, model_id):
    r = c.ModelMetadata(v2.ModelMetadataRequest(name=model_id), timeout=10)
    return ([(t.name, t.datatype, list(t.shape)) for t in r.inputs],
            [(t.name, t.datatype, list(t.shape)) for t in r.outputs])


def main():
    tmp = tempfile.mkdtemp(prefix="pyruntime_test.")
    repo, outside = os.path.join(tmp, "repo"), os.path.join(tmp, "outside")
    os.makedirs(repo)
    os.makedirs(outside)
    models = make_models(repo, outside)
    P = lambda *p: os.path.join(repo, *p)  # noqa: E731
    proc, c, sock = start(tmp, "rt", repo, "--capacity", "512MiB", "--threads", "8",
                          "--loading-threads", "2")

    # --- status ---
    s = c.status()
    check(s.status == mm.RuntimeStatusResponse.READY, "READY")
    check(s.capacityInBytes == 512 * MIB, f"capacity {s.capacityInBytes}")
    check(s.maxLoadingConcurrency == 2 and s.limitModelConcurrency, "loading threads, limit")
    check(s.runtimeVersion.startswith("warm-pyruntime 0.1 (scikit-learn ")
          and "xgboost " in s.runtimeVersion, f"version {s.runtimeVersion!r}")
    check(c.ServerReady(v2.ServerReadyRequest(), timeout=10).ready, "ServerReady")

    # --- loads ---
    sizes = {}
    for model_id, kind, path, key in (
            ("logreg", "sklearn", P("logreg.joblib"), ""),
            ("forest", "sklearn", P("forest"), '{"storage_key": "x"}'),
            ("svc", "sklearn", P("svc.pkl"), ""),
            ("strings", "sklearn", P("strings.pickle"), ""),
            ("xgb-json", "xgboost", P("xgb.json"), ""),
            ("xgb-ubj", "xgboost", P("xgb.ubj"), '{"threads": 2}'),
            ("xgbreg", "xgboost", P("xgbreg"), ""),
            ("logreg32", "sklearn", "logreg.joblib", '{"input_dtype": "FP32"}'),
            ("multi", "sklearn", P("multi.joblib"), ""),
            ("kmeans", "sklearn", P("kmeans.joblib"), ""),
            ("binary", "xgboost", P("binary.json"), "")):
        try:
            r = c.load(model_id, kind, path, key)
            sizes[model_id] = r.sizeInBytes
            check(r.sizeInBytes > 0 and r.maxConcurrency == 8, f"{model_id}: load answer {r}")
        except grpc.RpcError as e:
            check(False, f"load {model_id}: {e.code()} {e.details()}")
    if failures:
        return finish(proc, tmp)

    # --- metadata ---
    check(metadata(c, "logreg") == ([("input", "FP64", [-1, 4])],
                                    [("predict", "INT64", [-1]), ("predict_proba", "FP64", [-1, 3])]),
          f"logreg metadata {metadata(c, 'logreg')}")
    check(metadata(c, "logreg32")[0] == [("input", "FP32", [-1, 4])], "input_dtype FP32")
    check(metadata(c, "forest") == ([("input", "FP64", [-1, 8])], [("predict", "FP64", [-1])]),
          f"forest metadata {metadata(c, 'forest')}")
    check(metadata(c, "svc")[1] == [("predict", "INT64", [-1]), ("predict_proba", "FP64", [-1, 3])],
          f"svc metadata {metadata(c, 'svc')}")
    check(metadata(c, "strings")[1] == [("predict", "INT64", [-1]),
                                        ("predict_proba", "FP64", [-1, 3])], "strings metadata")
    for model_id in ("xgb-json", "xgb-ubj"):
        check(metadata(c, model_id) == ([("input", "FP32", [-1, 4])],
                                        [("predict", "FP32", [-1, 3])]),
              f"{model_id} metadata {metadata(c, model_id)}")
    check(metadata(c, "xgbreg") == ([("input", "FP32", [-1, 8])], [("predict", "FP32", [-1])]),
          f"xgbreg metadata {metadata(c, 'xgbreg')}")
    check(c.ModelMetadata(v2.ModelMetadataRequest(name="xgbreg"), timeout=10).platform == "xgboost",
          "platform")
    check(metadata(c, "multi")[1] == [("predict", "FP64", [-1, 2])], f"multi {metadata(c, 'multi')}")
    check(metadata(c, "kmeans")[1] == [("predict", "INT64", [-1])], f"kmeans {metadata(c, 'kmeans')}")
    check(metadata(c, "binary")[1] == [("predict", "FP32", [-1])], f"binary {metadata(c, 'binary')}")

    # --- answers equal the packages' own ---
    rng = np.random.default_rng(7)
    iris_x = load_iris().data
    xi = np.vstack([iris_x[::7], rng.normal(5, 2, size=(5, 4))])  # known rows and strangers
    xr = rng.normal(size=(33, 8))

    def same_labels(got, want, what):
        check(got.shape == want.shape and np.array_equal(got, want), f"{what}: {got} != {want}")

    def close(got, want, what, rtol=1e-10, atol=1e-12):
        check(got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol),
              f"{what}: max diff {np.max(np.abs(got - want)) if got.shape == want.shape else got.shape}")

    for model_id in ("logreg", "svc"):
        est = models[model_id]
        _, out = c.infer(model_id, xi, "FP64")
        same_labels(out["predict"], est.predict(xi).astype(np.int64), f"{model_id} predict")
        close(out["predict_proba"], est.predict_proba(xi), f"{model_id} predict_proba")
    resp, out = c.infer("logreg", xi, "FP64", typed="fp64_contents")
    same_labels(out["predict"], models["logreg"].predict(xi), "typed fp64 contents")
    xint = np.round(xi).astype(np.int64)
    _, out = c.infer("logreg", xint, "FP64", typed="int64_contents")
    same_labels(out["predict"], models["logreg"].predict(xint.astype(np.float64)), "int64 contents fill FP64")
    close(out["predict_proba"], models["logreg"].predict_proba(xint.astype(np.float64)), "int64 contents proba")
    x32 = xi.astype(np.float32)
    _, out = c.infer("logreg32", x32, "FP32")
    same_labels(out["predict"], models["logreg"].predict(x32), "FP32 input")
    resp, out = c.infer("svc", xi, "FP64", outputs=["predict_proba"])
    check([o.name for o in resp.outputs] == ["predict_proba"], "only the output asked for")
    close(out["predict_proba"], models["svc"].predict_proba(xi), "svc proba alone")
    resp, out = c.infer("svc", xi, "FP64", outputs=["predict_proba", "predict"])
    check([o.name for o in resp.outputs] == ["predict_proba", "predict"], "outputs in the order asked")
    resp, out = c.infer("logreg", xi, "FP64", header=True)
    same_labels(out["predict"], models["logreg"].predict(xi), "model from the mm-model-id header")
    resp, out = c.infer("logreg", np.zeros((0, 4)), "FP64")
    check([list(o.shape) for o in resp.outputs] == [[0], [0, 3]], "zero rows")

    _, out = c.infer("forest", xr, "FP64")
    close(out["predict"], models["forest"].predict(xr), "forest predict")
    strings = models["strings"]
    _, out = c.infer("strings", xi, "FP64")
    want = np.searchsorted(strings.classes_, strings.predict(xi)).astype(np.int64)
    same_labels(out["predict"], want, "string labels as indices into classes_")
    check(list(strings.classes_[out["predict"]]) == list(strings.predict(xi)), "indices name labels")
    close(out["predict_proba"], strings.predict_proba(xi), "strings proba")

    _, out = c.infer("multi", xr, "FP64")
    close(out["predict"], models["multi"].predict(xr), "multi-output regressor")
    _, out = c.infer("kmeans", xi, "FP64")
    same_labels(out["predict"], models["kmeans"].predict(xi).astype(np.int64), "kmeans labels")
    _, out = c.infer("binary", x32, "FP32")
    close(out["predict"], models["binary"].predict_proba(x32)[:, 1], "binary:logistic",
          rtol=1e-6, atol=1e-7)

    booster = models["xgb"].get_booster()
    for model_id in ("xgb-json", "xgb-ubj"):
        _, out = c.infer(model_id, x32, "FP32")
        close(out["predict"], booster.predict(xgb.DMatrix(x32)), f"{model_id} = Booster.predict",
              rtol=1e-6, atol=1e-7)
        close(out["predict"], models["xgb"].predict_proba(x32), f"{model_id} = predict_proba",
              rtol=1e-6, atol=1e-7)
    xr32 = xr.astype(np.float32)
    _, out = c.infer("xgbreg", xr32, "FP32", typed="fp64_contents")
    close(out["predict"], models["xgbreg"].predict(xgb.DMatrix(xr32)), "xgbreg typed",
          rtol=1e-6, atol=1e-6)

    # --- wrong inputs ---
    IA, NF = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    expect_code(lambda: c.infer("logreg", np.zeros((2, 3), np.float32), "FP32"), IA, "dtype and shape",
                "model logreg expects input 'input' FP64 [-1, 4], got FP32 [2, 3]")
    expect_code(lambda: c.infer("logreg", np.zeros((2, 3)), "FP64"), IA, "feature count",
                "expects input 'input' FP64 [-1, 4], got FP64 [2, 3]")
    expect_code(lambda: c.infer("logreg", np.zeros((2, 5)), "FP64"), IA, "one feature too many",
                "got FP64 [2, 5]")
    expect_code(lambda: c.infer("logreg", np.zeros(4), "FP64"), IA, "rank 1", "got FP64 [4]")
    expect_code(lambda: c.infer("logreg", np.zeros((2, 4)), "FP64", shape=[3, 4]), IA, "byte count",
                "takes 96 bytes, got 64")
    expect_code(lambda: c.infer("logreg", np.zeros((2, 4)), "FP64", typed="fp64_contents", shape=[3, 4]),
                IA, "element count", "takes 12 elements, got 8")
    expect_code(lambda: c.infer("logreg", np.zeros((2, 4)), "FP64", outputs=["nope"]), IA,
                "unknown output", "predict, predict_proba")
    expect_code(lambda: c.infer("xgb-json", np.zeros((2, 4)), "FP64"), IA, "xgboost takes FP32",
                "model xgb-json expects input 'input' FP32 [-1, 4]")
    expect_code(lambda: c.infer("nope", xi, "FP64"), NF, "unknown model", "nope")
    expect_code(lambda: c.ModelMetadata(v2.ModelMetadataRequest(name="nope"), timeout=10), NF,
                "metadata of an unknown model")
    check(not c.ModelReady(v2.ModelReadyRequest(name="nope"), timeout=10).ready, "ModelReady unknown")
    check(c.ModelReady(v2.ModelReadyRequest(name="logreg"), timeout=10).ready, "ModelReady loaded")

    # --- refused loads; the server lives on ---
    for model_id, kind, path, key, contains in (
            ("evil", "sklearn", os.path.join(outside, "evil.joblib"), "", ["evil.joblib", "outside"]),
            ("link", "sklearn", P("link.joblib"), "", ["link.joblib", "outside"]),
            ("dots", "sklearn", P("..", "outside", "evil.joblib"), "", ["outside the repositories"]),
            ("type", "onnx", P("logreg.joblib"), "", ["onnx", "sklearn, xgboost"]),
            ("key", "sklearn", P("logreg.joblib"), '{"bogus": 1}', ["bogus", "input_dtype"]),
            ("key2", "sklearn", P("logreg.joblib"), '{"threads": 2}', ["threads", "xgboost"]),
            ("key3", "sklearn", P("logreg.joblib"), '{"input_dtype": "BYTES"}', ["input_dtype"]),
            ("key4", "sklearn", P("logreg.joblib"), '{"input_dtype": ', ["not valid JSON"]),
            ("nf", "sklearn", P("logreg.joblib"), '{"n_features": 5}', ["4 features"]),
            ("missing", "sklearn", P("missing.joblib"), "", ["missing.joblib", "does not exist"]),
            ("ext", "xgboost", P("logreg.joblib"), "", [".json"]),
            ("two", "sklearn", P("two"), "", ["a.joblib, b.joblib"]),
            ("corrupt", "sklearn", P("corrupt.joblib"), "", ["corrupt.joblib"]),
            ("raises", "sklearn", P("raises.pkl"), "", ["ZeroDivisionError"]),
            ("dict", "sklearn", P("dict.joblib"), "", ["not a model"]),
            ("notmodel", "xgboost", P("notmodel.json"), "", ["notmodel"]),
            ("garbage", "xgboost", P("garbage.ubj"), "", [])):
        expect_code(lambda: c.load(model_id, kind, path, key), IA, f"load {model_id}", *contains)
        check(not c.ModelReady(v2.ModelReadyRequest(name=model_id), timeout=10).ready,
              f"{model_id} not held after its refusal")
    expect_code(lambda: c.predictModelSize(mm.PredictModelSizeRequest(
        modelId="evil", modelType="sklearn", modelPath=os.path.join(outside, "evil.joblib")), timeout=10),
        IA, "predictModelSize outside", "outside")
    check(proc.poll() is None and c.status().status == mm.RuntimeStatusResponse.READY,
          "alive and READY after the refusals")

    # --- idempotence, unload ---
    r = c.load("forest", "sklearn", P("forest"))
    check(r.sizeInBytes == sizes["forest"], "double load answers the same size")
    c.unload("never-loaded")
    c.load("extra", "sklearn", P("logreg.joblib"))
    c.unload("extra")
    expect_code(lambda: c.infer("extra", xi, "FP64"), NF, "unloaded model", "extra")
    expect_code(lambda: c.modelSize(mm.ModelSizeRequest(modelId="extra"), timeout=10), NF, "size of unloaded")

    # --- sizes ---
    check(sizes["forest"] >= tree_arrays(models["forest"]),
          f"forest measured {sizes['forest']} >= its trees' arrays {tree_arrays(models['forest'])}")
    raw = len(booster.save_raw("ubj"))
    check(sizes["xgb-json"] >= raw, f"xgb measured {sizes['xgb-json']} >= serialized {raw}")
    check(c.modelSize(mm.ModelSizeRequest(modelId="forest"), timeout=10).sizeInBytes == sizes["forest"],
          "modelSize = load's size")
    file_bytes = os.path.getsize(P("forest", "model.joblib"))
    predicted = c.predictModelSize(mm.PredictModelSizeRequest(
        modelId="f2", modelType="sklearn", modelPath=P("forest")), timeout=10).sizeInBytes
    check(predicted == 3 * file_bytes + MIB, f"predictModelSize {predicted} = 3 x {file_bytes} + 1 MiB")
    check(predicted >= sizes["forest"], f"the prediction {predicted} covers the measured {sizes['forest']}")

    # --- a load cancelled by its client, then unloaded, leaves nothing ---
    expect_code(lambda: c.load("slow", "sklearn", P("slow.pkl"), timeout=0.3),
                grpc.StatusCode.DEADLINE_EXCEEDED, "client deadline")
    c.unload("slow")
    check(not c.ModelReady(v2.ModelReadyRequest(name="slow"), timeout=10).ready, "cancelled: not ready")
    expect_code(lambda: c.modelSize(mm.ModelSizeRequest(modelId="slow"), timeout=10), NF, "cancelled: no size")
    time.sleep(1.6)
    index = c.RepositoryIndex(v2.RepositoryIndexRequest(), timeout=10)
    check("slow" not in [m.name for m in index.models], "cancelled: not held after its load ended")
    # ... and one cancelled without an unload is given up too
    expect_code(lambda: c.load("slow2", "sklearn", P("slow.pkl"), timeout=0.3),
                grpc.StatusCode.DEADLINE_EXCEEDED, "client deadline 2")
    time.sleep(1.8)
    check(not c.ModelReady(v2.ModelReadyRequest(name="slow2"), timeout=10).ready, "cancelled alone: not held")
    # a load that completes is held, and unloaded
    c.load("slow3", "sklearn", P("slow.pkl"))
    _, out = c.infer("slow3", xi, "FP64")
    same_labels(out["predict"], models["logreg"].predict(xi), "slow model answers")
    c.unload("slow3")

    # --- 32 requests at once ---
    cases = []
    for i in range(32):
        model_id = ("logreg", "svc", "forest", "xgb-json", "xgb-ubj", "strings", "xgbreg")[i % 7]
        rows = rng.normal(5, 2, size=(1 + i % 9, 8 if model_id in ("forest", "xgbreg") else 4))
        cases.append((model_id, rows))

    def expected(model_id, rows):
        if model_id in ("xgb-json", "xgb-ubj"):
            return booster.predict(xgb.DMatrix(rows.astype(np.float32)))
        if model_id == "xgbreg":
            return models["xgbreg"].predict(xgb.DMatrix(rows.astype(np.float32)))
        if model_id == "strings":
            return np.searchsorted(strings.classes_, strings.predict(rows))
        return models[model_id].predict(rows)

    def one(case):
        model_id, rows = case
        dtype = "FP32" if model_id.startswith("xgb") else "FP64"
        x = rows.astype(np.float32) if dtype == "FP32" else rows
        return c.infer(model_id, x, dtype)[1]["predict"]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(one, cases))
    for (model_id, rows), got in zip(cases, answers):
        check(np.allclose(got, expected(model_id, rows), rtol=1e-6, atol=1e-6),
              f"concurrent {model_id}: {got} != {expected(model_id, rows)}")

    # --- capacity, and the runtime's own load timeout ---
    proc2, c2, sock2 = start(tmp, "small", repo, "--capacity", "2MiB", "--load-timeout-ms", "500")
    check(c2.status().modelLoadingTimeoutMs == 500, "modelLoadingTimeoutMs")
    expect_code(lambda: c2.load("forest", "sklearn", P("forest")), grpc.StatusCode.RESOURCE_EXHAUSTED,
                "capacity", "capacity of 2097152")
    check(not c2.ModelReady(v2.ModelReadyRequest(name="forest"), timeout=10).ready, "refused: not held")
    r = c2.load("logreg", "sklearn", P("logreg.joblib"))
    check(0 < r.sizeInBytes <= 2 * MIB, f"a small model fits: {r.sizeInBytes}")
    expect_code(lambda: c2.load("slow", "sklearn", P("slow.pkl")), grpc.StatusCode.DEADLINE_EXCEEDED,
                "load timeout", "500 ms")
    time.sleep(1.5)
    check(not c2.ModelReady(v2.ModelReadyRequest(name="slow"), timeout=10).ready, "timed out: not held")
    stop(proc2, sock2, "small", signal.SIGINT)

    # --- bad flags ---
    r = subprocess.run([runtime], env={k: v for k, v in os.environ.items() if k != "WARM_GRPC_ADDRESS"},
                       capture_output=True, text=True)
    check(r.returncode == 2 and "WARM_GRPC_ADDRESS" in r.stderr, f"no address: {r.returncode} {r.stderr}")
    r = subprocess.run([runtime, "--address", "unix:" + os.path.join(tmp, "x.sock"), "--capacity", "lots"],
                       capture_output=True, text=True)
    check(r.returncode == 2 and "--capacity" in r.stderr, f"bad capacity: {r.returncode} {r.stderr}")
    # --- SIGTERM while a load hangs in model code: the runtime still stops, at once ---
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hung = pool.submit(lambda: c.load("hangs", "sklearn", P("hangs.pkl"), timeout=30))
        time.sleep(0.5)
        started = time.time()
        stop(proc, sock, "rt")
        check(time.time() - started < 10, f"stopped in {time.time() - started:.1f} s despite a hung load")
        check(hung.exception() is not None, "the hung load's call ended with the runtime")
    return finish(proc, tmp)


def stop(proc, sock, name, sig=signal.SIGTERM):
    proc.send_signal(sig)
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "hung"
    check(code == 0, f"{name}: SIGTERM exit {code}")
    check(not os.path.exists(sock), f"{name}: socket removed at stop")


def finish(proc, tmp):
    if proc.poll() is None:
        proc.kill()
    if failures:
        print(open(os.path.join(tmp, "rt.log")).read()[-4000:])
        print(f"pyruntime_test: {failures} failures (files in {tmp})")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("pyruntime_test: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
