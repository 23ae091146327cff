"""A small driver for headless Chromium over the Chrome DevTools Protocol, for tests that need a
real browser (the console page). Standard library only: it speaks CDP over --remote-debugging-pipe
(Chromium reads NUL-terminated JSON messages on its fd 3 and writes them on its fd 4), so no
websocket library is needed.

The contract:
  * Browser(...) launches Chromium (WARM_CHROMIUM, else Debian's /usr/lib/chromium/chromium, else
    `chromium` on PATH; find_chromium() says which, or None) in its own process group with a
    fresh profile in a temporary directory (Browser.dir). Use it as a context manager: close()
    always kills the whole process group and removes the directory, also when the test raised,
    and may be called twice (its crash handlers, in sessions of their own, end with the browser).
    Chromium's output goes to <dir>/chromium.log, quoted when Chromium dies under a test.
  * Every wait has a timeout (the Browser's `timeout` unless given), so a test never hangs: it
    raises BrowserError (or JSError for an exception thrown by the page's JavaScript).
  * A Page records, from the moment it is made: console calls (Runtime.consoleAPICalled),
    uncaught exceptions, Log entries (CSP violations, failed resource loads), failed requests,
    responses with a status >= 400, every requested URL, and dialogs (which it dismisses at once,
    so an alert() never blocks a test). errors() turns the problems among them into readable
    lines; `allow` takes regular expressions for the ones a test expects. Note that a page
    without <link rel="icon"> makes Chromium request /favicon.ico, and a 404 there is reported.
  * If the Python process dies without close(), Chromium sees its pipe end and exits by itself
    (within a second or so); only the temporary directory stays behind.
"""
import base64
import fcntl
import itertools
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time

ERROR_LEVELS = ("error", "assert")  # console call types and Log levels that count as errors


class BrowserError(Exception):
    """The browser, the protocol or a wait failed."""


class JSError(BrowserError):
    """JavaScript evaluated in the page threw; the message is the exception's text."""


def live_processes(pgid):
    """The processes of process group `pgid` still running (zombies are not counted)."""
    pids = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or one that just ended
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            pids.append(int(name))
    return pids


