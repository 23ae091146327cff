#!/usr/bin/python3
"""Models a ModelMesh runtime serves, through warmd: warm.json models of scikit-learn and XGBoost
served by warm-pyruntime (--runtime NAME=grpc-exec:COMMAND, through warm-mmesh), answered exactly
as the packages answer; the runtime's capacity, sizes and tensors as warmd sees them; a dense
model beside them still on the host; a runtime killed while requests run; and a runtime that lies
(sizes it under-reports, loads it never finishes) through tests/support/lying_runtime.py.

Usage: mmesh_runtime_test.py WARMD WARMCTL SOURCE_ROOT BUILD_DIR. Exits 77 (skipped) when
scikit-learn, XGBoost or gRPC is missing in /usr/bin/python3, or warm-mmesh was not built.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

warmd, warmctl, root, build = sys.argv[1:5]
root, build = os.path.abspath(root), os.path.abspath(build)  # runtime commands name them
sys.path.insert(0, os.path.join(root, "tests", "support"))
from warm_cli import Checks, WarmCtl, wait_for  # noqa: E402
from warmd_process import Warmd, manifest  # noqa: E402

try:
    import numpy as np
    import grpc  # noqa: F401  (warm-pyruntime needs it)
    import joblib
    import xgboost
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import LogisticRegression
except ImportError as e:
    print(f"mmesh_runtime_test: skipped, {e}")
    sys.exit(77)
bridge = os.path.join(build, "warm-mmesh")
pyruntime = os.path.join(build, "warm-pyruntime")
for tool in (bridge, pyruntime):
    if not os.access(tool, os.X_OK):
        print(f"mmesh_runtime_test: skipped, {tool} was not built")
        sys.exit(77)
liar = os.path.join(root, "tests", "support", "lying_runtime.py")

checks = Checks()
check = checks.check
cli = WarmCtl(warmctl)


def warmd_with(work, repo, runtimes, extra=()):
    return Warmd(checks, warmd, cli, work, repo, runtimes, extra)


def iris_repo(repo):
    """repo/iris/1: a LogisticRegression on iris in a warm.json model; the classifier and data."""
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X, y)
    os.makedirs(os.path.join(repo, "iris", "1"))
    joblib.dump(clf, os.path.join(repo, "iris", "1", "model.joblib"))
    manifest(os.path.join(repo, "iris", "1"), type="sklearn", path="model.joblib")
    return clf, X, y


def outputs_by_name(body):
    return {o["name"]: np.array(o["data"]).reshape(o["shape"]) for o in body.get("outputs", [])}


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def device(d, name):
    """Device `name` in `warmctl --json inspect devices` ({} when absent)."""
    rc, out, _ = d.ctl("--json", "inspect", "devices")
    doc = json.loads(out) if rc == 0 else {}
    devices = doc.get("devices", doc) if isinstance(doc, dict) else doc
    return next((x for x in devices if x.get("name") == name), {})


def runtime_pid(d, name):
    """The pid of the Python runtime: the child of the bridge warmd supervises as device `name`
    (whose state reads "runtime pid PID, ...")."""
    state = device(d, name).get("state", "")
    if not state.startswith("runtime pid "):
        return 0
    kids = children(int(state.split()[2].rstrip(",")))
    return kids[0] if kids else 0


def serves_packages(work):
    """warm-pyruntime behind warmd: answers equal to the packages', sizes measured, capacity, the
    host's dense models unaffected, and a killed runtime."""
    repo = os.path.join(work, "repo")
    clf, X, y = iris_repo(repo)
    reg = RandomForestRegressor(n_estimators=20, random_state=3).fit(X[:, :3], X[:, 3])
    os.makedirs(os.path.join(repo, "petal", "1", "files"))
    joblib.dump(reg, os.path.join(repo, "petal", "1", "files", "forest.joblib"))
    manifest(os.path.join(repo, "petal", "1"), type="sklearn", path="files/forest.joblib")
    booster = xgboost.XGBClassifier(n_estimators=12, max_depth=3).fit(X, y)
    os.makedirs(os.path.join(repo, "boost", "1"))
    booster.save_model(os.path.join(repo, "boost", "1", "model.json"))
    manifest(os.path.join(repo, "boost", "1"), type="xgboost", path="model.json",
             key={"input_dtype": "FP32"})
    cli.make_model(os.path.join(repo, "dense", "1"), "4,3", 5)

    d = warmd_with(work, repo, [f"py=grpc-exec:{pyruntime} --capacity 256MiB"])
    try:
        for name in ("iris", "petal", "boost", "dense"):
            rc, out, err = d.ctl("register", name, name)
            check(rc == 0, f"register {name}: {out} {err}")
        py = device(d, "py")
        check(py.get("capacity") == 256 << 20 and "warm-pyruntime" in py.get("state", ""),
              f"inspect devices lists runtime py with the runtime's capacity and version: {py}")

        rows = X[::30]  # 5 rows of the iris features
        code, body = d.infer("iris", [{"name": "input", "datatype": "FP64", "shape": list(rows.shape),
                                       "data": rows.flatten().tolist()}])
        got = outputs_by_name(body)
        check(code == 200, f"iris answers: {code} {body}")
        if code == 200:
            check(np.array_equal(got.get("predict"), clf.predict(rows)),
                  f"iris's predict equals scikit-learn's: {got.get('predict')} vs {clf.predict(rows)}")
            check(np.allclose(got.get("predict_proba"), clf.predict_proba(rows), rtol=0, atol=1e-12),
                  "iris's predict_proba equals scikit-learn's")
        st = d.status("iris")
        check(st.get("device") == "py" and st.get("state") == "LOADED",
              f"iris is loaded on runtime py: {st}")
        check(st.get("kind") == "sklearn", f"iris's kind is its manifest's type: {st.get('kind')}")
        check([i.get("name") for i in st.get("inputs", [])] == ["input"] and
              [o.get("name") for o in st.get("outputs", [])] == ["predict", "predict_proba"],
              f"once loaded, status shows the tensors the runtime declared: {st}")
        check(st.get("bytes", 0) > 975, f"iris is charged what the runtime measured: {st.get('bytes')}")

        code, body = d.infer("petal", [{"name": "input", "datatype": "FP64", "shape": [4, 3],
                                        "data": X[:4, :3].flatten().tolist()}])
        check(code == 200 and np.allclose(outputs_by_name(body).get("predict"), reg.predict(X[:4, :3]),
                                          rtol=0, atol=1e-12),
              f"a forest from a path inside a files directory answers as scikit-learn: {code} {body}")
        rows32 = X[:6].astype(np.float32)
        code, body = d.infer("boost", [{"name": "input", "datatype": "FP32", "shape": [6, 4],
                                        "data": rows32.flatten().tolist()}])
        got = outputs_by_name(body)
        want = booster.get_booster().predict(xgboost.DMatrix(rows32))
        check(code == 200 and got and np.allclose(next(iter(got.values())), want, rtol=0, atol=1e-6),
              f"an XGBoost booster answers as XGBoost does: {code} {body} vs {want}")

        code, body = d.infer("iris", [{"name": "input", "datatype": "FP64", "shape": [2, 3],
                                       "data": [1, 2, 3, 4, 5, 6]}])
        check(code == 400 and "4" in body.get("error", ""),
              f"a wrong shape is refused naming what the model takes: {code} {body}")
        st = d.status("dense")
        rc, out, err = d.ctl("--json", "infer", "dense", "--random")
        st = d.status("dense")
        check(rc == 0 and st.get("device") == "host", f"a dense model still loads on the host: {st} {err}")

        # The runtime killed while requests run: each answers (served, or unavailable), none hangs,
        # and the runtime is back and serving.
        pid = runtime_pid(d, "py")
        check(pid > 0, "the Python runtime's pid is found under its bridge")
        results, stop = [], threading.Event()

        def client():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    code, _ = d.infer("iris", [{"name": "input", "datatype": "FP64", "shape": [1, 4],
                                                "data": [5.0, 3.4, 1.5, 0.2]}], timeout=20)
                except Exception as e:  # a hang shows as a timeout here
                    code = repr(e)
                results.append((t, time.monotonic(), code))

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        killed_at = time.monotonic()
        if pid:
            os.kill(pid, signal.SIGKILL)
        back = wait_for(lambda: any(s > killed_at + 0.2 and c == 200 for s, _, c in results), 30)
        stop.set()
        for t in threads:
            t.join(60)
        codes = {c for _, _, c in results}
        check(codes <= {200, 503}, f"every request during the crash is served or unavailable: {codes}")
        check(max(e - s for s, e, _ in results) < 15,
              f"no request waited long: {max(e - s for s, e, _ in results):.1f} s")
        check(back, "the runtime is back and serving after it was killed")
        first_ok = min((s for s, _, c in results if s > killed_at + 0.2 and c == 200), default=None)
        if first_ok:
            print(f"mmesh_runtime_test: serving again {first_ok - killed_at:.2f} s after the kill")
        check("restarts 1" in device(d, "py").get("state", ""),
              f"the device counts one restart: {device(d, 'py')}")
    finally:
        d.stop()


