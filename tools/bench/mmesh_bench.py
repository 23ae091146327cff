#!/usr/bin/python3
"""Model runtimes over ModelMesh's interface, measured through warmd (docs/benchmarks.md, "Model
runtimes over ModelMesh's interface"). Three parts, each with its baseline in the same run:

  hitpath  one warm-pyruntime on a unix socket serving a small scikit-learn model both to warmd
           (--runtime py=grpc:unix:SOCK) and to the bench directly; the same Python client,
           closed loop, rounds rotated: (a) direct gRPC ModelInfer to the runtime, (b) warmd's
           HTTP V2 JSON infer (keep-alive), (c) warmd's gRPC ModelInfer. Requests/s and p50/p99
           at concurrency 1 and 8, ratios b/a and c/a, and the CPU each process spent a request.
  zipf     N models (half scikit-learn, half XGBoost, one file of each linked into N version
           directories with warm.json) served by warmd with a grpc-exec warm-pyruntime whose
           capacity holds about 10 % of them; a seeded Zipf request mix from many client
           threads. Requests, failures, hits/misses, loads, coalesced misses, evictions, and the
           runtime process's resident memory against its capacity.
  crash    a grpc-exec warm-pyruntime serving one model to 4 client threads; the Python runtime
           is SIGKILLed K times: outcomes per HTTP status, the longest request, and the time from
           each kill to the first 200 of a request sent after it.

Prints one JSON object (all parts) and a short summary on stderr. Run with /usr/bin/python3
(grpcio, numpy, scikit-learn, xgboost, joblib). Binaries come from --bin (default: build/ of this
tree): warmd, warmctl, warm-mmesh, warm-pyruntime; message modules from BIN/schemas.

    tools/bench/mmesh_bench.py --part all
    tools/bench/mmesh_bench.py --part hitpath --seconds 4 --rounds 5
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
ROW = [5.1, 3.5, 1.4, 0.2]  # one iris flower
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

v2 = mm = grpc = None  # imported in main(), once --bin is known


def log(msg):
    print(f"mmesh_bench: {msg}", file=sys.stderr, flush=True)


# --- processes ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, seconds, step=0.05):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except Exception:
            pass
        time.sleep(step)
    return False


def cpu_seconds(pid):
    """utime + stime of every thread of pid, seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def thread_cpu(pid):
    """{thread name (digits dropped): utime + stime seconds} over pid's threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = re.sub(r"[0-9]+", "", text[text.index("(") + 1:text.rindex(")")]) or "?"
        fields = text.rpartition(")")[2].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Proc:
    """A process the bench started, its output in a log file; stop() ends it (SIGTERM, then
    SIGKILL) by its own pid only."""

    def __init__(self, args, log_path, env=None):
        self.args, self.log_path = args, log_path
        self.proc = subprocess.Popen(args, stdout=open(log_path, "ab"), stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        self.pid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def tail(self, n=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Bench:
    """The binaries, the scratch directory and every process started, stopped at the end."""

    def __init__(self, bin_dir, work):
        self.bin = bin_dir
        self.work = work
        self.procs = []

    def tool(self, name):
        return os.path.join(self.bin, name)

    def start(self, args, name, env=None):
        p = Proc(args, os.path.join(self.work, name + ".log"), env)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            p.stop()

    def pyruntime(self, sock, capacity, repo, name="pyruntime"):
        p = self.start([self.tool("warm-pyruntime"), "--address", "unix:" + sock, "--capacity",
                        str(capacity), "--repo", repo], name)
        if not wait_for(lambda: runtime_ready(sock), 60, 0.1):
            raise SystemExit(f"warm-pyruntime did not become READY:\n{p.tail()}")
        return p

    def warmd(self, name, repo, runtime, extra=()):
        d = Warmd(self, name, repo, runtime, extra)
        self.procs.append(d.proc)
        return d


def runtime_ready(sock):
    ch = grpc.insecure_channel("unix:" + sock)
    try:
        status = ch.unary_unary("/mmesh.ModelRuntime/runtimeStatus",
                                request_serializer=mm.RuntimeStatusRequest.SerializeToString,
                                response_deserializer=mm.RuntimeStatusResponse.FromString)(
            mm.RuntimeStatusRequest(), timeout=2)
        return status.status == mm.RuntimeStatusResponse.READY
    finally:
        ch.close()


def load_direct(sock, model_id, model_type, path, key=""):
    """mmesh.ModelRuntime/loadModel on the runtime at sock: the measured size in bytes."""
    ch = grpc.insecure_channel("unix:" + sock)
    try:
        r = ch.unary_unary("/mmesh.ModelRuntime/loadModel",
                           request_serializer=mm.LoadModelRequest.SerializeToString,
                           response_deserializer=mm.LoadModelResponse.FromString)(
            mm.LoadModelRequest(modelId=model_id, modelType=model_type, modelPath=path,
                                modelKey=key), timeout=60)
        return r.sizeInBytes
    finally:
        ch.close()


class Warmd:
    """warmd on a unix socket, an HTTP port and a gRPC port, with one --runtime py=SPEC."""

    def __init__(self, bench, name, repo, runtime, extra=()):
        work = os.path.join(bench.work, name)
        os.makedirs(work, exist_ok=True)
        self.bench = bench
        self.sock = os.path.join(work, "warm.sock")
        self.http_port, self.grpc_port = free_port(), free_port()
        args = [bench.tool("warmd"), "--repo", repo, "--listen", "unix:" + self.sock,
                "--state", os.path.join(work, "state"), "--http", f"127.0.0.1:{self.http_port}",
                "--grpc", f"127.0.0.1:{self.grpc_port}", "--runtime", "py=" + runtime, *extra]
        self.proc = Proc(args, os.path.join(bench.work, name + ".log"))
        if not wait_for(lambda: self.ctl("models")[0] == 0, 60, 0.2):
            raise SystemExit(f"warmd did not start:\n{self.proc.tail()}")

    def ctl(self, *args, timeout=60):
        r = subprocess.run([self.bench.tool("warmctl"), "--connect", "unix:" + self.sock, *args],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def must(self, *args, timeout=120):
        rc, out, err = self.ctl(*args, timeout=timeout)
        if rc != 0:
            raise SystemExit(f"warmctl {' '.join(args)}: {err or out}\n{self.proc.tail()}")
        return out

    def devices(self):
        rc, out, _ = self.ctl("--json", "inspect", "devices")
        return json.loads(out) if rc == 0 else {}

    def runtime_state(self):
        """The py device's state line ("runtime pid PID, VERSION, rss N MiB, restarts K")."""
        return find_state(self.devices(), "py")

    def bridge_pid(self):
        for c in children(self.proc.pid):
            if "warm-mmesh" in comm(c):
                return c
        m = re.search(r"runtime pid (\d+)", self.runtime_state())
        return int(m.group(1)) if m and m.group(1) != "0" else None

    def python_pid(self):
        """The Python runtime: the bridge's child (grpc-exec)."""
        b = self.bridge_pid()
        kids = children(b) if b else []
        return kids[0] if kids else None

    def metrics(self):
        c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=10)
        try:
            c.request("GET", "/metrics")
            return parse_metrics(c.getresponse().read().decode())
        finally:
            c.close()


