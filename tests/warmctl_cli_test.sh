#!/usr/bin/env bash
# Drives warmctl's offline commands through the real executable: make-model, model-info (human
# and JSON), exit status 0 for a valid model and 2 with the error on stderr for an invalid one.
set -u
warmctl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$warmctl" make-model --out "$dir/repo/mlp/1" --layers 784,512,10 --seed 3 --activation gelu > "$dir/out" 2>&1 \
  || fail "make-model exited $?: $(cat "$dir/out")"
grep -q "wrote $dir/repo/mlp/1/model.safetensors" "$dir/out" || fail "make-model output: $(cat "$dir/out")"

"$warmctl" model-info "$dir/repo/mlp/1/model.safetensors" > "$dir/info" 2>&1 || fail "model-info exited $?"
grep -q "layers:      784 -> 512 -> 10" "$dir/info" || fail "model-info layers: $(cat "$dir/info")"
grep -q "activation:  gelu" "$dir/info" || fail "model-info activation"
grep -q "parameters:  407050" "$dir/info" || fail "model-info parameters"

# A model directory picks its highest version; --json is machine-readable.
"$warmctl" make-model --out "$dir/repo/mlp/2" --layers 4,2 > /dev/null 2>&1 || fail "make-model v2"
"$warmctl" --json model-info "$dir/repo/mlp" > "$dir/json" 2>&1 || fail "model-info --json exited $?"
python3 - "$dir/json" <<'PY' || fail "model-info --json content: $(cat "$dir/json")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["path"].endswith("mlp/2/model.safetensors"), doc["path"]
assert [l["in"] for l in doc["layers"]] == [4] and doc["bytes"] == 4 * (4 * 2 + 2), doc
assert doc["input"]["shape"] == [-1, 4] and doc["output"]["shape"] == [-1, 2], doc
PY
"$warmctl" model-info "$dir/repo/mlp" --json --version 1 | grep -q '"parameters": 407050' || fail "--version 1"

# Invalid models: exit status 2, the reason on stderr, nothing on stdout.
printf 'garbage' > "$dir/bad.safetensors"
"$warmctl" model-info "$dir/bad.safetensors" > "$dir/stdout" 2> "$dir/stderr"
rc=$?
[ "$rc" = 2 ] || fail "invalid model exit status $rc"
grep -q "bad.safetensors" "$dir/stderr" || fail "stderr names the file: $(cat "$dir/stderr")"
[ ! -s "$dir/stdout" ] || fail "stdout not empty for an invalid model"
"$warmctl" model-info "$dir/nope" 2> /dev/null; [ $? = 2 ] || fail "missing path exit status"
"$warmctl" make-model --out "$dir/x" --layers 4,0 2> /dev/null; [ $? = 2 ] || fail "bad widths exit status"
"$warmctl" make-model --out "$dir/x" --layers 4,2 --activation swish 2> /dev/null; [ $? = 2 ] || fail "bad activation exit status"
"$warmctl" no-such-command > /dev/null 2>&1; [ $? = 2 ] || fail "unknown command exit status"

# A model written by an independent implementation (the Python recipe in docs/model-format.md).
python3 - "$dir/py/1/model.safetensors" <<'PY' || fail "python writer"
import json, os, struct, sys
def save_dense(path, layers, activation):
    header, blobs, offset = {"__metadata__": {"warm.kind": "dense", "warm.activation": activation}}, [], 0
    for i, (weight, bias) in enumerate(layers):
        for name, rows, shape in ((f"layers.{i}.weight", weight, [len(weight), len(weight[0])]),
                                  (f"layers.{i}.bias", [bias], [len(bias)])):
            blob = b"".join(struct.pack(f"<{len(r)}f", *r) for r in rows)
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
            blobs.append(blob)
            offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
os.makedirs(os.path.dirname(sys.argv[1]))
save_dense(sys.argv[1], [([[1, 2, 3], [4, 5, 6]], [0.5, -0.5]), ([[1, -1]], [2])], "tanh")
PY
"$warmctl" model-info "$dir/py" > "$dir/py.info" 2>&1 || fail "python-written model rejected: $(cat "$dir/py.info")"
grep -q "layers:      3 -> 2 -> 1" "$dir/py.info" || fail "python-written model layers: $(cat "$dir/py.info")"

[ "$failures" = 0 ] && echo "warmctl CLI: all checks passed"
exit $((failures > 0))
