#!/usr/bin/python3
"""The browser harness (tests/support/browser.py) against fixture pages served on loopback: a
clean page reports nothing and requests nothing elsewhere; a console.error, an uncaught
exception, a fetch answered 404 and an inline script blocked by a Content-Security-Policy header
are each reported, by their text, and an alert() is dismissed; wait_for sees a change made 300 ms
later and gives up on time; extra headers and init scripts apply; click, type_text and press act
as a user would, and click refuses missing or covered elements; evaluate returns values and
raises on a thrown error; screenshot writes a PNG; close() leaves no process and no directory
behind. Skipped (77) without chromium. About 4 s.

Usage: browser_harness_test.py
"""
import functools
import http.server
import os
import signal
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from browser import Browser, BrowserError, JSError, find_chromium, live_processes  # noqa: E402
from warm_cli import Checks  # noqa: E402

if not find_chromium():
    print("SKIP: no chromium (apt-get install chromium)")
    sys.exit(77)

checks = Checks()
check = checks.check

HEAD = '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,">'
FIXTURES = {
    "clean.html": HEAD + '<h1 id="h">loading</h1><script src="/clean.js"></script>',
    "clean.js": 'document.getElementById("h").textContent = "clean";',
    "console.html": HEAD + '<script src="/console.js"></script>',
    # An alert() left open would hold the load event back: the harness dismisses it.
    "console.js": 'console.log("just a log"); console.warn("just a warning");'
                  'console.error("harness console marker", 42); alert("dialog marker");',
    "throw.html": HEAD + '<script src="/throw.js"></script>',
    "throw.js": 'setTimeout(() => { throw new Error("harness exception marker"); }, 0);',
    "fetch.html": HEAD + '<script src="/fetch.js"></script>',
    "fetch.js": 'fetch("/missing.json")'
                '.then(r => { document.documentElement.dataset.status = r.status; });',
    "csp.html": HEAD + '<script>document.title = "inline ran";</script>'
                       '<script src="/csp.js"></script>',
    "csp.js": 'document.documentElement.dataset.external = "ran";',
    "timer.html": HEAD + '<p id="late">early</p><script src="/timer.js"></script>',
    "timer.js": 'setTimeout(() => {'
                '  document.getElementById("late").textContent = "arrived"; }, 300);',
    "click.html": HEAD + '<button id="b">press</button> <span id="out">untouched</span>'
                         '<form id="f"><input id="i"></form> <span id="echo"></span>'
                         '<div style="height:2000px"></div><button id="far">far</button>'
                         '<button id="under">under</button>'
                         '<div style="position:fixed;inset:0;background:#eee;display:none"'
                         ' id="cover"></div><script src="/click.js"></script>',
    "click.js": 'let n = 0;'
                'document.getElementById("b").addEventListener("click", e => {'
                '  document.getElementById("out").textContent = "clicked " + (++n) +'
                '    (e.isTrusted ? " trusted" : " synthetic"); });'
                'document.getElementById("far").addEventListener("click", () => {'
                '  document.getElementById("out").textContent = "far clicked"; });'
                'document.getElementById("under").addEventListener("click", () => {'
                '  document.getElementById("out").textContent = "under clicked"; });'
                'document.getElementById("i").addEventListener("input", e => {'
                '  document.getElementById("echo").textContent = e.target.value; });'
                'document.getElementById("f").addEventListener("submit", e => {'
                '  e.preventDefault(); document.getElementById("echo").textContent += " sent"; });'
                # A cover over the whole page once the far button has been clicked.
                'document.getElementById("far").addEventListener("click", () => {'
                '  document.getElementById("cover").style.display = "block"; });',
}


seen_headers = {}  # path -> the X-Harness header it came with


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        seen_headers[self.path] = self.headers.get("X-Harness")
        super().do_GET()

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        if self.path.startswith("/csp"):
            self.send_header("Content-Security-Policy", "script-src 'self'")
        super().end_headers()

    def log_message(self, *args):
        pass