def follows_unseen_restart(work):
    """A runtime someone else runs (grpc:ADDR), restarted behind warmd's back: its models are gone,
    and warmd, told by the bridge, loads them again instead of sending requests to ids the new
    process never loaded."""
    repo = os.path.join(work, "repo")
    iris_repo(repo)
    address = "unix:" + os.path.join(work, "py.sock")
    os.makedirs(work, exist_ok=True)

    def start_runtime():
        return subprocess.Popen([pyruntime, "--address", address, "--capacity", "256MiB", "--repo", repo],
                                stdout=open(os.path.join(work, "py.log"), "a"), stderr=subprocess.STDOUT)

    runtime = start_runtime()
    d = warmd_with(os.path.join(work, "w"), repo, [f"py=grpc:{address}"])
    row = [{"name": "input", "datatype": "FP64", "shape": [1, 4], "data": [5.0, 3.4, 1.5, 0.2]}]
    try:
        d.ctl("register", "iris", "iris")
        code, body = d.infer("iris", row)
        check(code == 200, f"iris answers through a runtime warmd did not start: {code} {body}")
        runtime.kill()
        runtime.wait()
        runtime = start_runtime()
        served = wait_for(lambda: d.infer("iris", row)[0] == 200, 30)
        check(served, f"after the runtime restarted unseen, iris is served again: {d.infer('iris', row)} "
                      f"{d.tail()}")
        st = d.status("iris")
        check(st.get("loads", {}).get("count", 0) >= 2, f"iris was loaded again into the new process: {st}")
    finally:
        d.stop()
        runtime.kill()


