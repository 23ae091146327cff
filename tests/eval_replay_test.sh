#!/usr/bin/env bash
# Black-box: `warm-eval replay` against the real warmd on a temporary socket and state directory.
# Materializes a tiny catalog (4 models of 0.2-2 MB) with `warm-eval models`, makes a Zipf trace,
# replays it with --register, and checks the
# JSON summary (every request answered ok, some hits and some misses) and the per-request CSV;
# then the refusals: a trace naming a model the catalog lacks, an unreachable daemon, a missing
# trace (exit status 1 with a message), a bad --speed (2). Takes about 2 s.
#   eval_replay_test.sh WARM_EVAL WARMD
set -u
eval_bin=$1
warmd=$2
source "$(dirname "$0")/support/warmd.sh"
# pycheck FILE EXPR: EXPR (python, `doc` = the JSON in FILE) must hold.
pycheck() {
  python3 - "$1" "$2" << 'PY' || fail "check '$2' on: $(cat "$1")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert eval(sys.argv[2]), sys.argv[2]
PY
}

"$eval_bin" catalog --models 4 --min-size 200KB --max-size 2MB --seed 3 --out "$dir/catalog.csv" > /dev/null ||
  fail "catalog"
"$eval_bin" models --catalog "$dir/catalog.csv" --repo "$dir/repo" > /dev/null || fail "models"
"$eval_bin" trace --zipf 0.8 --catalog "$dir/catalog.csv" --requests 300 --rate 300 --seed 1 \
  --out "$dir/trace.csv" > /dev/null || fail "trace"

# The device holds the whole catalog (3.8 MB): the misses are the cold starts (a request that
# arrives while its model loads waits too, and is no hit). No eviction on purpose: this test is
# about the replay, and with evictions under hundreds of requests a second the daemon can stall a
# load for good (found with this test: when a would-be victim's inference ends between the device
# actor's victim choice and its look for busy models, reserve_bytes refuses and arms no wake-up).
start_warmd host:8MB

# The replay: 300 requests over about 1 s of trace time, played at speed 2.
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/trace.csv" --register "$dir/catalog.csv" \
  --repo "$dir/repo" --speed 2 --out "$dir/requests.csv" --json > "$dir/summary.json" 2> "$dir/err" ||
  fail "replay exited $?: $(cat "$dir/err")"
pycheck "$dir/summary.json" 'doc["scenario"] == "replay" and doc["requests"] == 300 and doc["errors"] == 0'
pycheck "$dir/summary.json" '0 < doc["hits"] < 300 and 0 < doc["hit_ratio"] < 1'
pycheck "$dir/summary.json" 'doc["latency_ms_p50"] <= doc["latency_ms_p99"] and doc["latency_ms_mean"] > 0'
pycheck "$dir/summary.json" 'doc["load_wait_ms_mean"] > 0 and doc["duration_s"] > 0.4 and doc["lag_ms_max"] >= 0'
[ "$(head -1 "$dir/requests.csv")" = "sent_ms,model_id,latency_ms,hit,load_wait_ms,status" ] ||
  fail "CSV header: $(head -1 "$dir/requests.csv")"
[ "$(wc -l < "$dir/requests.csv")" = 301 ] || fail "CSV rows: $(wc -l < "$dir/requests.csv")"
python3 - "$dir/requests.csv" "$dir/summary.json" << 'PY' || fail "CSV contents"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
doc = json.load(open(sys.argv[2]))
assert all(r["status"] == "ok" for r in rows)
assert sum(int(r["hit"]) for r in rows) == doc["hits"]
assert all(float(r["load_wait_ms"]) == 0 for r in rows if r["hit"] == "1")
sent = [float(r["sent_ms"]) for r in rows]
assert sent == sorted(sent)
PY

# Without --repo the widths are probed; the models are registered already (no --register).
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/trace.csv" --speed 4 > "$dir/out" 2> "$dir/err" ||
  fail "replay with probes exited $?: $(cat "$dir/err")"
grep -q "requests   300 (0 errors)" "$dir/out" || fail "human summary: $(cat "$dir/out")"

# Refusals.
printf 'time_ms,model_id\n1,m000\n2,nope\n' > "$dir/unknown.csv"
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/unknown.csv" --register "$dir/catalog.csv" \
  > /dev/null 2> "$dir/err"
[ $? = 1 ] || fail "unknown model in the trace: exit status"
grep -q "names model 'nope', which catalog" "$dir/err" || fail "unknown model message: $(cat "$dir/err")"
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/unknown.csv" > /dev/null 2> "$dir/err"
[ $? = 1 ] || fail "unregistered model: exit status"
grep -q "model 'nope' is not registered" "$dir/err" || fail "unregistered model message: $(cat "$dir/err")"
"$eval_bin" replay --connect "unix:$dir/nope.sock" --trace "$dir/trace.csv" > /dev/null 2> "$dir/err"
[ $? = 1 ] || fail "unreachable daemon: exit status"
grep -q "cannot connect to unix:$dir/nope.sock" "$dir/err" || fail "unreachable message: $(cat "$dir/err")"
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/missing.csv" > /dev/null 2> "$dir/err"
[ $? = 1 ] || fail "missing trace: exit status"
"$eval_bin" replay --connect "unix:$dir/warm.sock" --trace "$dir/trace.csv" --speed 0 > /dev/null 2>&1
[ $? = 2 ] || fail "--speed 0: exit status"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed; warmd log:"
  cat "$dir/warmd.log"
  exit 1
fi
echo "eval_replay_test: all checks passed"