def main(site):
    for name, text in FIXTURES.items():
        with open(os.path.join(site, name), "w") as f:
            f.write(text)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Handler, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_port}"

    started = time.monotonic()
    with Browser(timeout=10) as browser:
        print(f"{browser.version}, up in {time.monotonic() - started:.2f} s", flush=True)
        pid, profile = browser.pid, browser.dir

        # A clean page: nothing reported, nothing requested beyond the origin.
        page = browser.new_page()
        page.goto(origin + "/clean.html")
        check(page.evaluate('document.getElementById("h").textContent') == "clean",
              "clean.js ran before the load event")
        check(page.errors() == [], f"a clean page reports nothing: {page.errors()}")
        check(page.requests_outside(origin) == [] and origin + "/clean.js" in page.requests,
              f"requests stay on the origin: {page.requests}")
        check(page.requests_outside("http://127.0.0.1:1") != [],
              "requests_outside sees requests to another origin")

        # Each problem reported, and only it.
        page = browser.new_page()
        page.goto(origin + "/console.html")
        check(page.errors() == ["console.error: harness console marker 42"],
              f"console.error reported (and log/warn not): {page.errors()}")
        check(("warning", "just a warning") in page.console, f"console recorded: {page.console}")
        check(page.dialogs == [("alert", "dialog marker")], f"alert dismissed: {page.dialogs}")

        page = browser.new_page()
        page.goto(origin + "/throw.html")
        errors = _settle(page, wait=True)
        check(len(errors) == 1 and errors[0].startswith("uncaught exception: Error: harness "
                                                        "exception marker"),
              f"an uncaught exception reported: {errors}")

        page = browser.new_page()
        page.goto(origin + "/fetch.html")
        check(page.wait_for("document.documentElement.dataset.status", timeout=5) == "404",
              "the fetch was answered")
        errors = _settle(page)
        check(errors == [f"HTTP 404 for GET {origin}/missing.json"],
              f"a 404 reported once: {errors}")
        check(page.errors(allow=[r"/missing\.json$"]) == [], "allow= drops an expected problem")

        page = browser.new_page()
        page.goto(origin + "/csp.html")
        check(page.wait_for("document.documentElement.dataset.external", timeout=5) == "ran",
              "the CSP page's own script ran")
        check(page.evaluate("document.title") != "inline ran", "the inline script was blocked")
        errors = _settle(page, wait=True)
        check(len(errors) == 1 and "Executing inline script violates the following Content "
              "Security Policy directive 'script-src 'self''" in errors[0],
              f"the CSP violation reported: {errors}")

        # Waiting: a change made 300 ms later is seen, and a wait that never holds ends on time.
        # Also: headers added to every request, and a script run before the page's own.
        page = browser.new_page()
        page.set_extra_headers({"X-Harness": "present"})
        page.add_init_script("window.initSaw = document.readyState;")
        t = time.monotonic()
        page.goto(origin + "/timer.html")
        seen = page.wait_for('document.getElementById("late").textContent === "arrived" && '
                             'document.getElementById("late").textContent', timeout=5)
        waited = time.monotonic() - t
        check(seen == "arrived" and waited >= 0.3, f"wait_for saw the change ({waited:.2f} s)")
        check(seen_headers.get("/timer.js") == "present", f"extra headers sent: {seen_headers}")
        check(page.evaluate("window.initSaw") == "loading", "the init script ran before the page's")
        t = time.monotonic()
        try:
            page.wait_for('document.getElementById("nothing").textContent', timeout=0.5)
            check(False, "wait_for on what never holds raises")
        except BrowserError as e:
            check(0.5 <= time.monotonic() - t < 5 and "Cannot read properties of null" in str(e),
                  f"wait_for gives up on time, with the last exception: {e}")

        # Clicking and typing as a user.
        page = browser.new_page()
        page.goto(origin + "/click.html")
        page.click("#b")
        check(page.wait_for('document.getElementById("out").textContent.startsWith("clicked") &&'
                            'document.getElementById("out").textContent', timeout=5)
              == "clicked 1 trusted", "click ran the button's handler with a trusted event")
        page.click("#far")  # 2000 px below: scrolled into view first
        check(page.wait_for('document.getElementById("out").textContent === "far clicked"',
                            timeout=5), "click scrolls to a button out of view")
        for selector, why in (("#nope", "no element matches"), ("#under", "covered by")):
            try:
                page.click(selector)
                check(False, f"click({selector!r}) raises")
            except BrowserError as e:
                check(why in str(e), f"click({selector!r}) says why: {e}")
        check(page.evaluate('document.getElementById("out").textContent') == "far clicked",
              "a refused click clicked nothing")
        page.type_text("#i", "héllo")
        page.type_text("#i", " there")
        check(page.evaluate('document.getElementById("echo").textContent') == "héllo there",
              "type_text fires input events and appends")
        page.press("Enter")
        check(page.wait_for('document.getElementById("echo").textContent.endsWith(" sent")',
                            timeout=5), "Enter submits the form")
        page.type_text("#i", "fresh", clear=True)
        check(page.evaluate('document.getElementById("i").value') == "fresh", "clear=True replaces")

        # evaluate: values, and a thrown error raised with its text.
        check(page.evaluate('({a: [1, "x", null], b: 1.5})') == {"a": [1, "x", None], "b": 1.5},
              "evaluate returns JSON values")
        check(page.evaluate("undefined") is None, "undefined is None")
        check(page.evaluate("Promise.resolve(7)", await_promise=True) == 7, "awaits a promise")
        try:
            page.evaluate('(() => { throw new TypeError("eval marker"); })()')
            check(False, "evaluate raises on a thrown error")
        except JSError as e:
            check(str(e).startswith("TypeError: eval marker"), f"JSError carries the text: {e}")
        check(page.errors() == [], f"the click page reports nothing: {page.errors()}")

        shot = page.screenshot(os.path.join(site, "shot.png"))
        with open(shot, "rb") as f:
            png = f.read()
        check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000, f"a PNG ({len(png)} bytes)")
        full = page.screenshot(os.path.join(site, "full.png"), full_page=True)
        check(os.path.getsize(full) > len(png) // 2, "a full-page PNG")

    # Gone: the browser (reaped), every helper in its process group, and its profile. Helpers
    # are reparented to init once the browser ends, so they may linger as zombies: not counted.
    try:
        os.waitpid(pid, os.WNOHANG)
        check(False, f"close() reaped chromium ({pid})")
    except ChildProcessError:
        pass
    check(live_processes(pid) == [], f"close() ended chromium's helpers: {live_processes(pid)}")
    check(not os.path.exists(profile), f"close() removed {profile}")
    browser.close()  # twice is harmless

    # A browser that died (SIGKILL) leaving hung helpers (its renderers, stopped): close() ends
    # them too, promptly.
    with Browser(timeout=10) as browser:
        browser.new_page().goto(origin + "/clean.html")
        pid = browser.pid
        renderers = [p for p in live_processes(pid) if b"--type=renderer" in _cmdline(p)]
        check(renderers != [], "chromium's renderers found")
        for p in renderers:
            os.kill(p, signal.SIGSTOP)
        os.kill(pid, signal.SIGKILL)
        t = time.monotonic()
    took, left = time.monotonic() - t, live_processes(pid)
    check(took < 4 and left == [], f"close() after a crash: {left} left, {took:.1f} s")
    server.shutdown()
    print(f"{time.monotonic() - started:.1f} s", flush=True)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _settle(page, wait=False):
    """The page's errors once late events (an exception from a timer, a log entry) are in; with
    wait, once there is at least one (for 5 s at most)."""
    if wait:
        try:
            page.browser.wait(page.errors, 5, "an error")
        except BrowserError:
            pass
    time.sleep(0.3)
    return page.errors()


with tempfile.TemporaryDirectory(prefix="warm-browser-test-") as site:
    try:
        main(site)
    except Exception:  # noqa: BLE001 -- a harness failure is this test's failure, said plainly
        traceback.print_exc(file=sys.stdout)
        checks.check(False, "the harness raised (above)")
if checks.failures:
    print(f"{checks.failures} check(s) failed")
    sys.exit(1)
print("ok")
