"""Object servers on loopback for warm's tests: S3 (s3rver behind a SigV4-verifying proxy with
fault knobs) and plain HTTP (nginx), each in a temporary directory, all torn down at exit.

    from object_servers import ObjectServers
    with ObjectServers(bucket="models") as servers:
        servers.s3.put("mnist/1/model.safetensors", data)       # boto3, path-style
        servers.s3.endpoint                                      # "http://127.0.0.1:PORT"
        servers.s3.env()                                         # AWS_* for a child process
        servers.s3.proxy.add_fault("status", status=503, method="GET", path_contains="model")
        servers.http.write("mnist/model.safetensors", data)      # served by nginx
        servers.http.url("mnist/model.safetensors")              # "http://127.0.0.1:PORT/..."

    ObjectServers(tls={"cert": PEM, "key": KEY, "ca": CA_PEM}) serves both over TLS with that
    certificate (tests/tls_certs.py makes them): the endpoint and URLs are then https://.

Contracts:
- Every server binds 127.0.0.1 on an ephemeral port; nothing here opens a connection to another
  address (proxy variables are cleared for this process and for env()).
- The proxy answers 403 (S3's error XML) to a request whose SigV4 signature, recomputed with
  botocore over the request as received (path and query in S3's canonical encoding) and the
  configured secret, differs (SignatureDoesNotMatch), names another access key
  (InvalidAccessKeyId), or is unsigned (AccessDenied) unless allow_anonymous. It then forwards to
  s3rver without the Authorization header (s3rver does not check V4 signatures) and streams the
  answer back, applying the faults.
- A missing component (node, s3rver, nginx, botocore, boto3) raises MissingComponent naming it
  and how to install it (tools/deps).
"""

import atexit
import http.client
import http.server
import os
import shutil
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
for _name in _PROXY_VARS:
    os.environ.pop(_name, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


class MissingComponent(RuntimeError):
    """A server or library the harness needs is not installed."""


def _need(what, found, how):
    if not found:
        raise MissingComponent(f"{what} is missing: {how}")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, name, log_path, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    log = ""
    try:
        with open(log_path, errors="replace") as f:
            log = f.read()[-2000:]
    except OSError:
        pass
    raise RuntimeError(f"{name} did not start on 127.0.0.1:{port} (exit {proc.poll()}): {log}")


def _s3_error(code, message):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()


# ---- the verifying proxy ------------------------------------------------------------------------

class Fault:
    """Applied to the requests matching method and path_contains, from the nth (1-based) on, for
    `times` of them. Actions:
      status  answer `status` (S3 error XML with `code`) instead of forwarding
      cut     send the headers and `after` bytes of the body (default 1000), then close cleanly
      drop    send the headers and `after` bytes, then reset the connection (RST)
      slow    send the body in `chunk`-byte pieces with `delay` seconds between them
      replace before forwarding, upload `data` to the request's key (the object changes mid-fetch)
    `seen` counts the matching requests, `applied` those hit.
    """

    def __init__(self, action, nth=1, times=1, method=None, path_contains=None, **params):
        self.action, self.nth, self.times = action, nth, times
        self.method, self.path_contains, self.params = method, path_contains, params
        self.seen = 0
        self.applied = 0

    def matches(self, method, path):
        if self.method and method != self.method:
            return False
        return not self.path_contains or self.path_contains in path

    def take(self, method, path):
        """Counts a matching request; true when this one is to be hit."""
        if not self.matches(method, path):
            return False
        self.seen += 1
        if self.nth <= self.seen < self.nth + self.times:
            self.applied += 1
            return True
        return False


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        self.server.owner.log.append(fmt % args)

    def do_GET(self):
        self._handle()

    def do_HEAD(self):
        self._handle()

    def do_PUT(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def _answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self):
        owner = self.server.owner
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        owner.requests.append((self.command, self.path, dict(self.headers.items())))
        denied = owner.verify(self.command, self.path, self.headers)
        if denied:
            owner.denied.append((self.command, self.path, denied[0]))
            return self._answer(403, _s3_error(*denied))
        fault = owner.fault_for(self.command, self.path)
        if fault and fault.action == "status":
            status = fault.params.get("status", 500)
            code = fault.params.get("code", {403: "AccessDenied", 404: "NoSuchKey",
                                             500: "InternalError",
                                             503: "SlowDown"}.get(status, "InternalError"))
            return self._answer(status, _s3_error(code, f"injected {status}"))
        if fault and fault.action == "replace":
            owner.replace_object(self.path, fault.params["data"])
        self._forward(body, fault)

    def _forward(self, body, fault):
        """Sends the request on to s3rver and streams its answer back, faults applied."""
        owner = self.server.owner
        conn = http.client.HTTPConnection("127.0.0.1", owner.upstream_port, timeout=60)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("authorization", "x-amz-security-token", "connection")}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        self.send_response(resp.status)
        names = set()
        for k, v in resp.getheaders():
            names.add(k.lower())
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        if "content-length" not in names or "transfer-encoding" in names:
            # A body of unknown length: read it whole so the client gets a Content-Length.
            payload = resp.read()
            self.send_header("Content-Length", str(len(payload)))
            chunks = iter([payload])
        else:
            chunks = iter(lambda: resp.read(64 << 10), b"")
        self.end_headers()
        try:
            if self.command != "HEAD":
                self._stream(chunks, fault)
        finally:
            conn.close()

    def _stream(self, chunks, fault):
        action = fault.action if fault else None
        limit = fault.params.get("after", 1000) if action in ("cut", "drop") else None
        sent = 0
        for data in chunks:
            if limit is not None and sent + len(data) >= limit:
                self.wfile.write(data[:limit - sent])
                self.wfile.flush()
                self.close_connection = True
                if action == "drop":  # a reset, not a clean close
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.wfile.close()
                    self.rfile.close()
                    self.connection.close()
                return
            if action == "slow":
                chunk = max(1, fault.params.get("chunk", 1024))
                for i in range(0, len(data), chunk):
                    self.wfile.write(data[i:i + chunk])
                    self.wfile.flush()
                    time.sleep(fault.params.get("delay", 0.1))
            else:
                self.wfile.write(data)
            sent += len(data)


