#!/usr/bin/env bash
# Black-box: starts the real warmd on a temporary socket and state directory and drives it with
# warmctl one-shot commands and the REPL (stdin piped: plain line reading). Checks output (human
# and --json, parsed by python3) and exit statuses: 0 ok, 1 server-reported error, 2 usage or
# connection errors.
#   warmctl_rpc_test.sh WARMCTL WARMD
set -u
warmctl=$1
warmd=$2
source "$(dirname "$0")/support/warmd.sh"
# expect RC CMD...: runs warmctl against the test daemon, output in $dir/out and $dir/err.
expect() {
  local want=$1
  shift
  "$warmctl" --connect "unix:$dir/warm.sock" "$@" > "$dir/out" 2> "$dir/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "warmctl $* exited $rc, want $want: $(cat "$dir/out" "$dir/err")"
}
# pycheck EXPR: EXPR (python, `doc` = the JSON in $dir/out) must hold.
pycheck() {
  python3 - "$dir/out" "$1" <<'PY' || fail "check '$1' on: $(cat "$dir/out")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert eval(sys.argv[2]), sys.argv[2]
PY
}

"$warmctl" make-model --out "$dir/repo/small/1" --layers 8,16,4 > /dev/null || fail "make-model small"
"$warmctl" make-model --out "$dir/repo/other/1" --layers 3,2 > /dev/null || fail "make-model other"

start_warmd host:64MiB

# No server, bad usage: 2.
"$warmctl" --connect "unix:$dir/nope.sock" status small > /dev/null 2> "$dir/err"
[ $? = 2 ] || fail "no server: exit status"
grep -q "cannot connect to unix:$dir/nope.sock" "$dir/err" || fail "no server message: $(cat "$dir/err")"
expect 2 status
expect 2 register only-id
expect 2 inspect nonsense
expect 1 infer small --random          # not registered yet: no width to ask for
grep -q "no model or vmodel 'small'" "$dir/err" || fail "infer --random unknown: $(cat "$dir/err")"
expect 2 no-such-command

# register, status, ensure --sync.
expect 0 register small small
grep -q "registered small" "$dir/out" || fail "register output: $(cat "$dir/out")"
expect 0 register other other --version 1
expect 0 status small
grep -q "state:" "$dir/out" || fail "status output: $(cat "$dir/out")"
expect 0 --json status small
pycheck 'doc["id"] == "small" and doc["state"] in ("NOT_LOADED", "QUEUED", "LOADING", "LOADED")'
pycheck 'doc["input_width"] == 8 and doc["output_width"] == 4'
expect 0 ensure small --sync
expect 0 status small --json
pycheck 'doc["state"] == "LOADED" and doc["bytes"] > 0'
expect 0 register synced small --load --sync
grep -q "registered synced (loaded)" "$dir/out" || fail "register --load --sync output: $(cat "$dir/out")"
expect 0 --json status synced
pycheck 'doc["state"] == "LOADED"'
expect 0 unregister synced
expect 0 register later small
expect 0 ensure later                   # no --sync: answered at once
grep -q "later: load requested" "$dir/out" || fail "ensure output: $(cat "$dir/out")"
expect 0 --json ensure later
pycheck 'doc["ok"] is True and doc["sync"] is False'
expect 0 unregister later

# A model's own batching: the options travel with the registration (a different set is refused),
# are checked by the server, and --max-batch must come with the others.
expect 0 register batched small --max-batch 8 --preferred-batch 4,8 --max-queue-delay 500us --batch-queue 16
expect 0 register batched small --max-batch 8 --preferred-batch 4,8 --max-queue-delay 500us --batch-queue 16
expect 0 status batched
grep -q "batching: *up to 8 rows, delay 500us, preferred 4,8, queue 16" "$dir/out" || fail "batching status: $(cat "$dir/out")"
expect 0 --json status batched
pycheck 'doc["batching"] == {"max_batch": 8, "max_queue_delay_us": 500, "preferred_batch": [4, 8], "max_queue": 16}'
expect 0 status small
grep -q "batching: *the daemon's" "$dir/out" || fail "default batching status: $(cat "$dir/out")"
expect 1 register batched small --max-batch 8
grep -q "registered with different info" "$dir/err" || fail "batching re-register: $(cat "$dir/err")"
expect 1 register badbatch small --max-batch 4 --preferred-batch 8
grep -q "preferred batch size 8 is outside 1..4" "$dir/err" || fail "bad batching: $(cat "$dir/err")"
expect 2 register nobatch small --preferred-batch 4
grep -q -- "--max-batch is required" "$dir/err" || fail "batching without --max-batch: $(cat "$dir/err")"
expect 2 register nobatch small --max-batch 4 --max-queue-delay soon
expect 0 unregister batched

