#!/usr/bin/python3
"""The console with many models, in headless chromium (docs/benchmarks.md, "The console with
10,000 models"). warmd serves N registered models (one small dense file linked into N version
directories) on a host device that holds a few hundred of them, with a seeded Zipf request mix
running in the background so that the page has loads, evictions, events and series to draw
(--traffic-threads 0 stops it before the page is measured).

Each round opens the page in a fresh browser profile (nothing cached) and reads:
  first_render_ms  from navigation start to the models table drawn with the whole list
                   (window.warmConsole.firstRenderMs, set by the page);
  models_fetch_ms  the /console/models requests, first start to last end (resource timing);
  sort_ms          a click on the "requests" header to the next frame drawn, over all N rows;
  filter_ms        typing "m00" into the filter to the next frame drawn.

Prints one JSON object and a summary (median and worst of the rounds) on stderr.
--screenshot PATH saves the page after the last round (the README's picture).

    tools/bench/console_bench.py --models 10000 --rounds 5
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))
from browser import Browser  # noqa: E402
from warm_cli import free_port, wait_for  # noqa: E402


def infer(port, model, width):
    body = json.dumps({"inputs": [{"name": "input", "shape": [1, width], "datatype": "FP32",
                                   "data": [0.5] * width}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def zipf_traffic(port, names, width, stop, seed):
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 1.1 for i in range(len(names))]
    while not stop.is_set():
        for model in rng.choices(names, weights, k=20):
            if stop.is_set():
                return
            infer(port, model, width)
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup-seconds", type=float, default=20)
    ap.add_argument("--traffic-threads", type=int, default=2,
                    help="client threads sending the Zipf mix while the page is measured (0: quiet)")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--screenshot")
    ap.add_argument("--with-runtime", action="store_true",
                    help="a second device: build/warm-runtime, holding as many models as the host")
    a = ap.parse_args()
    warmd, warmctl = os.path.join(a.bin, "warmd"), os.path.join(a.bin, "warmctl")
    out = {"models": a.models, "traffic_threads": a.traffic_threads, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        width = 64
        src = os.path.join(tmp, "src")
        subprocess.run([warmctl, "make-model", "--out", src, "--layers", f"{width},{width},{width}",
                        "--seed", "1"], check=True, capture_output=True)
        repo = os.path.join(tmp, "repo")
        names = [f"m{i:05d}" for i in range(a.models)]
        for n in names:
            os.makedirs(os.path.join(repo, n, "1"))
            os.link(os.path.join(src, "model.safetensors"),
                    os.path.join(repo, n, "1", "model.safetensors"))
        size = os.path.getsize(os.path.join(src, "model.safetensors"))
        sock, port = os.path.join(tmp, "warm.sock"), free_port()
        proc = subprocess.Popen(
            [warmd, "--repo", repo, "--listen", "unix:" + sock, "--http", f"127.0.0.1:{port}",
             "--state", os.path.join(tmp, "state"), "--device", f"host:{size * 300}"] +
            (["--runtime", f"runtime={os.path.join(a.bin, 'warm-runtime')} --capacity {size * 300}"]
             if a.with_runtime else []),
            stdout=open(os.path.join(tmp, "warmd.log"), "w"), stderr=subprocess.STDOUT)
        try:
            if not wait_for(lambda: subprocess.run([warmctl, "--connect", "unix:" + sock, "models"],
                                                   capture_output=True).returncode == 0, 30):
                raise SystemExit("warmd did not start")
            t0 = time.monotonic()
            script = "".join(f"register {n} {n}\n" for n in names)
            subprocess.run([warmctl, "--connect", "unix:" + sock], input=script, text=True,
                           capture_output=True, check=True)
            out["register_seconds"] = round(time.monotonic() - t0, 2)
            stop = threading.Event()
            workers = [threading.Thread(target=zipf_traffic, args=(port, names, width, stop, s))
                       for s in range(max(a.traffic_threads, 1))]
            for w in workers:
                w.start()
            time.sleep(a.warmup_seconds)
            if a.traffic_threads == 0:  # the page's data made, then measured on a quiet machine
                stop.set()
                for w in workers:
                    w.join()
            try:
                for r in range(a.rounds):
                    out["rounds"].append(round_in_browser(port, a.models))
                    print(f"round {r + 1}: {out['rounds'][-1]}", file=sys.stderr)
                if a.screenshot:
                    with Browser(width=1400, height=900) as browser:
                        page = browser.new_page()
                        page.goto(f"http://127.0.0.1:{port}/")
                        page.wait_for("window.warmConsole && window.warmConsole.ready", 30)
                        time.sleep(2.5)
                        page.screenshot(a.screenshot)
            finally:
                stop.set()
                for w in workers:
                    w.join()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    for key in ["first_render_ms", "models_fetch_ms", "sort_ms", "filter_ms"]:
        values = [r[key] for r in out["rounds"]]
        out[key] = {"median": round(statistics.median(values), 1), "worst": round(max(values), 1)}
    print(json.dumps(out, indent=1))
    print(f"{a.models} models: first render median {out['first_render_ms']['median']} ms, worst "
          f"{out['first_render_ms']['worst']} ms; sort {out['sort_ms']['median']} ms, filter "
          f"{out['filter_ms']['median']} ms", file=sys.stderr)


# Runs in the page: the time from an action to the next frame drawn after it.
TIME_TO_FRAME = """
(action) => new Promise(done => {
  const t0 = performance.now();
  action();
  requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
})"""


def round_in_browser(port, models):
    with Browser(width=1400, height=900) as browser:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for(f"window.warmConsole && window.warmConsole.models === {models} && "
                      "window.warmConsole.firstRenderMs !== null", 30)
        first = page.evaluate("window.warmConsole.firstRenderMs")
        fetch = page.evaluate(
            "(() => { const e = performance.getEntriesByType('resource')"
            ".filter(r => r.name.includes('/console/models'));"
            " return Math.max(...e.map(r => r.responseEnd)) - Math.min(...e.map(r => r.startTime)); })()")
        sort = page.evaluate(
            f"({TIME_TO_FRAME})(() => document.querySelector("
            "'#models-head button[data-key=\"requests\"]').click())", await_promise=True)
        filt = page.evaluate(
            f"({TIME_TO_FRAME})(() => {{ const f = document.getElementById('model-filter');"
            " f.value = 'm00'; f.dispatchEvent(new Event('input', {bubbles: true})); })",
            await_promise=True)
        problems = page.errors()
        if problems:
            raise SystemExit(f"the page reported problems: {problems}")
        return {"first_render_ms": round(first, 1), "models_fetch_ms": round(fetch, 1),
                "sort_ms": round(sort, 1), "filter_ms": round(filt, 1)}


if __name__ == "__main__":
    main()
