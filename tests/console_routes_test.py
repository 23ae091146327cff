#!/usr/bin/python3
"""The console's routes on a real warmd (docs/console.md), over plain HTTP: the page and its
assets with their security headers; the feed's devices, residents in eviction order, events
(loaded, evicted for room, unloaded, failed) and series with their rates and latency; the models'
pages; the four actions; every refusal (unknown parameters, malformed and oversized bodies,
methods, unknown models); with --token-file, the page open and every data route and action
closed without the token; with --no-console, none of it.

Usage: console_routes_test.py WARMD WARMCTL SOURCE_ROOT.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

warmd, warmctl, root = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.abspath(root), "tests", "support"))
from warm_cli import Checks, WarmCtl, free_port, wait_for  # noqa: E402

checks = Checks()
check = checks.check
cli = WarmCtl(warmctl)


def http(port, method, path, body=None, token=None, headers=None):
    """(status, headers, body bytes) of one request to 127.0.0.1:port."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(port, path, token=None):
    status, _, body = http(port, "GET", path, token=token)
    return status, json.loads(body or b"{}")


class Server:
    def __init__(self, work, repo, extra=()):
        os.makedirs(work, exist_ok=True)
        self.sock = os.path.join(work, "warm.sock")
        self.repo = repo
        self.token_file = next((extra[i + 1] for i, a in enumerate(extra) if a == "--token-file"),
                               None)
        self.port = free_port()
        self.log = os.path.join(work, "warmd.log")
        self.proc = subprocess.Popen(
            [warmd, "--repo", repo, "--listen", "unix:" + self.sock, "--http",
             f"127.0.0.1:{self.port}", "--state", os.path.join(work, "state"), *extra],
            stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        if not wait_for(lambda: self.ready(), 60):
            print(open(self.log).read())
            raise SystemExit("warmd did not start")

    def ready(self):
        try:
            return http(self.port, "GET", "/v2/health/ready")[0] == 200
        except OSError:
            return False

    def ctl(self, *args, token_file=None):
        pre = ["--token-file", token_file] if token_file else []
        return cli.run(self.sock, *pre, *args)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def infer(port, model, width):
    body = {"inputs": [{"name": "input", "shape": [1, width], "datatype": "FP32",
                        "data": [0.5] * width}]}
    return http(port, "POST", f"/v2/models/{model}/infer", body)[0]


def events(port, kind=None, model=None):
    _, feed = get_json(port, "/console/feed")
    return [e for e in feed.get("events", [])
            if (kind is None or e["kind"] == kind) and (model is None or e["model"] == model)]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        # Five dense models of 1 MiB-ish each; the device holds two of them.
        for i in range(5):
            cli.make_model(os.path.join(repo, f"m{i}", "1"), "256,512,256", i)
        size = os.path.getsize(os.path.join(repo, "m0", "1", "model.safetensors"))
        # A model registered whole and cut short after: its load fails.
        cli.make_model(os.path.join(repo, "broken", "1"), "256,512,256", 9)
        s = Server(os.path.join(tmp, "a"), repo, ["--device", f"host:{int(size * 2.5)}"])
        try:
            plain(s, size)
        finally:
            s.stop()
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write("s3cret-console-token\n")
        os.chmod(token_file, 0o600)
        # Served models too: a new version directory moves m1's default version, an event.
        t = Server(os.path.join(tmp, "b"), repo,
                   ["--token-file", token_file, "--serve-repo", "--version-settle", "0s"])
        try:
            with_token(t, "s3cret-console-token")
        finally:
            t.stop()
        n = Server(os.path.join(tmp, "c"), repo, ["--no-console"])
        try:
            for path in ["/", "/console", "/console/console.js", "/console/feed"]:
                status = http(n.port, "GET", path)[0]
                check(status == 404, f"--no-console: GET {path} is {status}, not 404")
            check(http(n.port, "GET", "/v2")[0] == 200, "--no-console keeps the V2 routes")
        finally:
            n.stop()
    print(f"console_routes_test: {checks.failures} failure(s)")
    sys.exit(1 if checks.failures else 0)


def plain(s, size):
    port = s.port
    # The page and its assets, with a policy that allows only warmd's own script and style.
    status, headers, body = http(port, "GET", "/")
    check(status == 200 and headers.get("Content-Type", "").startswith("text/html"),
          f"GET / answers the page: {status} {headers.get('Content-Type')}")
    csp = headers.get("Content-Security-Policy", "")
    check("script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp,
          f"the page's Content-Security-Policy: {csp!r}")
    check(headers.get("X-Content-Type-Options") == "nosniff", "nosniff on the page")
    check(b"/console/console.js" in body, "the page loads its script from warmd")
    check(not re.search(rb"""(src|href|action)\s*=\s*["']?(https?:)?//""", body),
          "the page loads nothing from another site")
    for path, kind in [("/console", "text/html"), ("/console/console.js", "application/javascript"),
                       ("/console/console.css", "text/css")]:
        status, headers, body = http(port, "GET", path)
        check(status == 200 and headers.get("Content-Type", "").startswith(kind) and body,
              f"GET {path}: {status} {headers.get('Content-Type')}")
    status, _, _ = http(port, "GET", "/console/nothing.js")
    check(status == 404, f"an asset warmd does not have is 404, not {status}")

    # Registered models, a page at a time, in id order.
    for i in range(5):
        check(s.ctl("register", f"m{i}", f"m{i}")[0] == 0, f"register m{i}")
    check(s.ctl("register", "broken", "broken")[0] == 0, "register broken")
    with open(os.path.join(s.repo, "broken", "1", "model.safetensors"), "r+b") as f:
        f.truncate(size // 2)
    ids, after, pages = [], "", 0
    while True:
        status, page = get_json(port, "/console/models?limit=3" + (f"&after={after}" if after else ""))
        check(status == 200, f"models page: {status} {page}")
        if status != 200:
            break
        pages += 1
        ids += [row[0] for row in page["rows"]]
        if page["next"] is None:
            break
        after = page["next"]
    # Six models, three a page: the second page says it is the last (no empty third asked for).
    check(ids == ["broken", "m0", "m1", "m2", "m3", "m4"] and pages == 2,
          f"the models' pages list each model once in id order: {ids} in {pages} pages")
    check(page["columns"][:2] == ["id", "state"], f"columns: {page['columns']}")

    # Uses: m0, m1 load; m2 needs room, so the policy evicts one of them for room.
    for m in ["m0", "m1"]:
        check(infer(port, m, 256) == 200, f"infer {m}")
    status, feed = get_json(port, "/console/feed")
    check(status == 200, f"feed: {status}")
    dev = feed["devices"][0]
    residents = sorted(r["model"] for r in dev["residents"])
    check(residents == ["m0", "m1"] and dev["residents_total"] == 2,
          f"the device's residents: {residents}")
    check(dev["capacity"] == int(size * 2.5) and
          dev["used"] == sum(r["bytes"] for r in dev["residents"]) > size,
          f"capacity and used: {dev['capacity']} {dev['used']} {dev['residents']}")
    check(feed["totals"]["registered"] == 6 and feed["totals"]["loaded"] == 2,
          f"totals: {feed['totals']}")
    victim = dev["residents"][0]["model"]  # the policy's next victim, first
    check(infer(port, "m2", 256) == 200, "infer m2")
    evicted = wait_for(lambda: events(port, "evicted", victim), 5) and events(port, "evicted", victim)
    check(bool(evicted) and evicted[0]["reason"] == "capacity" and evicted[0]["device"] == dev["name"],
          f"the first resident listed ({victim}) was evicted for room: {evicted}")
    loaded = events(port, "loaded", "m2")
    check(bool(loaded) and loaded[0]["from"] == "LOADING" and loaded[0]["to"] == "LOADED",
          f"m2's load is an event: {loaded}")

    # Events after a number: only the newer ones, newest first.
    _, feed = get_json(port, "/console/feed")
    last = feed["events_last"]
    seqs = [e["seq"] for e in feed["events"]]
    check(seqs == sorted(seqs, reverse=True) and seqs[0] == last, f"events newest first: {seqs}")
    _, newer = get_json(port, f"/console/feed?events_after={last}")
    check(newer["events"] == [], f"nothing after the newest: {newer['events']}")

    # The series: a point a second, its rate and latency from what was served in that second.
    for _ in range(20):
        infer(port, "m2", 256)
    ok = wait_for(lambda: any(p["requests_per_second"] >= 5 and p["p99_ms"] > 0
                              for p in get_json(port, "/console/feed")[1]["series"]["points"]), 5)
    points = get_json(port, "/console/feed")[1]["series"]["points"]
    check(ok, f"a point counts the 20 requests with their latency: {points[-3:]}")
    check(all(b["t"] > a["t"] for a, b in zip(points, points[1:])), "points in time order")
    newest = points[-1]["t"]
    _, later = get_json(port, f"/console/feed?series_after={newest}")
    check(all(p["t"] > newest for p in later["series"]["points"]),
          "series_after gives only newer points")
    hit_points = [p for p in points if p["requests_per_second"] >= 5]
    check(bool(hit_points) and hit_points[-1]["hit_ratio"] > 0.8,
          f"the hits' ratio: {hit_points[-1:]}")

    # A failed load: a failure record and an event carrying its error.
    check(infer(port, "broken", 4) in (400, 503), "infer broken fails")
    # (A snapshot is shared for 250 ms: the record shows in the next one.)
    failures = lambda: [f for f in get_json(port, "/console/feed")[1]["failures"]  # noqa: E731
                        if f["model"] == "broken"]
    wait_for(failures, 2)
    failed, feed = failures(), get_json(port, "/console/feed")[1]
    check(len(failed) == 1 and failed[0]["expires_in_seconds"] > 0 and failed[0]["error"],
          f"the failure record: {feed['failures']}")
    check(bool(events(port, "failed", "broken")) and events(port, "failed", "broken")[0]["error"],
          "the failure is an event with its error")

    # Actions.
    status, _, body = http(port, "POST", "/console/actions/unload", {"model": "m2"})
    check(status == 200, f"unload: {status} {body}")
    check(wait_for(lambda: events(port, "unloaded", "m2"), 5), "the unload is an event")
    state = lambda m: json.loads(s.ctl("--json", "status", m)[1] or "{}").get("state")  # noqa: E731
    check(state("m2") == "NOT_LOADED", f"m2 after unload: {state('m2')}")
    status, _, body = http(port, "POST", "/console/actions/load", {"model": "m3"})
    check(status == 200 and state("m3") == "LOADED", f"load: {status} {body} {state('m3')}")
    status, _, body = http(port, "POST", "/console/actions/retry", {"model": "broken"})
    check(status == 200, f"retry: {status} {body}")
    time.sleep(0.3)
    check(not failures(), "retry forgets the failure record")
    check(s.ctl("vmodel", "set", "v", "m0")[0] == 0, "vmodel set")
    status, _, body = http(port, "POST", "/console/actions/move", {"vmodel": "v", "target": "m4"})
    moved = json.loads(body or b"{}")
    check(status == 200 and moved.get("target") == "m4", f"move: {status} {body}")
    out = s.ctl("--json", "vmodel", "status", "v")[1]
    check('"m4"' in out, f"the vmodel moves to m4: {out}")

    # Refusals: each a clear error, nothing changed.
    for path in ["/console/feed?evil=1", "/console/feed?events_after=-1",
                 "/console/feed?events_after=1&events_after=2", "/console/feed?series_after=x",
                 "/console/models?limit=0", "/console/models?limit=5001",
                 "/console/models?after=" + "a" * 1100]:
        status, body = get_json(port, path)
        check(status == 400 and body.get("error"), f"GET {path[:60]}: {status} {body}")
    for body, what in [(b"not json", "not JSON"), (b"[1]", "an array"), ({}, "no model"),
                       ({"model": 3}, "a number"), ({"model": ""}, "empty"),
                       ({"model": "m0", "also": 1}, "an unknown field")]:
        status, _, answer = http(port, "POST", "/console/actions/unload", body)
        check(status == 400 and b"error" in answer, f"an action with {what}: {status} {answer}")
    status, _, answer = http(port, "POST", "/console/actions/move", {"vmodel": "v"})
    check(status == 400, f"move without a target: {status} {answer}")
    status, _, answer = http(port, "POST", "/console/actions/load", {"model": "nobody"})
    check(status == 404, f"an unknown model is 404: {status} {answer}")
    status, _, answer = http(port, "POST", "/console/actions/unload",
                             {"model": "m0", "pad": "x" * 5000})
    check(status == 413, f"an action body over 4 KiB is 413: {status} {answer}")
    status, headers, _ = http(port, "POST", "/console/feed", {})
    check(status == 405 and "GET" in headers.get("Allow", ""), f"POST on the feed: {status}")
    status, headers, _ = http(port, "GET", "/console/actions/unload")
    check(status == 405 and headers.get("Allow") == "POST", f"GET on an action: {status}")
    check(state("m0") in ("LOADED", "NOT_LOADED"), "the refusals changed nothing fatal")
    check(s.proc.poll() is None, "warmd still runs")


def with_token(s, token):
    port = s.port
    check(http(port, "GET", "/")[0] == 200, "the page is served without the token")
    check(http(port, "GET", "/console/console.js")[0] == 200, "so is its script")
    for path in ["/console/feed", "/console/models"]:
        check(http(port, "GET", path)[0] == 401, f"GET {path} without the token is 401")
        check(http(port, "GET", path, token="wrong")[0] == 401, f"GET {path} with a wrong token")
        check(http(port, "GET", path, token=token)[0] == 200, f"GET {path} with the token")
    check(http(port, "POST", "/console/actions/load", {"model": "m0"})[0] == 401,
          "an action without the token is 401")
    status, _, body = http(port, "POST", "/console/actions/load", {"model": "nobody"}, token=token)
    check(status == 404, f"an action with the token reaches the runtime: {status} {body}")

    def version_events():
        _, feed = get_json(port, "/console/feed", token=token)
        return [e for e in feed.get("events", []) if e["kind"] == "version" and e["model"] == "m1"]
    first = wait_for(lambda: [e for e in version_events() if e["to"] == "1"], 10)
    check(first, f"m1 serving version 1 is an event: {version_events()}")
    # Written beside the repository and renamed in whole (--version-settle 0s takes it at once).
    staged = os.path.join(os.path.dirname(s.repo), "m1-v2")
    shutil.copytree(os.path.join(s.repo, "m1", "1"), staged)
    os.rename(staged, os.path.join(s.repo, "m1", "2"))
    wait_for(lambda: version_events()[0]["to"] == "2", 15)
    moved = version_events()
    check(bool(moved) and moved[0]["from"] == "1" and moved[0]["to"] == "2",
          f"m1's default version moving from 1 to 2 is an event: {version_events()}")


if __name__ == "__main__":
    main()
