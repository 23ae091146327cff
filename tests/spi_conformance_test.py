#!/usr/bin/python3
"""spi-conformance (tools/spi-conformance, docs/conformance.md) against runtimes whose faults are
known: it must pass the honest ones and fail exactly the check a fault breaks.

Usage: spi_conformance_test.py SOURCE_ROOT BUILD_ROOT (BUILD_ROOT/schemas holds the _pb2 modules,
BUILD_ROOT/warm-pyruntime the real runtime). Exits 77 (skipped) without python3-grpcio.

Covers:
- tests/support/lying_runtime.py, honest (also with slow loads): every check passes, exit 0, one
  `ok NAME` line per check; the same over --address, where honest-sizes is skipped (needs --exec);
- each fault flag of lying_runtime.py: exactly the check it targets fails (by name), exit 1;
- build/warm-pyruntime with a scikit-learn and an XGBoost model made here: every check passes.
  Skipped with a message (the rest still runs) when the launcher or the packages are missing.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import grpc  # noqa: F401
except ImportError as e:
    print(f"spi_conformance_test: skipped, {e}")
    sys.exit(77)

source, build = (os.path.abspath(p) for p in sys.argv[1:3])
SUITE = os.path.join(source, "tools", "spi-conformance", "spi-conformance")
LIAR = os.path.join(source, "tests", "support", "lying_runtime.py")
SCHEMAS = os.path.join(build, "schemas")
PYRUNTIME = os.path.join(build, "warm-pyruntime")
ALL = ["status", "load", "metadata-infer", "load-twice", "unload", "sizes", "cancelled-load",
       "honest-sizes", "concurrency", "bad-input"]
ECHO_BYTES = 8 << 20

failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {what}", flush=True)
    return condition


def suite(runtime_args, models, *extra, timeout=30):
    """Runs spi-conformance with --exec and --json: (exit status, {base name: [results]}, raw)."""
    command = [SUITE, "--schemas", SCHEMAS, "--timeout", str(timeout), "--json",
               "--exec", runtime_args] + [a for m in models for a in ("--model", m)] + list(extra)
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    by_name = {}
    try:
        report = json.loads(run.stdout)
    except ValueError:
        return run.returncode, {}, run.stdout + run.stderr
    for r in report["checks"]:
        by_name.setdefault(r["name"].split("[")[0], []).append(r)
    return run.returncode, by_name, run.stdout + run.stderr


def failed(by_name):
    return sorted(n for n, rs in by_name.items() if any(r["result"] == "FAIL" for r in rs))


def liar(flags=""):
    return f"{LIAR} --schemas {SCHEMAS} {flags}"


def make_echo(folder):
    path = os.path.join(folder, "echo.bin")
    with open(path, "wb") as f:
        f.write(b"\0" * ECHO_BYTES)
    return f"echo:{path}"


def test_honest_text(echo):
    """The honest runtime, in the suite's line format: one ok line per check, exit 0."""
    run = subprocess.run([SUITE, "--schemas", SCHEMAS, "--exec", liar(), "--model", echo,
                          "--timeout", "30"], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    oks = [ln.split()[1].split("[")[0] for ln in lines if ln.startswith("ok ")]
    check(run.returncode == 0, f"honest lying_runtime: exit 0, got {run.returncode}\n{run.stdout}"
                               f"{run.stderr}")
    check(oks == ALL, f"honest lying_runtime: ok lines for {ALL}, got {oks}\n{run.stdout}")
    status = [ln for ln in lines if ln.startswith("ok status")]
    check(status and "STARTING -> READY" in status[0],
          f"the status check sees the runtime's STARTING (0.5 s), got {status}")
    check(lines and lines[-1].startswith("spi-conformance: 10 checks, 10 ok, 0 failed"),
          f"the summary line, got {lines[-1:]}")


def test_address(echo, folder):
    """--address: the runtime started by the caller; honest-sizes is skipped, the rest pass."""
    sock = os.path.join(folder, "liar.sock")
    proc = subprocess.Popen([LIAR, "--schemas", SCHEMAS, "--address", "unix:" + sock],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = subprocess.run([SUITE, "--schemas", SCHEMAS, "--address", "unix:" + sock,
                              "--model", echo, "--json"], capture_output=True, text=True,
                             timeout=300)
        report = json.loads(run.stdout)
        results = {r["name"].split("[")[0]: r["result"] for r in report["checks"]}
        want = {n: "skip" if n == "honest-sizes" else "ok" for n in ALL}
        check(run.returncode == 0 and results == want,
              f"--address: exit 0 and {want}, got {run.returncode} {results}")
    finally:
        proc.terminate()
        proc.wait(10)


# fault flags -> the checks they must fail, and nothing else. --slow-load 0.3 makes a load last
# long enough for the suite's cancel to arrive while it runs (a load of 8 MiB takes about 1 ms,
# faster than the 1 ms deadline can cancel it): --ignore-cancel needs it to show, and with it
# --keep-after-unload's cancelled load is given up by the cancel alone, as the check intends.
FAULTS = [
    ("--lie-size", ["honest-sizes"]),
    ("--keep-after-unload --slow-load 0.3", ["unload"]),
    ("--never-ready", ["status"]),
    ("--ready-then-starting", ["status"]),
    ("--ignore-cancel --slow-load 0.3", ["cancelled-load"]),
    ("--double-load", ["load-twice"]),
    ("--bad-output", ["metadata-infer"]),
    ("--slow-load 0.3", []),  # slow but honest: conformant
]


def test_faults(echo):
    def one(fault):
        flags, want = fault
        # --never-ready: the suite waits --timeout for READY; a short one keeps the test quick.
        code, by_name, raw = suite(liar(flags), [echo], timeout=5 if "ready" in flags else 30)
        return flags, want, code, by_name, raw
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        for flags, want, code, by_name, raw in pool.map(one, FAULTS):
            got = failed(by_name)
            check(sorted(by_name) == sorted(ALL), f"{flags}: every check reported, got "
                                                  f"{sorted(by_name)}\n{raw}")
            check(got == sorted(want), f"{flags}: failed checks {want}, got {got}\n{raw}")
            check(code == (1 if want else 0), f"{flags}: exit {1 if want else 0}, got {code}")


def make_framework_models(folder):
    """A scikit-learn forest and an XGBoost booster big enough (about 1 MiB and 0.5 MiB loaded;
    50 loads grow the runtime by 50 and 24 MiB) that honest-sizes' bar, 0.5 x growth - 8 MiB, is
    above 0: smaller models pass it whatever they report."""
    import joblib
    import xgboost as xgb
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    x, y = make_classification(n_samples=2000, n_features=8, random_state=0)
    forest = os.path.join(folder, "forest.joblib")
    joblib.dump(RandomForestClassifier(n_estimators=200, random_state=0).fit(x, y), forest)
    booster = os.path.join(folder, "booster.json")
    xgb.train({"objective": "binary:logistic", "max_depth": 8}, xgb.DMatrix(x, label=y),
              num_boost_round=600).save_model(booster)
    return [f"sklearn:{forest}", f"xgboost:{booster}"]


def test_pyruntime(folder):
    if not os.path.exists(PYRUNTIME):
        print(f"spi_conformance_test: warm-pyruntime part skipped: {PYRUNTIME} does not exist "
              f"(meson writes it at configure time)")
        return
    try:
        models = make_framework_models(folder)
    except ImportError as e:
        print(f"spi_conformance_test: warm-pyruntime part skipped: {e}")
        return
    code, by_name, raw = suite(f"{PYRUNTIME} --capacity 2GiB --loading-threads 4", models,
                               timeout=60)
    bad = {n: [r["result"] for r in rs] for n, rs in by_name.items()
           if any(r["result"] != "ok" for r in rs)}
    check(code == 0 and sorted(by_name) == sorted(ALL) and not bad,
          f"warm-pyruntime: every check ok for both models, got exit {code}, not ok: {bad}\n{raw}")
    grew = [float(r["message"].split("grew ")[1].split(" MiB")[0])
            for r in by_name.get("honest-sizes", []) if " MiB" in r["message"].split("grew ")[-1]]
    check(any(g > 16 for g in grew), f"warm-pyruntime: a model that grows the runtime by more "
                                     f"than 16 MiB in honest-sizes (its bar above 0), got {grew}")
    check(all(len(rs) == 1 if n == "status" else len(rs) == 2 for n, rs in by_name.items()),
          f"warm-pyruntime: one status check and two of every other (one per model)\n{raw}")


def main():
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spi-conformance-test-") as folder:
        echo = make_echo(folder)
        test_honest_text(echo)
        test_address(echo, folder)
        test_faults(echo)
        test_pyruntime(folder)
    print(f"spi_conformance_test: {'FAILED' if failures else 'passed'} "
          f"({time.monotonic() - began:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
