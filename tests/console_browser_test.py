#!/usr/bin/python3
"""The console in a real browser (Debian's chromium, headless, driven over the DevTools protocol by
tests/support/browser.py) against a real warmd with a token (docs/console.md):

- the page asks for the token, takes it, and then shows the device and every registered model;
- it loads with no console error, no exception and no failed request but the 401 that made it ask
  for the token (none at all in a tab that holds the token), and every request it makes goes to
  warmd itself;
- a model loaded behind its back shows as LOADED within 2 s;
- a model whose id is markup (`<svg><b>id`) and a failure whose error carries
  `<img src=x onerror=alert(1)>` (its directory's name) show as text: no element is made of them
  and no script runs;
- the Unload button, once confirmed in the page, unloads the model (warmd says NOT_LOADED).

Usage: console_browser_test.py WARMD WARMCTL SOURCE_ROOT. Exits 77 (skipped) without chromium.
WARM_CONSOLE_SHOT=PATH also saves a screenshot of the page.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

warmd, warmctl, root = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.abspath(root), "tests", "support"))
from warm_cli import Checks, WarmCtl, free_port, wait_for  # noqa: E402

if not shutil.which("chromium"):
    print("console_browser_test: chromium is not installed (tools/deps installs it); skipped")
    sys.exit(77)
from browser import Browser, BrowserError  # noqa: E402

checks = Checks()
check = checks.check
cli = WarmCtl(warmctl)
TOKEN = "console-browser-token"
HOSTILE = "<img src=x onerror=alert(1)>"
MARKUP_ID = "<svg><b>id"


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def infer(port, model, width=64):
    return post(port, f"/v2/models/{urllib.request.quote(model, safe='')}/infer",
                {"inputs": [{"name": "input", "shape": [1, width], "datatype": "FP32",
                             "data": [0.25] * width}]})


def main():
    # Stopped by meson's timeout: unwind, so that warmd and chromium are stopped and removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("console_browser_test: terminated"))
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        for name in ["m0", "m1", "m2", HOSTILE]:
            cli.make_model(os.path.join(repo, name, "1"), "64,64,64", len(name))
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN)
        os.chmod(token_file, 0o600)
        sock, port = os.path.join(tmp, "warm.sock"), free_port()
        log = open(os.path.join(tmp, "warmd.log"), "w")
        proc = subprocess.Popen(
            [warmd, "--repo", repo, "--listen", "unix:" + sock, "--http", f"127.0.0.1:{port}",
             "--state", os.path.join(tmp, "state"), "--token-file", token_file,
             "--device", "host:16MiB"], stdout=log, stderr=subprocess.STDOUT)
        try:
            ctl = lambda *a: cli.run(sock, *a)  # noqa: E731
            if not wait_for(lambda: ctl("models")[0] == 0, 30):
                raise SystemExit("warmd did not start: " + open(log.name).read())
            for model, path in [("m0", "m0"), ("m1", "m1"), ("m2", "m2"), (MARKUP_ID, "m2"),
                                ("broken", HOSTILE)]:
                rc, out, err = ctl("register", model, path)
                check(rc == 0, f"register {model}: {err}")
            # Cut short after registration: its load fails, naming its path.
            hostile_file = os.path.join(repo, HOSTILE, "1", "model.safetensors")
            os.truncate(hostile_file, os.path.getsize(hostile_file) // 2)
            check(infer(port, "m0") == 200, "infer m0")
            with Browser() as browser:
                page = browser.new_page()
                # Any dialog or alert() would be script the page's data ran.
                page.add_init_script("window.alert = () => { window.__alerted = true; };")
                in_browser(page, port, ctl)
                # A tab that already holds the token: not one failed request, not even a 401.
                held = browser.new_page()
                held.add_init_script(f"sessionStorage.setItem('warm.token', {json.dumps(TOKEN)});")
                held.goto(f"http://127.0.0.1:{port}/")
                check(waited(held, "window.warmConsole && window.warmConsole.ready", 10),
                      "a tab holding the token is ready")
                time.sleep(1.5)
                check(held.errors() == [], f"a tab holding the token has no errors: {held.errors()}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"console_browser_test: {checks.failures} failure(s)")
    sys.exit(1 if checks.failures else 0)


def waited(page, expr, timeout):
    """Whether `expr` became truthy in the page within `timeout` seconds."""
    try:
        return page.wait_for(expr, timeout)
    except BrowserError as e:
        print(e)
        return False


def text(page, selector):
    return page.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''")


def state_of_row(model):
    """JavaScript: the state its row in the models table shows ('' without a row)."""
    return (f"(() => {{ const r = [...document.querySelectorAll('.mrow[data-model]')]"
            f".find(e => e.dataset.model === {json.dumps(model)});"
            f" return r ? r.querySelector('.st').textContent : ''; }})()")


def row_text(page, model):
    return page.evaluate(
        f"(() => {{ const r = [...document.querySelectorAll('[data-model]')]"
        f".find(e => e.dataset.model === {json.dumps(model)}); return r ? r.textContent : ''; }})()")


def in_browser(page, port, ctl):
    origin = f"http://127.0.0.1:{port}"
    page.goto(origin + "/")
    # No token yet: the feed answers 401 and the page asks for one.
    check(waited(page, "!document.getElementById('auth').hidden", 10),
          "the page asks for the token")
    page.type_text("#auth-token", TOKEN)
    page.click("#auth-submit")
    check(waited(page, "window.warmConsole && window.warmConsole.ready", 10),
          "the page is ready once it has the token")
    check("host" in text(page, "#devices"), f"the device is shown: {text(page, '#devices')[:200]}")
    check("m0" in text(page, "#devices"), "m0, resident, is shown on its device")
    count = text(page, "#models-count")
    check("5" in count, f"every registered model is counted: {count!r}")
    check(page.evaluate(state_of_row("m0")) == "LOADED", f"m0's row: {row_text(page, 'm0')!r}")

    # Loaded behind the page's back: shown within 2 s.
    check(infer(port, "m1") == 200, "infer m1")
    t0 = time.monotonic()
    shown = waited(page, state_of_row("m1") + " === 'LOADED'", 5)
    took = time.monotonic() - t0
    check(shown and took <= 2.0, f"m1's load shows within 2 s (took {took:.2f} s)")

    # Hostile text: the markup id's row and the failure's error show as text, and nothing runs.
    check(infer(port, MARKUP_ID) == 200, "infer the markup id")
    check(infer(port, "broken") in (400, 503), "infer broken fails")
    check(waited(page, f"document.body.innerText.includes({json.dumps(HOSTILE)})", 5),
          "the failure's error shows its hostile path as text")
    check(waited(page, 
        f"[...document.querySelectorAll('[data-model]')].some(e => e.dataset.model === "
        f"{json.dumps(MARKUP_ID)} && e.textContent.includes({json.dumps(MARKUP_ID)}))", 5),
        "the markup id's row shows the id as text")
    time.sleep(1.5)  # a few more feeds, drawn
    made = page.evaluate("document.querySelectorAll('img[src=\"x\"], main svg b, #events img').length")
    check(made == 0, f"no element was made of the hostile text ({made})")
    check(page.evaluate("window.__alerted === undefined"), "no script of the hostile text ran")

    # Unload through the page, confirmed in it.
    page.click("[data-model='m1'] [data-action='unload']")
    check(waited(page, "document.getElementById('confirm').open", 5),
          "the page asks for a confirmation")
    check(json.loads(ctl("--json", "status", "m1")[1])["state"] == "LOADED",
          "nothing happens before the confirmation")
    page.click("#confirm-ok")
    state = lambda: json.loads(ctl("--json", "status", "m1")[1] or "{}").get("state")  # noqa: E731
    check(wait_for(lambda: state() == "NOT_LOADED", 5), f"m1 was unloaded: {state()}")
    check(waited(page, state_of_row("m1") + " === 'NOT_LOADED'", 5),
          "the page shows m1 NOT_LOADED")

    shot = os.environ.get("WARM_CONSOLE_SHOT")
    if shot:
        page.screenshot(shot)
    problems = page.errors(allow=[r"\b401\b"])
    check(problems == [], f"no console error, exception or failed request: {problems}")
    foreign = [u for u in page.requests_outside(origin) if not u.startswith("data:")]
    check(foreign == [], f"every request goes to warmd: {foreign}")


if __name__ == "__main__":
    main()