class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that gave up on a slow or broken answer (as the faults intend): no traceback.
        import sys
        if not isinstance(sys.exc_info()[1], (OSError, ValueError)):  # ValueError: a closed file
            super().handle_error(request, client_address)


class VerifyingProxy:
    """The SigV4-checking, fault-injecting proxy in front of s3rver (see the module's contract).
    Its lists (requests, denied) and faults may be read and changed from the test's thread."""

    def __init__(self, upstream_port, access_key, secret_key, region, put_object,
                 allow_anonymous=False, tls=None):
        try:
            from botocore.auth import S3SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.credentials import Credentials
        except ImportError as e:
            raise MissingComponent(f"botocore is missing ({e}): apt-get install python3-botocore")
        self._auth_type, self._request_type, self._creds_type = S3SigV4Auth, AWSRequest, Credentials
        self.upstream_port = upstream_port
        self.access_key, self.secret_key, self.region = access_key, secret_key, region
        self.allow_anonymous = allow_anonymous
        self._put_object = put_object
        self._lock = threading.Lock()
        self.faults = []
        self.requests = []  # (method, path, headers) as received
        self.denied = []    # (method, path, S3 error code)
        self.log = []
        self._server = _ThreadingServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        if tls:
            import ssl
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls["cert"], tls["key"])
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def add_fault(self, action, **kwargs):
        """Adds a Fault (see its doc); returns it so a test can read .seen and .applied."""
        f = Fault(action, **kwargs)
        with self._lock:
            self.faults.append(f)
        return f

    def clear(self):
        """Forgets the faults and the recorded requests."""
        with self._lock:
            self.faults.clear()
            self.requests.clear()
            self.denied.clear()

    def fault_for(self, method, path):
        with self._lock:
            hit = None
            for f in self.faults:
                if f.take(method, path) and hit is None:
                    hit = f
            return hit

    def replace_object(self, path, data):
        parts = urllib.parse.urlsplit(path)
        bucket, _, key = urllib.parse.unquote(parts.path).lstrip("/").partition("/")
        self._put_object(bucket, key, data)

    def verify(self, method, target, headers):
        """None when the request may pass; else (S3 error code, message)."""
        auth = headers.get("Authorization")
        if not auth:
            if self.allow_anonymous:
                return None
            return ("AccessDenied", "Anonymous requests are not allowed")
        try:
            algorithm, _, rest = auth.partition(" ")
            fields = dict(p.strip().split("=", 1) for p in rest.split(","))
            credential = fields["Credential"].split("/")
            signed = fields["SignedHeaders"].split(";")
            given = fields["Signature"]
        except (KeyError, ValueError):
            return ("AuthorizationHeaderMalformed", "The authorization header is malformed")
        if algorithm != "AWS4-HMAC-SHA256" or len(credential) != 5 or credential[3:] != [
                "s3", "aws4_request"]:
            return ("AuthorizationHeaderMalformed", "The authorization header is malformed")
        if credential[0] != self.access_key:
            return ("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist")
        if credential[2] != self.region:
            return ("AuthorizationHeaderMalformed", f"the region '{credential[2]}' is wrong")
        stamp = headers.get("x-amz-date", "")
        if not stamp or credential[1] != stamp[:8]:
            return ("AuthorizationHeaderMalformed", "x-amz-date does not match the credential")
        missing = [h for h in signed if h not in headers]
        if missing or "host" not in signed:
            return ("AuthorizationHeaderMalformed", f"signed headers missing: {missing}")
        parts = urllib.parse.urlsplit(target)
        # S3's canonical form: the path and each query key and value URI-encoded once.
        path = urllib.parse.quote(urllib.parse.unquote(parts.path), safe="/~")
        query = "&".join(
            urllib.parse.quote(urllib.parse.unquote(k), safe="-_.~") + "=" +
            urllib.parse.quote(urllib.parse.unquote(v), safe="-_.~")
            for k, _, v in (p.partition("=") for p in parts.query.split("&") if p))
        url = f"http://{headers.get('Host', '')}{path}" + (f"?{query}" if query else "")
        request = self._request_type(method=method, url=url,
                                     headers={h: headers.get(h, "") for h in signed})
        request.context["timestamp"] = stamp
        signer = self._auth_type(self._creds_type(self.access_key, self.secret_key), "s3",
                                 self.region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if expected != given:
            return ("SignatureDoesNotMatch", "The request signature we calculated does not match "
                    "the signature you provided")
        return None


# ---- s3rver -------------------------------------------------------------------------------------

def _s3rver_path():
    given = os.environ.get("WARM_S3RVER")
    if given:
        return given
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "warm", "s3rver", "node_modules", ".bin", "s3rver")


