"""spi-conformance's command line and runner: starts the runtime (--exec) or connects to it
(--address), runs every check once for the runtime (status) and once per --model (the rest), and
prints one line per check and a summary, or one JSON object (--json). Exit status: 0 every check
passed (skips allowed), 1 a check failed, 2 bad flags or the message modules missing."""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

from . import checks_basic as b, checks_load as l, schemas
from .context import Context, Failed, Model, Skipped, StatusWatcher

# (name, function, once per model); the order they run in.
CHECKS = [
    ("status", b.check_status, False),
    ("load", b.check_load, True),
    ("metadata-infer", b.check_metadata_infer, True),
    ("load-twice", b.check_load_twice, True),
    ("unload", b.check_unload, True),
    ("sizes", b.check_sizes, True),
    ("cancelled-load", l.check_cancelled_load, True),
    ("honest-sizes", l.check_honest_sizes, True),
    ("concurrency", l.check_concurrency, True),
    ("bad-input", b.check_bad_input, True),
]
NAMES = [name for name, _, _ in CHECKS]


def parse(argv):
    p = argparse.ArgumentParser(
        prog="spi-conformance",
        description="Checks a model runtime against ModelMesh's model-runtime interface and "
                    "KServe V2 inference as warm relies on them (docs/conformance.md).")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--exec", metavar="COMMAND",
                       help="start the runtime: /bin/sh -c 'exec COMMAND' with WARM_GRPC_ADDRESS "
                            "(a unix socket) and WARM_RUNTIME_REPOS (the models' folders) set")
    where.add_argument("--address", metavar="ADDR",
                       help="a runtime already serving on unix:PATH or host:port")
    p.add_argument("--model", metavar="TYPE:PATH[:KEY]", action="append", required=True,
                   help="a model to test with (repeatable): its type, file or folder, and key")
    p.add_argument("--schemas", metavar="DIR",
                   help="folder of model_runtime_pb2.py and kserve_v2_pb2.py (or of the .proto "
                        "files; protoc compiles them); default: build/schemas of this tree")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds the runtime may take to be READY and to answer any call "
                        "(default 60)")
    p.add_argument("--check", action="append", choices=NAMES, metavar="NAME",
                   help="run only this check (repeatable): " + ", ".join(NAMES))
    p.add_argument("--json", action="store_true", help="print one JSON object, not lines")
    a = p.parse_args(argv)
    try:
        a.models = [Model.parse(m) for m in a.model]
    except ValueError as e:
        p.error(str(e))
    for m in a.models:
        if not os.path.exists(m.path):
            p.error(f"--model {m.type}:{m.path}: no such file or folder")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    return a


def _plan(a):
    """[(check name as printed, function, model or None)] in running order."""
    plan = []
    for name, fn, per_model in CHECKS:
        if a.check and name not in a.check:
            continue
        if per_model:
            plan.extend((f"{name}[{m.label}]", fn, m) for m in a.models)
        else:
            plan.append((name, fn, None))
    return plan


def _run_one(name, fn, model, a, client, process, watcher):
    ctx = Context(name.split("[")[0], client, process, model, a.models, watcher, a.timeout)
    began = time.monotonic()
    try:
        detail = fn(ctx)
        result = ("ok", detail or "")
    except Failed as e:
        result = ("FAIL", str(e))
    except Skipped as e:
        result = ("skip", str(e))
    except Exception as e:  # the suite's own bug, or a runtime answer it could not read
        result = ("FAIL", f"unexpected {type(e).__name__}: {e}\n{traceback.format_exc()}")
    finally:
        ctx.cleanup()
    if result[0] == "FAIL" and process is not None and not process.alive():
        result = ("FAIL", f"{result[1]} (the runtime exited: {process.exit_code()})")
    return {"name": name, "result": result[0], "message": result[1],
            "seconds": round(time.monotonic() - began, 3)}


def _print(r):
    if r["result"] == "ok":
        print(f"ok {r['name']}" + (f"  ({r['message']})" if r["message"] else ""), flush=True)
    else:
        print(f"{r['result']} {r['name']}: {r['message']}", flush=True)


def run(a, mm, v2):
    from .process import RuntimeProcess
    from .rpc import Client

    folder = tempfile.mkdtemp(prefix="spi-conformance-")
    process = None
    try:
        if a.exec:
            repos = sorted({os.path.dirname(m.path) for m in a.models})
            process = RuntimeProcess(a.exec, folder, repos)
        address = process.address if process else a.address
        client = Client(address, mm, v2, a.timeout)
        watcher = StatusWatcher(lambda: Client(address, mm, v2, a.timeout))
        watcher.start()
        watcher.wait_ready(a.timeout, process)  # the checks run anyway; `status` says so
        # a runtime that died before READY: one reason for every check, not connection errors
        dead = process is not None and not process.alive()
        results = []
        for name, fn, model in _plan(a):
            if dead:
                r = {"name": name, "result": "FAIL", "seconds": 0.0,
                     "message": f"the runtime exited ({process.exit_code()}) before READY"}
            else:
                r = _run_one(name, fn, model, a, client, process, watcher)
            results.append(r)
            if not a.json:
                _print(r)
        watcher.stop()
        client.close()
        log = ""
        if process is not None:
            log = process.log_tail()
            process.stop()
            process = None
    finally:
        if process is not None:
            process.stop()
        shutil.rmtree(folder, ignore_errors=True)
    failed = [r for r in results if r["result"] == "FAIL"]
    counts = {k: sum(1 for r in results if r["result"] == k) for k in ("ok", "FAIL", "skip")}
    if a.json:
        print(json.dumps({"passed": not failed, "counts": counts, "checks": results,
                          "runtime_log_tail": log if failed else ""}, indent=2))
    else:
        print(f"spi-conformance: {len(results)} checks, {counts['ok']} ok, {counts['FAIL']} "
              f"failed, {counts['skip']} skipped")
        if failed and log:
            print("the runtime's last output:\n" + log, file=sys.stderr)
    return 1 if failed else 0


def main(argv, tool_dir):
    a = parse(argv)
    try:
        mm, v2 = schemas.load(a.schemas, tool_dir)
    except schemas.SchemasError as e:
        print(f"spi-conformance: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"spi-conformance: {e} (python3-grpcio and python3-protobuf are needed)",
              file=sys.stderr)
        return 2
    return run(a, mm, v2)