def find_chromium():
    """The Chromium executable to run, or None when there is none."""
    for path in (os.environ.get("WARM_CHROMIUM"), "/usr/lib/chromium/chromium",
                 shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


class Browser:
    def __init__(self, width=1400, height=900, timeout=30, executable=None, args=()):
        self.width, self.height, self.timeout = width, height, timeout
        self.executable = executable or find_chromium()
        if not self.executable:
            raise BrowserError("no chromium executable (install Debian's chromium)")
        self.pid = None
        self.dir = tempfile.mkdtemp(prefix="warm-browser-")
        self._cv = threading.Condition()
        self._ids = itertools.count(1)
        self._replies = {}
        self._pages = {}  # sessionId -> Page
        self._dead = None  # why the connection ended, once it has
        self._send_lock = threading.Lock()
        self._to_chrome = self._from_chrome = None
        self._reader = None
        try:
            self._launch(args)
            started = time.monotonic()
            self.version = self.call("Browser.getVersion")["product"]
            self.launch_seconds = time.monotonic() - started
        except BaseException:
            self.close()
            raise

    def _launch(self, extra):
        # Pipe ends are duplicated above 10 so that placing them on 3 and 4 in the child cannot
        # overwrite one with the other; posix_spawn (not a preexec_fn) is safe with threads about.
        def high(fd):
            if fd >= 10:
                return fd
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return moved
        child_in, self._to_chrome = map(high, os.pipe())
        self._from_chrome, child_out = map(high, os.pipe())
        argv = [self.executable, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--user-data-dir=" + os.path.join(self.dir, "profile"), "--no-first-run",
                "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--metrics-recording-only", "--mute-audio", "--disable-dev-shm-usage",
                "--password-store=basic", "--use-mock-keychain", "--disable-crash-reporter",
                # Timers of a page in a background tab are otherwise throttled to once a second.
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows",
                f"--window-size={self.width},{self.height}", *extra, "about:blank"]
        log = high(os.open(os.path.join(self.dir, "chromium.log"), os.O_WRONLY | os.O_CREAT))
        null = high(os.open(os.devnull, os.O_RDONLY))
        try:
            # Its crash handler keeps a database under $XDG_CONFIG_HOME: keep that in self.dir.
            env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
                       XDG_CACHE_HOME=os.path.join(self.dir, "cache"))
            self.pid = os.posix_spawn(self.executable, argv, env, setpgroup=0, file_actions=[
                (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2), (os.POSIX_SPAWN_DUP2, child_in, 3),
                (os.POSIX_SPAWN_DUP2, child_out, 4)])
        finally:
            for fd in (log, null, child_in, child_out):
                os.close(fd)
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    # The protocol: one reader thread, replies matched by id, events handed to their page.

    def _read(self):
        parts = []  # of the message not yet complete (a screenshot takes many reads)
        try:
            while True:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    break
                if b"\0" not in chunk:
                    parts.append(chunk)
                    continue
                first, *messages, rest = chunk.split(b"\0")
                for raw in [b"".join(parts) + first, *messages]:
                    self._dispatch(json.loads(raw))
                parts = [rest]
        except Exception as e:  # noqa: BLE001 -- every wait must hear of it, not time out
            reason = f"the harness failed reading from chromium: {e!r}"
        else:
            reason = "chromium closed its end of the pipe"
        with self._cv:
            self._dead = reason
            self._cv.notify_all()

    def _dispatch(self, msg):
        with self._cv:
            if "id" in msg:
                self._replies[msg["id"]] = msg
            elif msg.get("sessionId") in self._pages:
                self._pages[msg["sessionId"]]._event(msg["method"], msg.get("params", {}))
            self._cv.notify_all()

    def send(self, method, params=None, session=None):
        """Sends one command without waiting for its reply; its id."""
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        with self._send_lock:
            try:
                while data:
                    data = data[os.write(self._to_chrome, data):]
            except OSError as e:
                raise BrowserError(f"{method}: chromium is gone ({e}){self._log_tail()}") from None
        return msg_id

    def call(self, method, params=None, session=None, timeout=None):
        """Sends one command and returns its result; raises BrowserError on an error reply."""
        msg_id = self.send(method, params, session)
        reply = self.wait(lambda: self._replies.pop(msg_id, None), timeout,
                          f"the reply to {method}")
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')} "
                               f"{reply['error'].get('data', '')}".rstrip())
        return reply.get("result", {})

    def wait(self, predicate, timeout=None, what="a condition"):
        """Waits until predicate() (run under the lock that events are recorded under) is truthy;
        its value. Raises if the time runs out or chromium goes away first."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._cv:
            while True:
                value = predicate()
                if value:
                    return value
                if self._dead:
                    raise BrowserError(f"waiting for {what}: {self._dead}{self._log_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"timed out waiting for {what}")
                self._cv.wait(left)

    def _log_tail(self):
        try:
            with open(os.path.join(self.dir, "chromium.log"), errors="replace") as f:
                return "\nchromium's log ends:\n" + f.read()[-2000:]
        except OSError:
            return ""

    # Pages and the end.

    def new_page(self):
        """A new tab at about:blank, its events recorded from the start."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        with self._cv:
            self._pages[session] = page
        for domain in ("Page", "Runtime", "Network", "Log"):
            page.call(domain + ".enable")
        page.call("Emulation.setDeviceMetricsOverride", {
            "width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return page

    def close(self):
        """Ends chromium (politely, then the whole process group with SIGKILL) and removes its
        profile. Safe to call more than once and from a failed constructor."""
        if self.pid:
            polite = 0
            if self._reader and not self._dead:
                try:
                    self.send("Browser.close")
                    polite = 5
                except BrowserError:
                    pass
            deadline = time.monotonic() + polite
            while time.monotonic() < deadline and os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                time.sleep(0.02)
            try:
                os.killpg(self.pid, signal.SIGKILL)  # helpers (renderers, zygotes) too
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass  # reaped in the loop above
            # The helpers are not our children: wait (briefly) until the signal has ended them.
            deadline = time.monotonic() + 5
            while live_processes(self.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.pid = None
        if self._reader:
            self._reader.join(5)  # it sees the end of the pipe once chromium is gone
        for attr in ("_to_chrome", "_from_chrome"):
            fd = getattr(self, attr)
            if fd is not None:
                setattr(self, attr, None)
                try:
                    os.close(fd)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    """One tab: what it recorded, and the means to drive it."""

    def __init__(self, browser, target, session):
        self.browser, self.target, self.session = browser, target, session
        self.console = []  # (type, text) of every console call
        self.exceptions = []  # text of every uncaught exception
        self.log = []  # (level, source, text, url, requestId) of every Log entry
        self.failed = []  # (url, reason, requestId) of every request that failed
        self.bad_responses = []  # (status, method, url, requestId) of every status >= 400
        self.requests = []  # every URL requested, in order (WebSockets too)
        self.dialogs = []  # (type, message) of every dialog, each dismissed at once
        self.crashed = False
        self._methods = {}  # requestId -> (method, url)
        self._loads = 0

    def _event(self, method, p):
        # Runs on the reader thread, under the browser's lock: record, never wait.
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", a.get("type"))))
                            for a in p.get("args", []))
            self.console.append((p["type"], text))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.exceptions.append(f"{text} ({d.get('url', '')}:{d.get('lineNumber', 0) + 1})")
        elif method == "Log.entryAdded":
            e = p["entry"]
            self.log.append((e["level"], e["source"], e["text"], e.get("url", ""),
                             e.get("networkRequestId")))
        elif method == "Network.requestWillBeSent":
            r = p["request"]
            self._methods[p["requestId"]] = (r["method"], r["url"])
            self.requests.append(r["url"])
        elif method == "Network.webSocketCreated":
            self.requests.append(p["url"])
        elif method == "Network.responseReceived":
            r = p["response"]
            if r["status"] >= 400:
                verb = self._methods.get(p["requestId"], ("GET", ""))[0]
                self.bad_responses.append((r["status"], verb, r["url"], p["requestId"]))
        elif method == "Network.loadingFailed":
            url = self._methods.get(p["requestId"], ("", "?"))[1]
            reason = p.get("errorText", "") + (f", blocked: {p['blockedReason']}"
                                               if p.get("blockedReason") else "")
            self.failed.append((url, reason, p["requestId"]))
        elif method == "Page.loadEventFired":
            self._loads += 1
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append((p["type"], p["message"]))
            self.browser.send("Page.handleJavaScriptDialog", {"accept": False}, self.session)
        elif method == "Inspector.targetCrashed":
            self.crashed = True

    def call(self, method, params=None, timeout=None):
        return self.browser.call(method, params, self.session, timeout)

    def errors(self, allow=()):
        """The problems recorded so far, one readable line each, less those matching a pattern in
        `allow` (re.search)."""
        with self.browser._cv:
            lines = [f"console.{t}: {text}" for t, text in self.console if t in ERROR_LEVELS]
            lines += [f"uncaught exception: {e}" for e in self.exceptions]
            # A failed request is also logged ("Failed to load resource"): said once, below.
            said = {r[-1] for r in self.failed} | {r[-1] for r in self.bad_responses}
            lines += [f"log ({source}): {text} {url}".rstrip()
                      for level, source, text, url, request in self.log
                      if level in ERROR_LEVELS and not (request and request in said)]
            lines += [f"request failed: {url} ({reason})" for url, reason, _ in self.failed]
            lines += [f"HTTP {status} for {verb} {url}"
                      for status, verb, url, _ in self.bad_responses]
            lines += ["the page crashed"] if self.crashed else []
        return [line for line in lines if not any(re.search(a, line) for a in allow)]

    def requests_outside(self, origin):
        """The URLs requested that are not on `origin` (e.g. 'http://127.0.0.1:8000'); about:,
        data: and blob: URLs never leave the browser and are not counted."""
        with self.browser._cv:
            return [u for u in self.requests
                    if not (u == origin or u.startswith(origin.rstrip("/") + "/"))
                    and not u.startswith(("about:", "data:", "blob:"))]

    # Driving.

    def add_init_script(self, js):
        """Runs `js` in every document this page loads from now on, before its own scripts."""
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": js})

    def set_extra_headers(self, headers):
        """Sends these headers with every request the page makes from now on."""
        self.call("Network.setExtraHTTPHeaders", {"headers": dict(headers)})

    def goto(self, url, wait_load=True, timeout=None):
        """Navigates to `url`; with wait_load, returns once its load event fired."""
        with self.browser._cv:
            before = self._loads
        result = self.call("Page.navigate", {"url": url}, timeout)
        if result.get("errorText"):
            raise BrowserError(f"navigating to {url}: {result['errorText']}")
        if wait_load:
            self.browser.wait(lambda: self._loads > before or self.crashed, timeout,
                              f"the load event of {url}")
            if self.crashed:
                raise BrowserError(f"the page crashed loading {url}")

    def evaluate(self, expr, await_promise=False, timeout=None):
        """The value of the JavaScript expression `expr` (as JSON would carry it; None for
        undefined). Raises JSError with the exception's text when it throws (or its promise
        rejects, with await_promise)."""
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": await_promise, "userGesture": True},
                      timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise JSError(d.get("exception", {}).get("description") or d.get("text", "?"))
        value = r["result"]
        if "unserializableValue" in value:  # NaN, Infinity, -0, bigints
            return value["unserializableValue"]
        return value.get("value")

    def wait_for(self, expr, timeout=None, interval=0.05):
        """Evaluates `expr` until it is truthy and returns that value. An expression that throws
        counts as not yet (e.g. an element not there yet). On timeout raises with the last value
        or exception and the page's errors."""
        deadline = time.monotonic() + (self.browser.timeout if timeout is None else timeout)
        last = None
        while True:
            try:
                last = self.evaluate(expr, timeout=max(1, deadline - time.monotonic()))
                if last:
                    return last
            except JSError as e:
                last = f"threw {e}"
            if time.monotonic() >= deadline:
                raise BrowserError(f"timed out waiting for {expr!r}; last: {last!r}; "
                                   f"page errors: {self.errors()}")
            time.sleep(interval)

    def _centre(self, selector):
        # Scrolls the element into view; its centre, or why it cannot be clicked there.
        found = self.evaluate(f"""(() => {{
            const el = document.querySelector({json.dumps(selector)});
            if (!el) return {{why: "no element matches"}};
            // Instant, whatever the page's scroll-behavior: the centre is read right after.
            el.scrollIntoView({{block: "center", inline: "center", behavior: "instant"}});
            const r = el.getBoundingClientRect();
            if (r.width === 0 || r.height === 0) return {{why: "it has no size (hidden?)"}};
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const hit = document.elementFromPoint(x, y);
            if (hit && hit !== el && !el.contains(hit))
                return {{why: "it is covered by " + hit.outerHTML.slice(0, 120)}};
            return {{x, y}};
        }})()""")
        if "why" in found:
            raise BrowserError(f"cannot click {selector!r}: {found['why']}")
        return found["x"], found["y"]

    def click(self, selector):
        """Clicks the centre of the first element matching the CSS selector with real mouse
        events, as a user would (so it must be visible and not covered)."""
        x, y = self._centre(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "buttons": 1 if kind == "mousePressed" else 0,
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})

    def type_text(self, selector, text, clear=False):
        """Focuses the element and types `text` into it (input events as from a keyboard);
        with clear, replaces what the field held."""
        ok = self.evaluate(f"""(() => {{
            const el = document.querySelector({json.dumps(selector)});
            if (!el) return false;
            el.focus();
            if ({json.dumps(clear)} && el.select) el.select();
            return document.activeElement === el;
        }})()""")
        if not ok:
            raise BrowserError(f"cannot type into {selector!r}: missing or not focusable")
        self.call("Input.insertText", {"text": text})

    KEYS = {"Enter": (13, "\r"), "Escape": (27, ""), "Tab": (9, "")}

    def press(self, key):
        """Presses and releases one of KEYS on the focused element (Enter submits a form)."""
        code, text = self.KEYS[key]
        base = {"key": key, "code": key, "windowsVirtualKeyCode": code}
        self.call("Input.dispatchKeyEvent", {"type": "keyDown", "text": text, **base})
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", **base})

    def screenshot(self, path, full_page=False):
        """Writes a PNG of the viewport (or of the whole page) to `path`; returns path."""
        params = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return path