class S3Server:
    """s3rver with one bucket, behind a VerifyingProxy; `endpoint` is the proxy's."""

    def __init__(self, root, bucket="models", access_key="AKIDWARMTEST0000",
                 secret_key="warm-test-secret-0123456789", region="us-east-1",
                 allow_anonymous=False, tls=None):
        try:
            import boto3
            from botocore import UNSIGNED
            from botocore.config import Config
        except ImportError as e:
            raise MissingComponent(f"boto3 is missing ({e}): apt-get install python3-boto3")
        exe = _s3rver_path()
        _need("s3rver", os.access(exe, os.X_OK),
              f"no executable {exe} (run tools/deps, or set WARM_S3RVER)")
        _need("node", shutil.which("node"), "apt-get install nodejs (s3rver runs on it)")
        self.bucket, self.access_key, self.secret_key, self.region = (
            bucket, access_key, secret_key, region)
        data = os.path.join(root, "s3rver")
        os.makedirs(data)
        self._log_path = os.path.join(root, "s3rver.log")
        for _ in range(5):  # another process may take the free port first
            port = _free_port()
            # s3rver's continuation tokens use DES, which node's OpenSSL 3 keeps in its legacy
            # provider: without it every listing after the first page answers 500.
            env = dict(os.environ)
            env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --openssl-legacy-provider").strip()
            with open(self._log_path, "w") as log:
                self._proc = subprocess.Popen(
                    [exe, "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent",
                     "--no-vhost-buckets", "--configure-bucket", bucket],
                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                _wait_port(port, self._proc, "s3rver", self._log_path)
                break
            except RuntimeError:
                if self._proc.poll() is None:
                    _stop(self._proc)
                    raise
        self.upstream_port = port
        config = dict(request_checksum_calculation="when_required",
                      response_checksum_validation="when_required", retries={"max_attempts": 1})
        try:
            Config(**config)
        except TypeError:  # Debian's botocore 1.29 has no checksum settings (and sends none)
            config = dict(retries={"max_attempts": 1})
        # Uploads go straight to s3rver, unsigned (it allows that), so faults never hit them.
        self._direct = boto3.client(
            "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name=region,
            config=Config(s3={"addressing_style": "path"}, signature_version=UNSIGNED, **config))
        self.proxy = VerifyingProxy(
            port, access_key, secret_key, region,
            lambda b, k, d: self._direct.put_object(Bucket=b, Key=k, Body=d), allow_anonymous, tls)
        self.endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{self.proxy.port}"
        # A client that signs as AWS's own tools do, through the proxy (checks the verifier too).
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=region, aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(s3={"addressing_style": "path"}, **config),
            verify=tls["ca"] if tls else None)

    def put(self, key, data, signed=False):
        """Uploads `data` as `key`: straight to s3rver, or through the proxy, signed."""
        (self.client if signed else self._direct).put_object(Bucket=self.bucket, Key=key, Body=data)

    def url(self, key=""):
        return f"s3://{self.bucket}/{key}" if key else f"s3://{self.bucket}"

    def env(self, secret=None, access_key=None):
        """An environment for a child process that signs with these (or the given) credentials:
        no other AWS_* variable, no shared file, no proxy."""
        e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in _PROXY_VARS}
        e.update(AWS_ACCESS_KEY_ID=access_key or self.access_key,
                 AWS_SECRET_ACCESS_KEY=secret or self.secret_key, AWS_REGION=self.region,
                 AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_CONFIG_FILE=os.devnull)
        return e

    def close(self):
        self.proxy.close()
        _stop(self._proc)