# A model larger than every device (64 MiB here): 1 with model_too_large on stderr.
expect 1 register huge small --size-hint 1GiB --sync
grep -q "model_too_large" "$dir/err" || fail "register too large: $(cat "$dir/out" "$dir/err")"
expect 1 ensure huge --sync
grep -q "model_too_large" "$dir/err" || fail "ensure too large: $(cat "$dir/out" "$dir/err")"
[ ! -s "$dir/out" ] || fail "ensure too large wrote to stdout: $(cat "$dir/out")"
expect 0 unregister huge

# A load failure outlives its cause only while the file stays as the failed load saw it: a
# changed file (size, mtime, inode) makes the record stale at the next use; `retry`
# forgets it at once, without a use.
cp "$dir/repo/small/1/model.safetensors" "$dir/good.safetensors"
for m in flaky stale; do
  mkdir -p "$dir/repo/$m/1"
  cp "$dir/good.safetensors" "$dir/repo/$m/1/model.safetensors"
  expect 0 register $m $m
  truncate -s 100 "$dir/repo/$m/1/model.safetensors"
  expect 1 ensure $m --sync
  grep -q "header length prefix" "$dir/err" || fail "$m broken: $(cat "$dir/err")"
done
expect 0 --json inspect
failed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loads_failed"])' "$dir/out")
expect 1 ensure stale --sync           # unchanged: fails fast with the record, no new load
expect 0 --json inspect
pycheck "doc['loads_failed'] == $failed"
cp "$dir/good.safetensors" "$dir/repo/stale/1/model.safetensors"
expect 0 ensure stale --sync           # fixed: the next use loads it
expect 0 --json status stale
pycheck 'doc["state"] == "LOADED"'
cp "$dir/good.safetensors" "$dir/repo/flaky/1/model.safetensors"
expect 0 --json inspect failures       # no use yet: the record is still there
pycheck 'any(f["model"] == "flaky" for f in doc["failures"]) and not any(f["model"] == "stale" for f in doc["failures"])'
expect 0 retry flaky
grep -q "failures of flaky forgotten" "$dir/out" || fail "retry output: $(cat "$dir/out")"
expect 0 --json inspect failures
pycheck 'not any(f["model"] == "flaky" for f in doc["failures"])'
expect 0 --json status flaky
pycheck 'doc["state"] == "NOT_LOADED"'
expect 0 ensure flaky --sync
expect 1 retry nope
grep -q "no model or vmodel 'nope'" "$dir/err" || fail "retry unknown: $(cat "$dir/err")"
expect 2 retry
expect 0 unregister flaky
expect 0 unregister stale

# infer: random values (the width from the server, or --width), a JSON file (nested array and shape/data object), a wrong width.
expect 0 --json infer small --random --batch 3
pycheck 'doc["model"] == "small" and doc["outputs"][0]["shape"] == [3, 4] and len(doc["outputs"][0]["data"]) == 12'
expect 0 --json infer small --random
pycheck 'doc["outputs"][0]["shape"] == [1, 4]'
expect 0 --json infer small --random --width 8 --batch 3
pycheck 'doc["model"] == "small" and doc["outputs"][0]["shape"] == [3, 4] and len(doc["outputs"][0]["data"]) == 12'
echo '[[1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 0, 0]]' > "$dir/nested.json"
expect 0 --json infer small --input "$dir/nested.json"
pycheck 'doc["outputs"][0]["shape"] == [2, 4] and doc["cache_hit"] is True'
echo '{"shape": [8], "data": [1, 2, 3, 4, 5, 6, 7, 8]}' > "$dir/flat.json"
expect 0 infer small --input "$dir/flat.json" --batch 2
grep -q "output F32 \[2, 4\]" "$dir/out" || fail "infer human output: $(cat "$dir/out")"
expect 1 infer small --random --width 5
grep -q "invalid_argument" "$dir/err" || fail "wrong width message: $(cat "$dir/err")"
echo '[[1, 2], [3]]' > "$dir/ragged.json"
expect 2 infer small --input "$dir/ragged.json"
# Named, typed inputs: one object, a V2-style list, a dtype the model does not take, one input too many.
echo '{"name": "input", "dtype": "F32", "shape": [1, 8], "data": [[1, 2, 3, 4, 5, 6, 7, 8]]}' > "$dir/named.json"
expect 0 --json infer small --input "$dir/named.json"
pycheck 'doc["outputs"][0]["shape"] == [1, 4] and len(doc["outputs"][0]["data"]) == 4'
echo '{"inputs": [{"name": "input", "datatype": "INT64", "shape": [1, 8], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}' \
  > "$dir/int64.json"