def echo_repo(repo, count, size):
    """repo/e0 .. e{count-1}/1: echo models (lying_runtime's type) of `size` bytes each."""
    for i in range(count):
        directory = os.path.join(repo, f"e{i}", "1")
        os.makedirs(directory)
        with open(os.path.join(directory, "weights.bin"), "wb") as f:
            f.write(b"\1" * size)
        manifest(directory, type="echo", path="weights.bin")
    return repo


def resists_liars(work):
    """A runtime that under-reports sizes is charged for the memory it holds; a load it never
    finishes times out, fails the request and is recorded."""
    if not os.path.exists(liar):
        print("mmesh_runtime_test: lying_runtime.py is not there; its part is skipped")
        return
    repo = echo_repo(os.path.join(work, "repo"), 4, 32 << 20)
    row = [1.0, 2.0, 3.0, 4.0]

    d = warmd_with(os.path.join(work, "liar"), repo,
              [f"liar=grpc-exec:/usr/bin/python3 {liar} --schemas {build}/schemas --lie-size --capacity {1 << 30}"])
    try:
        for i in range(4):
            d.ctl("register", f"e{i}", f"e{i}")
            code, body = d.infer(f"e{i}", [{"name": "input", "datatype": "FP32", "shape": [1, 4],
                                            "data": row}])
            check(code == 200 and outputs_by_name(body).get("output") is not None and
                  outputs_by_name(body)["output"].tolist() == [[2.0, 4.0, 6.0, 8.0]],
                  f"e{i} answers through the lying runtime: {code} {body}")
        charged = wait_for(lambda: "charged beyond its models" in d.ctl("inspect", "devices")[1], 20)
        check(charged, "memory a lying runtime holds beyond the sizes it reported is charged to it: " +
              d.ctl("inspect", "devices")[1])
    finally:
        d.stop()

    d = warmd_with(os.path.join(work, "slow"), repo,
              [f"slow=grpc-exec:/usr/bin/python3 {liar} --schemas {build}/schemas --slow-load 30 --capacity {1 << 30}"],
              extra=["--runtime-load-timeout", "2s"])
    try:
        d.ctl("register", "e0", "e0")
        started = time.monotonic()
        code, body = d.infer("e0", [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": row}])
        took = time.monotonic() - started
        check(code in (503, 504, 500) and "longer than 2 s" in body.get("error", ""),
              f"a load the runtime never finishes fails at warmd's load timeout: {code} {body}")
        check(took < 15, f"the request did not wait for the runtime's 30 s load: {took:.1f} s")
        st = d.status("e0")
        check(st.get("state") == "LOADING_FAILED" and "longer than" in (st.get("last_error") or {}).get("message", ""),
              f"the timed-out load is recorded as the model's failure: {st}")
    finally:
        d.stop()


def honours_runtime_limits(work):
    """What a ModelMesh runtime's status and loads say, warmd does: a model's maxConcurrency (more
    inferences wait in line), the runtime's modelLoadingTimeoutMs, and a capacity it changes (the
    device follows it, evicting down to it: ModelMesh reads it only at start)."""
    if not os.path.exists(liar):
        print("mmesh_runtime_test: lying_runtime.py is not there; its part is skipped")
        return
    repo = echo_repo(os.path.join(work, "repo"), 3, 16 << 20)
    row = [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]
    capacity_file = os.path.join(work, "capacity")
    with open(capacity_file, "w") as f:
        f.write("1GiB")
    d = warmd_with(os.path.join(work, "limits"), repo,
                   [f"liar=grpc-exec:/usr/bin/python3 {liar} --schemas {build}/schemas "
                    f"--max-concurrency 1 --infer-delay 0.2 --capacity-file {capacity_file}"])
    try:
        for i in range(3):
            d.ctl("register", f"e{i}", f"e{i}")
            code, body = d.infer(f"e{i}", row)
            check(code == 200, f"e{i} loads on the runtime: {code} {body}")
        # Four at once for a model whose runtime takes one at a time: all answered, none refused.
        codes = []
        threads = [threading.Thread(target=lambda: codes.append(d.infer("e0", row)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check([c for c, _ in codes] == [200] * 4,
              f"maxConcurrency 1: four requests at once wait in line, none refused: {codes}")
        # The runtime shrinks: the device adopts its new capacity and evicts down to it.
        with open(capacity_file, "w") as f:
            f.write("40MiB")
        shrunk = wait_for(lambda: device(d, "liar").get("capacity") == 40 << 20 and
                          device(d, "liar").get("used", 1 << 40) <= 40 << 20, 20)
        check(shrunk, f"a capacity the runtime lowers is adopted and evicted down to: "
                      f"{device(d, 'liar')}")
    finally:
        d.stop()

    d = warmd_with(os.path.join(work, "timeout"), repo,
                   [f"slow=grpc-exec:/usr/bin/python3 {liar} --schemas {build}/schemas "
                    f"--slow-load 30 --load-timeout-ms 1000"])
    try:
        d.ctl("register", "e0", "e0")
        started = time.monotonic()
        code, body = d.infer("e0", row)
        took = time.monotonic() - started
        check(code != 200 and took < 15,
              f"the runtime's modelLoadingTimeoutMs gives up its 30 s load: {code} {body} "
              f"after {took:.1f} s")
        st = d.status("e0")
        check("within the runtime's 1000 ms" in (st.get("last_error") or {}).get("message", ""),
              f"the load is recorded failed for its timeout: {st.get('last_error')}")
    finally:
        d.stop()


def main():
    with tempfile.TemporaryDirectory() as work:
        serves_packages(os.path.join(work, "a"))
    with tempfile.TemporaryDirectory() as work:
        follows_unseen_restart(os.path.join(work, "c"))
    with tempfile.TemporaryDirectory() as work:
        resists_liars(os.path.join(work, "b"))
    with tempfile.TemporaryDirectory() as work:
        honours_runtime_limits(os.path.join(work, "d"))
    print("mmesh_runtime_test:", "ok" if not checks.failures else f"{checks.failures} failed")
    return 1 if checks.failures else 0


sys.exit(main())