# ---- nginx --------------------------------------------------------------------------------------

class HttpServer:
    """nginx serving `root`/nginx/www (ranges and ETags on) as one unprivileged process."""

    def __init__(self, root, tls=None):
        self.scheme = "https" if tls else "http"
        exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                          else None)
        _need("nginx", exe, "apt-get install nginx-light")
        self.dir = os.path.join(root, "nginx")
        self.www = os.path.join(self.dir, "www")
        t = os.path.join(self.dir, "tmp")
        os.makedirs(t)
        os.makedirs(self.www)
        conf = os.path.join(self.dir, "nginx.conf")
        stderr_path = os.path.join(self.dir, "stderr.log")
        for _ in range(5):  # another process may take the free port first
            self.port = _free_port()
            with open(conf, "w") as f:
                f.write(f"""master_process off;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {self.dir}/access.log;
  client_body_temp_path {t}/body;
  proxy_temp_path {t}/proxy;
  fastcgi_temp_path {t}/fastcgi;
  uwsgi_temp_path {t}/uwsgi;
  scgi_temp_path {t}/scgi;
  default_type application/octet-stream;
  etag on;
  server {{
    listen 127.0.0.1:{self.port}{" ssl" if tls else ""};
    {f"ssl_certificate {tls['cert']}; ssl_certificate_key {tls['key']};" if tls else ""}
    root {self.www};
  }}
}}
""")
            with open(stderr_path, "w") as err:
                self._proc = subprocess.Popen(
                    [exe, "-p", self.dir, "-e", os.path.join(self.dir, "error.log"), "-c", conf,
                     "-g", "daemon off;"],
                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            try:
                _wait_port(self.port, self._proc, "nginx", stderr_path)
                break
            except RuntimeError:
                if self._proc.poll() is None:
                    _stop(self._proc)
                    raise

    def write(self, path, data):
        full = os.path.join(self.www, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)

    def url(self, path):
        return f"{self.scheme}://127.0.0.1:{self.port}/{path}"

    def close(self):
        _stop(self._proc)


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- all together -------------------------------------------------------------------------------

class ObjectServers:
    """s3rver + proxy (`s3`) and nginx (`http`) in one temporary directory. A context manager;
    also closed at interpreter exit."""

    def __init__(self, bucket="models", s3=True, http=True, tls=None, **s3_args):
        self.root = tempfile.mkdtemp(prefix="warm-objects-")
        self.s3 = self.http = None
        atexit.register(self.close)
        try:
            if s3:
                self.s3 = S3Server(self.root, bucket=bucket, tls=tls, **s3_args)
            if http:
                self.http = HttpServer(self.root, tls=tls)
        except BaseException:
            self.close()
            raise

    def close(self):
        for server in (self.s3, self.http):
            if server:
                server.close()
        self.s3 = self.http = None
        if self.root and os.path.isdir(self.root):
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
