#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (docs/fuzzing.md): valid and near-valid inputs for each
fuzz target. Needs build/warmctl (real model files) and capnp (encoded InferRequests). Run from the
repository root: fuzz/make_corpus.py. Regression inputs (regress-*) are added by hand, not here."""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


# ---- safetensors ----------------------------------------------------------------------------

def real_model(layers, activation):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([os.path.join(ROOT, "build", "warmctl"), "make-model", "--out", d, "--layers", layers,
                        "--activation", activation], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "model.safetensors"), "rb") as f:
            return f.read()


def split(image):
    n = struct.unpack("<Q", image[:8])[0]
    return json.loads(image[8:8 + n]), image[8 + n:]


def assemble(header, data, raw=None):
    text = raw if raw is not None else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    t = "safetensors_fuzz"
    base = real_model("4,8,2", "relu")
    write(t, "model-4-8-2-relu", base)
    write(t, "model-3-2-gelu", real_model("3,2", "gelu"))
    write(t, "model-2-2-2-2-tanh", real_model("2,2,2,2", "tanh"))
    write(t, "model-1-1-none", real_model("1,1", "none"))
    header, data = split(base)

    h = dict(header); h["__metadata__"] = {"warm.kind": "sparse", "warm.activation": "relu"}
    write(t, "near-kind-sparse", assemble(h, data))
    h = dict(header); h["layers.0.weight"] = dict(h["layers.0.weight"], dtype="F16")
    write(t, "near-dtype-f16", assemble(h, data))
    h = dict(header); h["layers.0.bias"] = dict(h["layers.0.bias"], shape=[4])
    write(t, "near-bias-shape", assemble(h, data))
    write(t, "near-trailing-byte", assemble(header, data + b"\0"))
    write(t, "near-short-data", assemble(header, data[:-4]))
    h = {k: v for k, v in header.items() if k != "layers.1.bias"}
    write(t, "near-missing-bias", assemble(h, data))
    text = json.dumps(header, separators=(",", ":")).encode()
    write(t, "near-duplicate-key", assemble(None, data, text[:-1] + b',"__metadata__":{}}'))
    write(t, "near-too-deep", assemble(None, b"", b'{"a":{"b":[[1]]}}'))
    write(t, "near-bad-prefix", struct.pack("<Q", 1 << 40) + text)
    write(t, "near-overflow-shape", assemble({"x": {"dtype": "F64", "shape": [1 << 62, 8], "data_offsets": [0, 0]}}, b""))
    write(t, "near-overlap", assemble({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                       "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"abc"))
    sizes = [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("F8_E4M3", 1), ("F8_E5M2", 1), ("I64", 8), ("I32", 4),
             ("I16", 2), ("I8", 1), ("U64", 8), ("U32", 4), ("U16", 2), ("U8", 1), ("BOOL", 1)]
    h, offset = {"__metadata__": {"k": "v"}}, 0
    for d, size in sizes:
        h["t_" + d] = {"dtype": d, "shape": [1, 2], "data_offsets": [offset, offset + 2 * size]}
        offset += 2 * size
    write(t, "generic-all-dtypes", assemble(h, bytes(offset)))
    write(t, "empty-header", assemble(None, b"", b"{}"))


# ---- capnp InferRequest ----------------------------------------------------------------------

def capnp_encode(text):
    return subprocess.run(["capnp", "encode", "--no-standard-import", "-I", "/usr/include",
                           os.path.join(ROOT, "schemas", "warm.capnp"), "InferRequest"],
                          input=text.encode(), check=True, stdout=subprocess.PIPE).stdout


def floats(n, start=0.0):
    return "0x\"" + struct.pack("<%df" % n, *[start + i for i in range(n)]).hex() + "\""


def infer_requests():
    t = "infer_request_fuzz"
    write(t, "valid-batch1", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F32", shape = [1, 16], data = %s)])' % floats(16)))
    write(t, "valid-rank1-unnamed", capnp_encode('(target = "m", inputs = [(dtype = "F32", shape = [16], data = %s)])' % floats(16)))
    write(t, "valid-batch3", capnp_encode('(target = "v", inputs = [(name = "input", dtype = "F32", shape = [3, 16], data = %s)])' % floats(48)))
    write(t, "near-width", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F32", shape = [1, 4], data = %s)])' % floats(4)))
    write(t, "near-dtype", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F16", shape = [1, 16], data = %s)])' % floats(8)))
    write(t, "near-data-size", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F32", shape = [1, 16], data = %s)])' % floats(15)))
    write(t, "near-two-inputs", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F32", shape = [16], data = %s), (name = "x", dtype = "I8", shape = [0])])' % floats(16)))
    write(t, "near-zero-dim", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F32", shape = [0, 18446744073709551615])])'))
    write(t, "near-overflow", capnp_encode('(target = "m", inputs = [(name = "input", dtype = "F64", shape = [4294967296, 4294967296])])'))
    write(t, "near-no-inputs", capnp_encode('(target = "m")'))


# ---- V2 JSON ---------------------------------------------------------------------------------

def v2_json():
    t = "v2_json_fuzz"
    row = list(range(16))
    write(t, "valid-flat", json.dumps({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": row}]}))
    write(t, "valid-nested-id", json.dumps({"id": "req-1", "inputs": [{"name": "input", "shape": [2, 16], "datatype": "FP32",
                                                                         "data": [row, [x / 3 for x in row]]}],
                                            "outputs": [{"name": "output"}], "parameters": {}}))
    write(t, "valid-docs-example", '{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}')
    write(t, "valid-rank1-floats", '{"inputs":[{"name":"input","shape":[16],"datatype":"FP32","data":[1e-45,-0.0,3.4028234e38,0.1,1,2,3,4,5,6,7,8,9,10,11,12]}]}')
    write(t, "near-fp16", '{"inputs":[{"name":"input","shape":[1,2],"datatype":"FP16","data":[1,2]}]}')
    write(t, "near-count", '{"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2]}]}')
    write(t, "near-range", '{"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1e39]}]}')
    write(t, "near-negative-shape", '{"inputs":[{"name":"input","shape":[-1,4],"datatype":"FP32","data":[1,2,3,4]}]}')
    write(t, "near-huge-shape", '{"inputs":[{"name":"input","shape":[4294967296,4294967296],"datatype":"FP32","data":[]}]}')
    write(t, "near-zero-dim", '{"inputs":[{"name":"input","shape":[0,18446744073709551615],"datatype":"FP32","data":[]}]}')
    write(t, "near-output", '{"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"logits"}]}')
    write(t, "near-deep", '{"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":' + "[" * 40 + "1" + "]" * 40 + "}]}")
    write(t, "near-truncated", '{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,')
    write(t, "near-unicode", '{"id":"\\u00e9\\ud83d\\ude00","inputs":[{"name":"in\\u0000put","shape":[1],"datatype":"FP32","data":[1]}]}')


# ---- warmd config ----------------------------------------------------------------------------

def warmd_config():
    t = "warmd_config_fuzz"
    write(t, "docs-example.toml", """repo = ["/srv/models", "/srv/more-models"]