expect 1 infer small --input "$dir/int64.json"
grep -q "input 'input' must be F32 (FP32), not I64 (INT64)" "$dir/err" || fail "a wrong dtype: $(cat "$dir/err")"
echo '{"name": "extra", "shape": [1], "data": [0]}' > "$dir/extra.json"
expect 1 infer small --input "$dir/named.json" --input "$dir/extra.json"
grep -q "takes 1 input tensor ('input'); got 2: 'extra' is not one of them" "$dir/err" ||
  fail "one input too many: $(cat "$dir/err")"
echo '{"dtype": "I8", "shape": [1], "data": [300]}' > "$dir/range.json"
expect 2 infer small --input "$dir/range.json"
grep -q "value 300 is not in range (I8)" "$dir/err" || fail "a value out of range: $(cat "$dir/err")"

# models: all pages by default, one page with --limit.
expect 0 --json models
pycheck '[m["id"] for m in doc["models"]] == ["other", "small"]'
expect 0 --json models --limit 1
pycheck '[m["id"] for m in doc["models"]] == ["other"] and doc["next"] == "other"'
expect 0 --json models --after other
pycheck '[m["id"] for m in doc["models"]] == ["small"]'
expect 0 models
grep -q "^ID  *STATE" "$dir/out" || fail "models table: $(cat "$dir/out")"

# inspect: every section as JSON and as a table.
expect 0 --json inspect
pycheck 'doc["registered_models"] == 2 and any(r["model"] == "small" for d in doc["devices"] for r in d["resident"])'
for section in devices queue cache failures models; do
  expect 0 --json inspect $section
  pycheck 'isinstance(doc, dict) and len(doc) > 0'
  expect 0 inspect $section
done
expect 0 inspect
grep -q "registered models" "$dir/out" || fail "inspect summary: $(cat "$dir/out")"
expect 0 inspect cache
grep -q "^MODEL  *SIZE  *PREDICTED  *MEASURED  *SCORE" "$dir/out" || fail "inspect cache has no PREDICTED, MEASURED and SCORE columns: $(cat "$dir/out")"
grep -q "^small  *848 B  *848 B  *exact " "$dir/out" || fail "inspect cache: a dense model is predicted its weights, measured exact: $(cat "$dir/out")"
grep -q "eviction order" "$dir/out" || fail "inspect cache order: $(cat "$dir/out")"
expect 0 inspect queue
grep -q "^MODEL  *KIND  *AGE  *ATTEMPTS  *WAITERS" "$dir/out" || fail "inspect queue has no WAITERS column: $(cat "$dir/out")"

# vmodels.
expect 0 vmodel set v small
expect 0 --json vmodel status v
pycheck 'doc["id"] == "v" and doc["active"] == "small"'
expect 1 vmodel set v other --expect nope
expect 0 --json infer v --random
pycheck 'doc["model"] == "small" and doc["outputs"][0]["shape"] == [1, 4]'
expect 0 vmodel delete v
expect 1 vmodel status v
# --auto-delete: the target is unregistered once no vmodel uses it.
expect 0 register temp small
expect 0 vmodel set tv temp --auto-delete
expect 0 --json vmodel status tv
pycheck 'doc["target"] == "temp"'
expect 0 vmodel delete tv
expect 1 status temp
grep -q "not_found" "$dir/err" || fail "auto-deleted target still registered: $(cat "$dir/out" "$dir/err")"
expect 0 --json models
pycheck '"temp" not in [m["id"] for m in doc["models"]]'

