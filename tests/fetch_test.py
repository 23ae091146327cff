#!/usr/bin/env python3
"""The S3 and HTTP stores of src/sources against real servers on loopback (tests/support/
object_servers.py): s3rver behind a proxy that checks every SigV4 signature and plays faults, and
nginx. Drives them through fetch_tool (argv[1]). Prints "fetch_test: ..." lines; exits 1 on the
first failure, 77 (skipped) when a server is not installed."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
import object_servers  # noqa: E402

TOOL = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
PART = 256 << 10


def say(text):
    print(f"fetch_test: {text}", flush=True)


def check(cond, what, detail=""):
    if not cond:
        say(f"FAILED: {what}" + (f"\n{detail}" if detail else ""))
        sys.exit(1)


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Tool:
    def __init__(self, servers, out_dir):
        self.s3, self.http, self.out_dir = servers.s3, servers.http, out_dir
        self.n = 0

    def run(self, *args, env=None, endpoint=True):
        cmd = [TOOL] + (["--endpoint", self.s3.endpoint] if endpoint else []) + list(args)
        r = subprocess.run(cmd, env=env or self.s3.env(), capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout, r.stderr

    def get(self, url, *args, env=None):
        """(exit status, stats or None, stderr, the bytes written)."""
        self.n += 1
        out = os.path.join(self.out_dir, f"get{self.n}")
        rc, stdout, stderr = self.run("get", url, "--out", out, *args, env=env)
        stats = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
        data = open(out, "rb").read() if os.path.exists(out) else None
        return rc, stats, stderr, data


def main():
    check(TOOL and os.access(TOOL, os.X_OK), "usage: fetch_test.py PATH/fetch_tool")
    started = time.monotonic()
    try:
        servers = object_servers.ObjectServers()
    except object_servers.MissingComponent as e:
        say(f"skipped: {e}")
        return 77
    with servers, tempfile.TemporaryDirectory(prefix="warm-fetch-") as out_dir:
        tool = Tool(servers, out_dir)
        s3, proxy = servers.s3, servers.s3.proxy
        big = os.urandom(3 * 1024 * 1024 + 12345)  # 13 parts of 256 KiB, the last one short
        small = os.urandom(5000)
        s3.put("m/1/model.safetensors", big)
        s3.put("m/small.bin", small)
        odd_key = "m/odd name+plus=eq~tilde,é.bin"
        s3.put(odd_key, small, signed=True)  # botocore's own signature passes the proxy's check
        check(not proxy.denied, "the proxy accepts botocore's signature", str(proxy.denied))
        keys = [f"many/k{i:02d}" for i in range(7)]
        for k in reversed(keys):
            s3.put(k, k.encode())

        # list: three pages of three (max-keys), sorted, sizes and entity tags exact.
        rc, out, err = tool.run("--page-keys", "3", "list", "s3://models/many")
        check(rc == 0, "list succeeds", err)
        listed = [json.loads(line) for line in out.splitlines()]
        check([o["key"] for o in listed] == keys, "list gives every key in order", out)
        check(all(o["size"] == len(o["key"]) for o in listed), "list gives the sizes", out)
        pages = [p for m, p, _ in proxy.requests if "list-type=2" in p]
        check(len(pages) == 3 and "continuation-token=" in pages[2], "list follows 3 pages",
              str(pages))
        say("list over 3 pages: ok")

        # head: size and entity tag as S3 has them.
        rc, out, err = tool.run("head", "s3://models/m/1/model.safetensors")
        check(rc == 0, "head succeeds", err)
        info = json.loads(out)
        want_etag = s3.client.head_object(Bucket="models", Key="m/1/model.safetensors")["ETag"]
        check(info["size"] == len(big) and info["etag"] == want_etag.strip('"'), "head", out)
        rc, out, err = tool.run("head", "s3://models/m/odd%20name+plus=eq~tilde,%C3%A9.bin")
        check(rc == 0 and json.loads(out)["size"] == len(small), "head of an odd key", err + out)
        say("head: ok")

        # get: 1 and 8 streams, byte for byte.
        for streams in (1, 8):
            rc, stats, err, data = tool.get("s3://models/m/1/model.safetensors", "--streams",
                                            str(streams), "--part-bytes", str(PART))
            check(rc == 0, f"get with {streams} streams", err)
            check(sha(data) == sha(big), f"get with {streams} streams gives the object's bytes")
            check(stats["bytes"] == len(big) and stats["requests"] == 13 and
                  stats["retries"] == 0 and not stats["changed"], "get's stats", str(stats))
        rc, stats, err, data = tool.get("s3://models/m/odd%20name+plus=eq~tilde,%C3%A9.bin")
        check(rc == 0 and data == small and stats["requests"] == 1, "get of an odd key", err)
        say("get with 1 and 8 streams, and of an odd key: ok")

        # A session token travels signed.
        env = s3.env()
        env["AWS_SESSION_TOKEN"] = "session-token-value"
        proxy.clear()
        rc, stats, err, data = tool.get("s3://models/m/small.bin", env=env)
        check(rc == 0 and data == small, "get with a session token", err)
        signed = proxy.requests[-1][2].get("Authorization", "")
        check("x-amz-security-token" in signed and "x-amz-content-sha256" in signed,
              "the session token and the payload hash are signed", signed)
        say("session token: ok")

        # A wrong secret: access denied, naming the URL, never a key.
        for command in ("head", "get"):
            wrong = s3.env(secret="wrong-secret-SHOULD-NOT-SHOW")
            if command == "head":
                rc, out, err = tool.run("head", "s3://models/m/small.bin", env=wrong)
            else:
                proxy.clear()
                rc, out, err = tool.run("list", "s3://models/m", env=wrong)
            check(rc == 1, f"{command} with a wrong secret fails", err)
            check("access denied" in err and "s3://models/m" in err,
                  f"{command} with a wrong secret says access denied naming the URL", err)
            check("wrong-secret-SHOULD-NOT-SHOW" not in err + out and s3.access_key not in err + out,
                  f"{command}'s error shows no credential", err)
        check("SignatureDoesNotMatch" in err, "the error names S3's code", err)
        rc, out, err = tool.run("--anonymous", "head", "s3://models/m/small.bin")
        check(rc == 1 and "access denied" in err, "an unsigned request is refused", err)
        say("wrong secret and unsigned: access denied, no credential shown: ok")

        # Not found.
        rc, stats, err, _ = tool.get("s3://models/m/missing.bin")
        check(rc == 1 and err.startswith("not_found: s3://models/m/missing.bin"), "404", err)
        say("not found: ok")

        # A 500 then success: that range is tried again.
        proxy.clear()
        fault = proxy.add_fault("status", status=500, method="GET", path_contains="model.safe",
                                nth=3)
        rc, stats, err, data = tool.get("s3://models/m/1/model.safetensors", "--streams", "4",
                                        "--part-bytes", str(PART), "--retry-delay-ms", "50")
        check(rc == 0 and data == big, "a 500 is retried", err)
        check(fault.applied == 1 and stats["retries"] == 1 and stats["requests"] == 14,
              "one retry for one 500", str(stats))
        say("500 then success: ok")

        # 503 on every try: the range's attempts run out.
        proxy.clear()
        fault = proxy.add_fault("status", status=503, method="GET", path_contains="small", times=99)
        t0 = time.monotonic()
        rc, stats, err, _ = tool.get("s3://models/m/small.bin", "--attempts", "3",
                                     "--retry-delay-ms", "100")
        took = time.monotonic() - t0
        check(rc == 1 and err.startswith("unavailable: s3://models/m/small.bin") and
              "503" in err and "SlowDown" in err, "503 exhausts the retries", err)
        check(fault.seen == 3 and took >= 0.3, "3 tries with a doubling delay (0.1 + 0.2 s)",
              f"seen {fault.seen}, {took:.2f} s")
        say("503 until the attempts run out: ok")

        # A body cut short, and a connection reset mid-body: retried from where they stopped.
        for action in ("cut", "drop"):
            proxy.clear()
            fault = proxy.add_fault(action, method="GET", path_contains="model.safe", nth=2,
                                    after=100000)
            rc, stats, err, data = tool.get("s3://models/m/1/model.safetensors", "--streams", "3",
                                            "--part-bytes", str(PART), "--retry-delay-ms", "20")
            check(rc == 0 and data == big and fault.applied == 1 and stats["retries"] == 1,
                  f"a {action} body is retried", err + str(stats))
            ranges = [h.get("Range") for m, p, h in proxy.requests if m == "GET"]
            resumed = [r for r in ranges if int(r[6:].split("-")[0]) % PART == 100000]
            check(len(resumed) == 1, f"the {action} range resumes after its 100000 bytes", str(ranges))
            say(f"{action} body mid-way: retried from where it stopped ({resumed[0]}): ok")

        # A stalled body: abandoned after the stall timeout, then retried.
        proxy.clear()
        fault = proxy.add_fault("slow", method="GET", path_contains="small", chunk=1000, delay=4)
        rc, stats, err, data = tool.get("s3://models/m/small.bin", "--stall-ms", "1000",
                                        "--retry-delay-ms", "20")
        check(rc == 0 and data == small and stats["retries"] == 1, "a stalled body is retried",
              err + str(stats))
        say("stalled body: retried: ok")

        # The object replaced between ranges: the fetch stops, changed.
        proxy.clear()
        proxy.add_fault("replace", method="GET", path_contains="model.safe", nth=4,
                        data=os.urandom(len(big)))
        rc, stats, err, _ = tool.get("s3://models/m/1/model.safetensors", "--streams", "1",
                                     "--part-bytes", str(PART))
        check(rc == 3 and stats and stats["changed"], "a replaced object stops the fetch (exit 3)",
              f"rc {rc} {stats} {err}")
        gets = [p for m, p, _ in proxy.requests if m == "GET"]
        check(len(gets) == 4, "nothing more is asked after the change", str(len(gets)))
        say("object replaced mid-fetch: changed, exit 3: ok")

        # nginx: ranges over plain HTTP.
        http = servers.http
        http.write("models/m/model.bin", big)
        url = http.url("models/m/model.bin")
        rc, stats, err, data = tool.get(url, "--streams", "4", "--part-bytes", str(PART))
        check(rc == 0 and data == big and stats["requests"] == 13 and stats["etag"],
              "get over HTTP with ranges", err + str(stats))
        rc, out, err = tool.run("head", http.url("models/m/absent.bin"), endpoint=False)
        check(rc == 1 and err.startswith("not_found: " + http.url("models/m/absent.bin")),
              "404 over HTTP", err)
        rc, out, err = tool.run("list", http.url("models/m"), endpoint=False)
        check(rc == 1 and err.startswith("invalid_argument:") and "cannot be listed" in err,
              "list over HTTP is refused clearly", err)
        say("nginx: ranged get, 404, no listing: ok")

    say(f"all passed in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