state = "/var/lib/warm"
device = ["host:8GiB", "cuda:0:20GiB"]
policy = "kdf"
max-concurrent-loads = 4
failure-expiry = "5m"
listen = ["unix:/run/warm/warm.sock", "127.0.0.1:7411"]
http = "127.0.0.1:8000"
http-threads = 64
log-level = "info"
""")
    write(t, "every-key.toml", """# every key warmd knows
repo = "/srv/models"
state = 'warm-state'
device = "host:1GiB"
policy = "lru"
max-concurrent-loads = 64
failure-expiry = "1.5s"
listen = "unix:./warm.sock"
allow-remote = true
token-file = "/etc/warm/token"
log-level = "debug"
max-request-bytes = "1.5GiB"
max-tensor-bytes = "4096"
http = "[::1]:0"
http-threads = 1
metrics-per-model = false
request-timeout = "500ms"
max-models = 9223372036854775807
""")
    write(t, "near-unknown-key.toml", 'repo = "/m"\nport = 7411\n')
    write(t, "near-wrong-type.toml", 'repo = "/m"\nmax-concurrent-loads = "4"\n')
    write(t, "near-range.toml", 'http-threads = 0\nmax-models = -1\n')
    write(t, "near-array-mixed.toml", 'device = ["host:1GiB", 2]\n')
    write(t, "near-table.toml", '[server]\nrepo = "/m"\n')
    write(t, "near-syntax.toml", 'repo = ["/m",\nstate = \n')
    write(t, "near-durations.toml", 'failure-expiry = "1.2.3s"\nrequest-timeout = "99999999999999999999h"\nmax-request-bytes = "1e3"\n')
    write(t, "near-inline-table.toml", 'repo = { path = "/m" }\nlisten = [[ "a" ], "b"]\n')
    write(t, "valid-non-ascii-strings.toml", "# mod\u00e8les \u2014 comment\nrepo = [\"/srv/mod\u00e8les\", '/srv/\u043c\u043e\u0434']\n"
                                             "state = \"\"\"\n\u00e9t\u00e9 \\u00e9\"\"\"\npolicy = '\'\'\u00e9\'\'\'\n")
    write(t, "near-multiline.toml", 'state = """\nwarm\\\n  state"""\nhttp = \'\'\'127.0.0.1:1\'\'\'\n')


if __name__ == "__main__":
    which = sys.argv[1:] or ["safetensors", "infer_requests", "v2_json", "warmd_config"]
    for name in which:
        globals()[name]()