# watch: prints the events of a load; --count stops it, Ctrl-C (SIGINT) ends it with 0.
"$warmctl" --connect "unix:$dir/warm.sock" --json watch --count 2 > "$dir/watch" 2> "$dir/watch.err" &
watch_pid=$!
for _ in $(seq 100); do grep -q watching "$dir/watch.err" && break; sleep 0.1; done
expect 0 ensure other --sync
for _ in $(seq 100); do kill -0 $watch_pid 2> /dev/null || break; sleep 0.1; done
kill $watch_pid 2> /dev/null && fail "watch --count 2 did not stop"
wait $watch_pid || fail "watch exited $?: $(cat "$dir/watch.err")"
python3 - "$dir/watch" <<'PY' || fail "watch output: $(cat "$dir/watch")"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
assert len(events) == 2 and all(e["model"] == "other" for e in events), events
assert events[1]["sequence"] == events[0]["sequence"] + 1, events
assert all(e["missed"] == 0 for e in events), events
PY
"$warmctl" --connect "unix:$dir/warm.sock" watch > "$dir/watch" 2> "$dir/watch.err" &
watch_pid=$!
for _ in $(seq 100); do grep -q watching "$dir/watch.err" && break; sleep 0.1; done
kill -INT $watch_pid
wait $watch_pid
rc=$?
[ "$rc" = 0 ] || fail "watch after SIGINT exited $rc"

# Server-reported errors: 1 with the status on stderr.
expect 1 status nope
grep -q "not_found" "$dir/err" || fail "unknown id message: $(cat "$dir/err")"
expect 1 ensure nope
expect 1 register bad ../escape
expect 0 unregister small
expect 1 status small

# The REPL: stdin is not a terminal, so lines are read plainly and each runs like one command.
printf 'models\n\nstatus other\n--json\nstatus other\nbogus\nquit\nstatus other\n' |
  "$warmctl" --connect "unix:$dir/warm.sock" > "$dir/repl" 2> "$dir/repl.err"
grep -q "^ID  *STATE" "$dir/repl" || fail "REPL models table: $(cat "$dir/repl" "$dir/repl.err")"
grep -q '"id": "other"' "$dir/repl" || fail "REPL --json line: $(cat "$dir/repl")"
[ "$(grep -c "^id:  *other" "$dir/repl")" = 1 ] || fail "REPL status: $(cat "$dir/repl")"
grep -q "bogus" "$dir/repl.err" || fail "REPL bad command: $(cat "$dir/repl.err")"
printf 'help\n' | "$warmctl" --connect "unix:$dir/warm.sock" | grep -q "vmodel" || fail "REPL help"

# A listener that never accepts (its backlog holds the connection, nothing answers): warmctl
# gives up after --connect-timeout instead of hanging, and says so.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); time.sleep(60)' "$dir/mute.sock" &
mute_pid=$!
for _ in $(seq 50); do [ -S "$dir/mute.sock" ] && break; sleep 0.1; done
started=$(date +%s%N)
timeout 30 "$warmctl" --connect "unix:$dir/mute.sock" --connect-timeout 300ms models > /dev/null 2> "$dir/err"
rc=$?
waited_ms=$(( ($(date +%s%N) - started) / 1000000 ))
kill "$mute_pid" 2> /dev/null
[ "$rc" = 2 ] || fail "a mute listener: exit status $rc, want 2: $(cat "$dir/err")"
grep -q "no answer within 300 ms" "$dir/err" || fail "a mute listener's message: $(cat "$dir/err")"
[ "$waited_ms" -lt 5000 ] || fail "a mute listener held warmctl for $waited_ms ms"
expect 2 --connect-timeout soon models
expect 0 --connect-timeout 2s models

# The REPL across a restart of warmd: the command after it reconnects by itself.
mkfifo "$dir/repl.in"
"$warmctl" --connect "unix:$dir/warm.sock" < "$dir/repl.in" > "$dir/repl" 2> "$dir/repl.err" &
repl_pid=$!
exec 3> "$dir/repl.in"
echo "status other" >&3
for _ in $(seq 50); do grep -q "^id:  *other" "$dir/repl" && break; sleep 0.1; done
kill "$warmd_pid" && wait "$warmd_pid"
start_warmd host:64MiB 3>&-  # the new warmd must not hold the REPL's input open
echo "status other" >&3
exec 3>&-
wait "$repl_pid"
[ "$(grep -c "^id:  *other" "$dir/repl")" = 2 ] ||
  fail "REPL after a restart: $(cat "$dir/repl" "$dir/repl.err")"
[ ! -s "$dir/repl.err" ] || fail "REPL after a restart printed an error: $(cat "$dir/repl.err")"

[ "$failures" = 0 ] && echo "warmctl RPC: all checks passed"
exit $((failures > 0))