def find_state(devices, name):
    """The state text of device `name` in `inspect devices --json`, wherever it sits."""
    found = []

    def walk(o):
        if isinstance(o, dict):
            if o.get("name") == name and "state" in o:
                found.append(str(o["state"]))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str) and o.startswith(name + ": runtime"):
            found.append(o)
    walk(devices)
    return found[0] if found else ""


def find_device(devices, name):
    found = []

    def walk(o):
        if isinstance(o, dict):
            if o.get("name") == name and ("capacity" in o or "capacity_bytes" in o
                                          or "capacityBytes" in o):
                found.append(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(devices)
    return found[0] if found else {}


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def metric(m, name, **labels):
    """Sum of the series of `name` whose labels include `labels`."""
    total = 0.0
    for key, value in m.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


# --- models ------------------------------------------------------------------------------

def iris():
    from sklearn.datasets import load_iris
    return load_iris(return_X_y=True)


def write_sklearn(path):
    import joblib
    from sklearn.linear_model import LogisticRegression
    x, y = iris()
    joblib.dump(LogisticRegression(max_iter=500).fit(x, y), path)


def write_xgboost(path):
    import xgboost
    x, y = iris()
    xgboost.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(x, y).save_model(path)


def version_dir(repo, name, kind, src):
    """repo/name/1/ with warm.json and a hard link (or copy) of src."""
    d = os.path.join(repo, name, "1")
    os.makedirs(d, exist_ok=True)
    fname = "model.joblib" if kind == "sklearn" else "model.json"
    manifest = {"type": kind, "path": fname}
    if kind == "xgboost":
        manifest["key"] = {"input_dtype": "FP64"}
    with open(os.path.join(d, "warm.json"), "w") as f:
        json.dump(manifest, f)
    try:
        os.link(src, os.path.join(d, fname))
    except OSError:
        shutil.copy(src, os.path.join(d, fname))
    return d


# --- clients -----------------------------------------------------------------------------

class HttpClient:
    """warmd's V2 JSON infer over one keep-alive connection; call() answers the HTTP status."""

    def __init__(self, port, model):
        self.port, self.path = port, f"/v2/models/{model}/infer"
        self.body = json.dumps({"inputs": [{"name": "input", "datatype": "FP64", "shape": [1, 4],
                                            "data": ROW}]}).encode()
        self.conn = None

    def call(self, model=None):
        path = self.path if model is None else f"/v2/models/{model}/infer"
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                self.conn.request("POST", path, self.body, {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                self.last = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt:
                    return "conn_error"
        return "conn_error"

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class GrpcClient:
    """KServe V2 ModelInfer over one channel; call() answers "OK" or the status code's name."""

    def __init__(self, target, model):
        self.channel = grpc.insecure_channel(target)
        self.stub = self.channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer",
            request_serializer=v2.ModelInferRequest.SerializeToString,
            response_deserializer=v2.ModelInferResponse.FromString)
        req = v2.ModelInferRequest(model_name=model)
        t = req.inputs.add(name="input", datatype="FP64", shape=[1, 4])
        t.contents.fp64_contents.extend(ROW)
        self.req = req

    def call(self):
        try:
            self.last = self.stub(self.req, timeout=120)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name

    def close(self):
        self.channel.close()


def closed_loop(make_client, threads, seconds):
    """threads clients, each warmed by one call, then calling back to back for `seconds`:
    {"requests", "errors", "rps", "p50_us", "p99_us", "elapsed"}."""
    lat = [[] for _ in range(threads)]
    errs = [0] * threads
    state = {}

    def go():  # run by one thread once every client is warm: the clock starts
        state["start"] = time.perf_counter()
        state["end"] = state["start"] + seconds
    ready = threading.Barrier(threads, action=go)

    def worker(i):
        c = make_client()
        c.call()
        ready.wait()
        end = state["end"]
        ok_codes = (200, "OK")
        out = lat[i]
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                break
            s = c.call()
            out.append(time.perf_counter() - t0)
            if s not in ok_codes:
                errs[i] += 1
        c.close()

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    start = state["start"]
    elapsed = time.perf_counter() - start
    all_lat = sorted(x for l in lat for x in l)
    n = len(all_lat)
    return {"requests": n, "errors": sum(errs), "rps": n / elapsed, "elapsed": elapsed,
            "p50_us": all_lat[n // 2] * 1e6 if n else None,
            "p99_us": all_lat[min(n - 1, int(n * 0.99))] * 1e6 if n else None}


# --- part 1: hitpath ---------------------------------------------------------------------

def part_hitpath(b, a):
    repo = os.path.join(b.work, "hit-repo")
    os.makedirs(repo)
    src = os.path.join(b.work, "iris.joblib")
    write_sklearn(src)
    vdir = version_dir(repo, "iris", "sklearn", src)
    sock = os.path.join(b.work, "py.sock")
    rt = b.pyruntime(sock, 256 * MIB, repo)
    direct_size = load_direct(sock, "direct-iris", "sklearn", os.path.join(vdir, "model.joblib"))
    d = b.warmd("hit-warmd", repo, "grpc:unix:" + sock)
    d.must("register", "iris", "iris")
    d.must("ensure", "iris")

    # The answers: all three paths, against scikit-learn in this process.
    import joblib
    import numpy as np
    want = joblib.load(src).predict_proba(np.array([ROW]))[0].tolist()
    h = HttpClient(d.http_port, "iris")
    status = h.call()
    answer = json.loads(h.last) if status == 200 else {"status": status, "body": h.last[:300]}
    h.close()
    g = GrpcClient("unix:" + sock, "direct-iris")
    g.call()
    direct_out = {o.name: list(o.contents.fp64_contents) or None for o in g.last.outputs}
    raw = [np.frombuffer(r, dtype=np.float64).tolist() for r in g.last.raw_output_contents]
    g.close()
    http_proba = next((o["data"] for o in answer.get("outputs", [])
                       if o.get("name") == "predict_proba"), None)
    names = [o.name for o in g.last.outputs]
    direct_proba = direct_out.get("predict_proba") or (raw[names.index("predict_proba")]
                                                      if "predict_proba" in names and raw else None)
    answers = {"sklearn": want, "http": http_proba, "direct": direct_proba,
               "match": bool(http_proba and direct_proba
                             and np.allclose(http_proba, want) and np.allclose(direct_proba, want))}
    if not answers["match"]:
        log(f"hitpath: answers differ from scikit-learn's predict_proba: {answers}")

    pids = {"warmd": d.proc.pid, "bridge": d.bridge_pid(), "runtime": rt.pid,
            "client": os.getpid()}
    paths = {
        "a_direct": lambda: GrpcClient("unix:" + sock, "direct-iris"),
        "b_http": lambda: HttpClient(d.http_port, "iris"),
        "c_grpc": lambda: GrpcClient(f"127.0.0.1:{d.grpc_port}", "iris"),
    }
    order = list(paths)
    m0 = d.metrics()
    result = {"model_bytes_direct": direct_size, "answers": answers, "concurrency": {}}
    for conc in a.concurrency:
        runs = {p: [] for p in paths}
        cpu = {p: {k: 0.0 for k in pids} for p in paths}
        threads_cpu = {p: {} for p in paths}
        for r in range(a.rounds):
            k = r % len(order)
            rot = order[k:] + order[:k]
            if r % 2:
                rot.reverse()
            for p in rot:
                c0 = {k2: cpu_seconds(v) for k2, v in pids.items() if v}
                t0 = {k2: thread_cpu(pids[k2]) for k2 in ("warmd", "bridge") if pids[k2]}
                res = closed_loop(paths[p], conc, a.seconds)
                for k2, v in pids.items():
                    if v:
                        cpu[p][k2] += cpu_seconds(v) - c0[k2]
                for k2, before in t0.items():
                    for name, sec in thread_cpu(pids[k2]).items():
                        key = f"{k2}/{name}"
                        threads_cpu[p][key] = threads_cpu[p].get(key, 0.0) + sec - before.get(name, 0.0)
                runs[p].append(res)
                cpu[p].setdefault("_n", 0)
                cpu[p]["_n"] += res["requests"]
                if os.environ.get("WARM_BENCH_VERBOSE"):
                    log(f"c={conc} round {r} {p}: {res['rps']:.0f}/s p50 {res['p50_us']:.0f} us "
                        f"errors {res['errors']}")
        summary = {}
        for p, rs in runs.items():
            n = cpu[p].pop("_n") or 1
            summary[p] = {
                "rps": statistics.median(x["rps"] for x in rs),
                "p50_us": statistics.median(x["p50_us"] for x in rs),
                "p99_us": statistics.median(x["p99_us"] for x in rs),
                "requests": sum(x["requests"] for x in rs),
                "errors": sum(x["errors"] for x in rs),
                "rounds_rps": [round(x["rps"]) for x in rs],
                "cpu_us_per_request": {k2: round(v / n * 1e6, 1) for k2, v in cpu[p].items()},
                "thread_cpu_us_per_request": {k2: round(v / n * 1e6, 1) for k2, v in
                                              sorted(threads_cpu[p].items(), key=lambda kv: -kv[1])
                                              if v / n * 1e6 >= 5},
            }
        # Ratios paired by round (each pair saw the same machine state), then the median.
        for p, name in (("b_http", "ratio_http_direct"), ("c_grpc", "ratio_grpc_direct")):
            summary[name] = statistics.median(
                x["rps"] / y["rps"] for x, y in zip(runs[p], runs["a_direct"]))
        result["concurrency"][str(conc)] = summary
    m1 = d.metrics()
    result["warmd_requests"] = {o: metric(m1, "warm_requests_total", outcome=o)
                                - metric(m0, "warm_requests_total", outcome=o)
                                for o in ("hit", "miss", "error")}
    result["runtime_state"] = d.runtime_state()
    d.proc.stop()
    rt.stop()
    return result


# --- part 2: zipf ------------------------------------------------------------------------

def measure_sizes(b, srcs, repo):
    """Each model's size as a fresh runtime measures it: loaded 4 times under new ids, the median
    of the last 3 (the first load of a kind also pays what its framework allocates once)."""
    sock = os.path.join(b.work, "size.sock")
    rt = b.pyruntime(sock, 1 << 30, repo, "size-pyruntime")
    sizes = {}
    try:
        for kind, path in srcs.items():
            key = json.dumps({"input_dtype": "FP64"}) if kind == "xgboost" else ""
            got = [load_direct(sock, f"{kind}-{i}", kind, path, key) for i in range(4)]
            sizes[kind] = {"loads": got, "bytes": int(statistics.median(got[1:]))}
    finally:
        rt.stop()
    return sizes


def zipf_sequence(n_models, n_requests, s, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, n_models + 1, dtype=np.float64)
    p = ranks ** -s
    p /= p.sum()
    hot = rng.permutation(n_models)  # rank -> model index
    return hot[rng.choice(n_models, size=n_requests, p=p)].tolist()


class RssSampler(threading.Thread):
    """Samples a process's resident memory every 50 ms (the pid is asked again each time, so a
    restarted runtime is followed)."""

    def __init__(self, pid_of):
        super().__init__(daemon=True)
        self.pid_of, self.peak, self.stop_ = pid_of, 0, threading.Event()

    def run(self):
        while not self.stop_.wait(0.05):
            pid = self.pid_of()
            if pid:
                self.peak = max(self.peak, rss_bytes(pid))


def part_zipf(b, a):
    repo = os.path.join(b.work, "zipf-repo")
    os.makedirs(repo)
    srcs = {"sklearn": os.path.join(repo, "src.joblib"), "xgboost": os.path.join(repo, "src.json")}
    write_sklearn(srcs["sklearn"])
    write_xgboost(srcs["xgboost"])
    sizes = measure_sizes(b, srcs, repo)
    mean = (sizes["sklearn"]["bytes"] + sizes["xgboost"]["bytes"]) / 2
    capacity = max(int(a.zipf_models * a.zipf_resident * mean), 4 * MIB)
    os.makedirs(os.path.join(b.work, "zipf-models"))
    half = a.zipf_models // 2
    models = []
    for i in range(a.zipf_models):
        kind = "sklearn" if i < half else "xgboost"
        name = f"m{i:05d}"
        version_dir(repo, name, kind, srcs[kind])
        models.append(name)
    # The two source files are not model directories; keep them out of --serve-repo's sight.
    for p in srcs.values():
        os.rename(p, os.path.join(b.work, "zipf-models", os.path.basename(p)))

    t0 = time.monotonic()
    d = b.warmd("zipf-warmd", repo,
                f"grpc-exec:{b.tool('warm-pyruntime')} --capacity {capacity}",
                ["--runtime-rss-slack", a.zipf_rss_slack])
    # warmctl register, four at a time (--serve-repo would load every model's version at start,
    # to make it the name's default: 2,000 loads before the first request).
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        hint = []
        if a.zipf_size_hint == "auto":
            hint = ["--size-hint", str(2 * max(v["bytes"] for v in sizes.values()))]
        elif a.zipf_size_hint != "none":
            hint = ["--size-hint", a.zipf_size_hint]
        for rc, out, err in pool.map(lambda n: d.ctl("register", *hint, n, n), models):
            if rc != 0:
                raise SystemExit(f"warmctl register: {err or out}\n{d.proc.tail()}")
    registered_s = time.monotonic() - t0
    wait_for(lambda: d.python_pid() is not None, 30)
    py = d.python_pid()
    rss_start = rss_bytes(py) if py else 0
    sampler = RssSampler(d.python_pid)
    sampler.start()

    seq = zipf_sequence(a.zipf_models, a.zipf_requests, a.zipf_s, a.seed)
    m0 = d.metrics()
    statuses, lat, lock = {}, [], threading.Lock()
    nxt = iter(range(len(seq)))
    slow = []

    def worker():
        c = HttpClient(d.http_port, None)
        mine_s, mine_l = {}, []
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                break
            t = time.perf_counter()
            s = c.call(models[seq[i]])
            dt = time.perf_counter() - t
            mine_l.append(dt)
            mine_s[s] = mine_s.get(s, 0) + 1
            if s != 200 and len(slow) < 5:
                slow.append((models[seq[i]], s, c.last[:300].decode(errors="replace")
                             if isinstance(c.last, bytes) else ""))
        c.close()
        with lock:
            for k, v in mine_s.items():
                statuses[k] = statuses.get(k, 0) + v
            lat.extend(mine_l)

    start = time.monotonic()
    ts = [threading.Thread(target=worker, daemon=True) for _ in range(a.zipf_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - start
    time.sleep(2.5)  # one status period, so the state line's rss is current
    sampler.stop_.set()
    sampler.join()
    m1 = d.metrics()
    dev = d.devices()
    runtime_view = runtime_table(d.python_pid())

    def delta(name, **labels):
        return metric(m1, name, **labels) - metric(m0, name, **labels)
    hits, misses = delta("warm_requests_total", outcome="hit"), delta("warm_requests_total",
                                                                       outcome="miss")
    loads = delta("warm_loads_started_total")
    loaded = delta("warm_load_seconds_count")  # successful loads
    # What warmd says of the first models whose requests failed (a failure record, its reason).
    failed_status = {}
    for name, _, _ in slow[:3]:
        rc, out, err = d.ctl("status", name)
        failed_status[name] = (out or err).strip()[-800:]
    lat.sort()
    n = len(lat)
    py_dev = find_device(dev, "py")
    result = {
        "models": a.zipf_models, "requests": n, "threads": a.zipf_threads, "s": a.zipf_s,
        "seed": a.seed, "seconds": round(elapsed, 1), "rps": round(n / elapsed, 1),
        "registration_seconds": round(registered_s, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items(), key=str)},
        "failed": n - statuses.get(200, 0), "first_failures": slow,
        "p50_ms": round(lat[n // 2] * 1e3, 2), "p99_ms": round(lat[int(n * 0.99)] * 1e3, 2),
        "max_ms": round(lat[-1] * 1e3, 1),
        "hits": hits, "misses": misses, "errors": delta("warm_requests_total", outcome="error"),
        "loads_started": loads, "load_failures": delta("warm_load_failures_total"),
        "loads_succeeded": loaded, "coalesced": misses - loaded,
        "failed_models_status": failed_status,
        "miss_wait_count": delta("warm_cache_miss_wait_seconds_count"),
        "miss_wait_mean_ms": round(delta("warm_cache_miss_wait_seconds_sum")
                                   / max(1, delta("warm_cache_miss_wait_seconds_count")) * 1e3, 2),
        "evictions": {r: delta("warm_evictions_total", device="py", reason=r)
                      for r in ("capacity", "unload", "replaced", "lost")},
        "model_bytes": {k: v["bytes"] for k, v in sizes.items()}, "size_loads": sizes,
        "capacity": capacity,
        "runtime_rss_start": rss_start, "runtime_rss_peak": sampler.peak,
        "runtime_rss_growth": sampler.peak - rss_start,
        "growth_over_capacity": round((sampler.peak - rss_start) / capacity, 3),
        "device": py_dev, "runtime_state": d.runtime_state(), "runtime_view": runtime_view,
        "models_loaded_end": metric(m1, "warm_models_loaded", device="py"),
        "used_bytes_end": metric(m1, "warm_device_used_bytes", device="py"),
    }
    d.proc.stop()
    return result


def runtime_table(pid):
    """The Python runtime's own view, asked on its socket (WARM_GRPC_ADDRESS in its
    environment): models it holds and the sum of their sizes."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        target = env[b"WARM_GRPC_ADDRESS"].decode()
        ch = grpc.insecure_channel(target)
        index = ch.unary_unary("/inference.GRPCInferenceService/RepositoryIndex",
                               request_serializer=v2.RepositoryIndexRequest.SerializeToString,
                               response_deserializer=v2.RepositoryIndexResponse.FromString)(
            v2.RepositoryIndexRequest(), timeout=10)
        size = ch.unary_unary("/mmesh.ModelRuntime/modelSize",
                              request_serializer=mm.ModelSizeRequest.SerializeToString,
                              response_deserializer=mm.ModelSizeResponse.FromString)
        total = sum(size(mm.ModelSizeRequest(modelId=m.name), timeout=10).sizeInBytes
                    for m in index.models if m.state == "READY")
        ch.close()
        return {"models": len(index.models), "bytes": total}
    except Exception as ex:
        return {"error": f"{type(ex).__name__}: {ex}"}


# --- part 3: crash -----------------------------------------------------------------------

def part_crash(b, a):
    repo = os.path.join(b.work, "crash-repo")
    os.makedirs(repo)
    src = os.path.join(b.work, "crash.joblib")
    write_sklearn(src)
    version_dir(repo, "iris", "sklearn", src)
    d = b.warmd("crash-warmd", repo, f"grpc-exec:{b.tool('warm-pyruntime')} --capacity 256MiB")
    d.must("register", "iris", "iris")
    d.must("ensure", "iris")
    events = []  # (start, end, status), appended by every thread
    lock = threading.Lock()
    stop = threading.Event()

    def worker():
        c = HttpClient(d.http_port, "iris")
        mine = []
        while not stop.is_set():
            t = time.monotonic()
            s = c.call()
            mine.append((t, time.monotonic(), s))
            if len(mine) >= 256:
                with lock:
                    events.extend(mine)
                mine = []
        c.close()
        with lock:
            events.extend(mine)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(a.crash_threads)]
    for t in ts:
        t.start()
    kills = []
    time.sleep(a.crash_steady)
    for k in range(a.crash_kills):
        pid = d.python_pid()
        if pid is None:
            kills.append({"error": "no Python runtime found under the bridge",
                          "state": d.runtime_state()})
            time.sleep(a.crash_steady)
            continue
        os.kill(pid, signal.SIGKILL)
        at = time.monotonic()
        kills.append({"pid": pid, "at": at, "wall": time.time()})
        # Wait for the recovery (or give up), then a steady spell before the next kill.
        def recovered():
            with lock:
                return any(e[0] > at and e[2] == 200 for e in events)
        wait_for(recovered, a.crash_wait, 0.05)
        time.sleep(a.crash_steady)
    stop.set()
    for t in ts:
        t.join(130)
    time.sleep(2.5)
    events.sort()
    counts = {}
    for _, _, s in events:
        counts[str(s)] = counts.get(str(s), 0) + 1
    for kill in kills:
        if "at" not in kill:
            continue
        at = kill.pop("at")
        first = next((e for e in events if e[0] > at and e[2] == 200), None)
        kill["first_200_after_s"] = round(first[1] - at, 3) if first else None
        window = [e for e in events if e[1] > at and (first is None or e[0] <= first[1])]
        kill["non_200_until_then"] = sum(1 for e in window if e[2] != 200)
        kill["statuses_until_then"] = {}
        for e in window:
            kill["statuses_until_then"][str(e[2])] = kill["statuses_until_then"].get(str(e[2]), 0) + 1
    # When warmd saw the runtime ready again after each kill (its log's "ready again").
    readies = []
    for line in open(d.proc.log_path, errors="replace"):
        m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] \[\w+\] "
                     r"(?:runtime py ready|py: the runtime is ready again)", line)
        if m:
            readies.append(time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%d %H:%M:%S"))
                           + float("0" + m.group(1)[19:]))
    for kill in kills:
        wall = kill.pop("wall", None)
        after = [r for r in readies if wall and r > wall]
        kill["runtime_ready_after_s"] = round(after[0] - wall, 3) if after else None
    longest = max(events, key=lambda e: e[1] - e[0]) if events else None
    m = d.metrics()
    result = {
        "threads": a.crash_threads, "requests": len(events), "statuses": counts,
        "longest_request_s": round(longest[1] - longest[0], 3) if longest else None,
        "longest_request_status": str(longest[2]) if longest else None,
        "kills": kills,
        "max_first_200_after_s": max((k.get("first_200_after_s") or float("inf"))
                                     for k in kills) if kills else None,
        "runtime_state": d.runtime_state(),
        "evictions_lost": metric(m, "warm_evictions_total", device="py", reason="lost"),
        "warmd_requests": {o: metric(m, "warm_requests_total", outcome=o)
                           for o in ("hit", "miss", "error")},
        "loads_started": metric(m, "warm_loads_started_total"),
        "load_failures": metric(m, "warm_load_failures_total"),
        "warmd_log_warnings": [l.strip() for l in open(d.proc.log_path, errors="replace")
                               if " warn" in l.lower() or "error" in l.lower()][-12:],
    }
    d.proc.stop()
    return result


# --- summary and main --------------------------------------------------------------------

def summary(out):
    lines = []
    h = out.get("hitpath")
    if h:
        for conc, s in h["concurrency"].items():
            lines.append(
                f"hitpath c={conc}: direct {s['a_direct']['rps']:.0f}/s "
                f"(p50 {s['a_direct']['p50_us']:.0f} us, p99 {s['a_direct']['p99_us']:.0f} us), "
                f"warmd HTTP {s['b_http']['rps']:.0f}/s (p50 {s['b_http']['p50_us']:.0f}, p99 "
                f"{s['b_http']['p99_us']:.0f}), warmd gRPC {s['c_grpc']['rps']:.0f}/s (p50 "
                f"{s['c_grpc']['p50_us']:.0f}, p99 {s['c_grpc']['p99_us']:.0f}); "
                f"b/a {s['ratio_http_direct']:.2f}, c/a {s['ratio_grpc_direct']:.2f} "
                f"(goal b/a >= 0.8)")
    z = out.get("zipf")
    if z:
        lines.append(
            f"zipf: {z['requests']} requests over {z['models']} models in {z['seconds']} s, "
            f"failed {z['failed']}; hits {z['hits']:.0f}, misses {z['misses']:.0f}, loads "
            f"{z['loads_started']:.0f} ({z['loads_succeeded']:.0f} succeeded), coalesced {z['coalesced']:.0f}, capacity evictions "
            f"{z['evictions']['capacity']:.0f}; runtime RSS +{z['runtime_rss_growth'] / MIB:.1f} "
            f"MiB vs capacity {z['capacity'] / MIB:.1f} MiB ({z['growth_over_capacity']:.2f}x)")
    c = out.get("crash")
    if c:
        lines.append(
            f"crash: {c['requests']} requests {c['statuses']}, longest {c['longest_request_s']} s;"
            f" kill -> first 200: {[k.get('first_200_after_s') for k in c['kills']]} s "
            f"(goal <= 5 s)")
    return "\n".join(lines)


def main():
    global v2, mm, grpc
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("hitpath", "zipf", "crash", "all"), default="all")
    p.add_argument("--bin", default=os.path.join(ROOT, "build"),
                   help="where warmd, warmctl, warm-mmesh, warm-pyruntime are (default build/)")
    p.add_argument("--seconds", type=float, default=2.0, help="hitpath: seconds per phase")
    p.add_argument("--rounds", type=int, default=3, help="hitpath: rounds per concurrency")
    p.add_argument("--concurrency", default="1,8", help="hitpath: client threads, comma-separated")
    p.add_argument("--zipf-models", type=int, default=2000)
    p.add_argument("--zipf-requests", type=int, default=4000,
                   help="zipf: requests (20000 takes about 4 minutes on 2 cores)")
    p.add_argument("--zipf-threads", type=int, default=16)
    p.add_argument("--zipf-s", type=float, default=1.0)
    p.add_argument("--zipf-resident", type=float, default=0.1,
                   help="zipf: the share of the models the capacity holds")
    p.add_argument("--zipf-size-hint", default="none",
                   help="zipf: warmctl register --size-hint (none; auto: twice the larger "
                        "measured size; or a size)")
    p.add_argument("--zipf-rss-slack", default="64MiB",
                   help="zipf: warmd --runtime-rss-slack (the runtime's memory beyond its models "
                        "that is not charged)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--crash-kills", type=int, default=3)
    p.add_argument("--crash-threads", type=int, default=4)
    p.add_argument("--crash-steady", type=float, default=3.0,
                   help="crash: seconds of traffic before each kill")
    p.add_argument("--crash-wait", type=float, default=30.0,
                   help="crash: longest wait for a 200 after a kill")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (logs)")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args()
    a.concurrency = [int(c) for c in a.concurrency.split(",")]
    a.bin = os.path.abspath(a.bin)
    for tool in ("warmd", "warmctl", "warm-mmesh", "warm-pyruntime"):
        if not os.access(os.path.join(a.bin, tool), os.X_OK):
            raise SystemExit(f"mmesh_bench: {a.bin}/{tool} is missing (build it first)")
    sys.path[0:0] = [os.path.join(a.bin, "schemas")]
    import grpc as grpc_
    import kserve_v2_pb2
    import model_runtime_pb2
    grpc, v2, mm = grpc_, kserve_v2_pb2, model_runtime_pb2

    work = tempfile.mkdtemp(prefix="mmesh-bench-")
    b = Bench(a.bin, work)
    out = {"bench": "mmesh", "date": time.strftime("%Y-%m-%d %H:%M"), "argv": sys.argv[1:],
           "load_average": os.getloadavg()}
    parts = ("hitpath", "zipf", "crash") if a.part == "all" else (a.part,)
    try:
        for part in parts:
            t = time.monotonic()
            log(f"{part} ...")
            out[part] = globals()["part_" + part](b, a)
            out[part]["part_seconds"] = round(time.monotonic() - t, 1)
            b.stop_all()
    finally:
        b.stop_all()
        out["load_average_end"] = os.getloadavg()
        if a.keep:
            out["work"] = work
        else:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=1, default=str)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    log("\n" + summary(out))


if __name__ == "__main__":
    main()
