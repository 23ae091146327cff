#!/usr/bin/env bash
# Drives warm-eval's offline commands through the real executable: a tiny catalog and a Zipf trace,
# then `simulate` with and without --json (JSON is its only format, so both print the same one
# object per policy per line), and its refusals: an unknown flag and a bad --capacity (exit 2);
# `simulate --instances` (a cluster) and its refusals.
#   eval_cli_test.sh WARM_EVAL
set -u
eval_bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$eval_bin" catalog --models 4 --min-size 200KB --max-size 2MB --seed 3 --out "$dir/catalog.csv" > /dev/null ||
  fail "catalog"
"$eval_bin" trace --zipf 0.8 --catalog "$dir/catalog.csv" --requests 300 --rate 300 --seed 1 \
  --out "$dir/trace.csv" > /dev/null || fail "trace"

sim() { "$eval_bin" simulate --trace "$dir/trace.csv" --catalog "$dir/catalog.csv" --capacity 50% --policy lru,kdf "$@"; }

sim --json > "$dir/json.out" 2> "$dir/err" || fail "simulate --json exited $?: $(cat "$dir/err")"
python3 - "$dir/json.out" << 'PY' || fail "simulate --json output: $(cat "$dir/json.out")"
import json, sys
docs = [json.loads(line) for line in open(sys.argv[1])]
assert [d["policy"] for d in docs] == ["lru", "kdf"], docs
assert all(d["requests"] == 300 and d["hits"] + d["misses"] == 300 for d in docs), docs
PY
sim > "$dir/plain.out" 2> "$dir/err" || fail "simulate exited $?: $(cat "$dir/err")"
cmp -s "$dir/json.out" "$dir/plain.out" || fail "simulate output differs with --json"

# The default policies: every online one and belady-size, opt only where it runs (up to 16 models).
"$eval_bin" simulate --trace "$dir/trace.csv" --catalog "$dir/catalog.csv" --capacity 50% > "$dir/default.out" 2> "$dir/err" ||
  fail "simulate with the default policies exited $?: $(cat "$dir/err")"
"$eval_bin" catalog --models 20 --min-size 200KB --max-size 2MB --seed 5 --out "$dir/catalog20.csv" > /dev/null || fail "catalog 20"
"$eval_bin" trace --zipf 0.8 --catalog "$dir/catalog20.csv" --requests 300 --rate 300 --seed 2 \
  --out "$dir/trace20.csv" > /dev/null || fail "trace 20"
"$eval_bin" simulate --trace "$dir/trace20.csv" --catalog "$dir/catalog20.csv" --capacity 50% > "$dir/default20.out" \
  2> "$dir/err" || fail "simulate of 20 models with the default policies exited $?: $(cat "$dir/err")"
python3 - "$dir/default.out" "$dir/default20.out" << 'PY' || fail "default policies: $(cut -c1-60 "$dir/default20.out")"
import json, sys
small = [json.loads(line)["policy"] for line in open(sys.argv[1])]
large = [json.loads(line)["policy"] for line in open(sys.argv[2])]
online = ["lru", "lfu", "arc", "srrip", "sieve", "s3fifo", "lhd", "lecar", "gdsf", "iam", "kdf", "kdf-adaptive"]
assert small == online + ["belady-size", "opt"], small
assert large == online + ["belady-size"], large
PY
"$eval_bin" simulate --help > "$dir/help" 2>&1
for name in kdf sieve s3fifo lhd lecar belady-size opt; do
  grep -q "$name" "$dir/help" || fail "simulate --help does not name $name"
done

sim --yaml > /dev/null 2>&1
[ $? = 2 ] || fail "simulate --yaml: exit status"
"$eval_bin" simulate --trace "$dir/trace.csv" --catalog "$dir/catalog.csv" --capacity 0% --json > /dev/null 2>&1
[ $? = 2 ] || fail "simulate --capacity 0%: exit status"

# A cluster: every policy under every placement rule, one line each; the refusals exit 2.
csim() { "$eval_bin" simulate --trace "$dir/trace.csv" --catalog "$dir/catalog.csv" --capacity 150% --policy lru,kdf "$@"; }
csim --instances 2 > "$dir/cluster.out" 2> "$dir/err" || fail "simulate --instances exited $?: $(cat "$dir/err")"
python3 - "$dir/cluster.out" << 'PY' || fail "simulate --instances output: $(cat "$dir/cluster.out")"
import json, sys
docs = [json.loads(line) for line in open(sys.argv[1])]
assert [(d["policy"], d["placement"]) for d in docs] == [
    ("lru", "warm"), ("lru", "modelmesh"), ("kdf", "warm"), ("kdf", "modelmesh")], docs
assert all(d["instances"] == 2 and d["requests"] == 300 and 0 < d["cold_starts"] <= d["waited"] <= 300
           for d in docs), docs
PY
csim --instances 2 --placement nearest > /dev/null 2> "$dir/err"
[ $? = 2 ] && grep -q "warm, modelmesh" "$dir/err" || fail "simulate --placement nearest: $(cat "$dir/err")"
csim --instances 0 > /dev/null 2>&1
[ $? = 2 ] || fail "simulate --instances 0: exit status"
sim --instances 40 > /dev/null 2> "$dir/err"
[ $? = 1 ] && grep -q "larger than an instance" "$dir/err" || fail "simulate --instances 40: $(cat "$dir/err")"

# Shaped catalogs and synthetic weeks; their refusals exit 2 with the reason.
"$eval_bin" catalog --models 6 --sizes two-class --order ascending --large-share 0.5 --min-size 1MB \
  --max-size 3MB --out "$dir/shaped.csv" > /dev/null || fail "catalog --sizes"
[ "$(tail -1 "$dir/shaped.csv" | cut -d, -f2)" = 3000000 ] || fail "catalog --order ascending: $(cat "$dir/shaped.csv")"
"$eval_bin" trace --synthetic --catalog "$dir/shaped.csv" --days 2 --per-day 500 --seed 4 --out "$dir/week.csv" \
  > "$dir/week.json" || fail "trace --synthetic"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['source']=='synthetic' and d['days']==2 and 700<d['requests']<1400, d" \
  "$dir/week.json" || fail "trace --synthetic summary: $(cat "$dir/week.json")"
"$eval_bin" trace --synthetic --catalog "$dir/shaped.csv" --pareto 0.5 --out "$dir/bad.csv" 2> "$dir/err" > /dev/null
[ $? = 2 ] && grep -q "Pareto" "$dir/err" || fail "trace --pareto 0.5: exit status or message: $(cat "$dir/err")"
"$eval_bin" trace --zipf 1 --models 3 --requests 5 --rate 1 --per-day 10 --out "$dir/bad.csv" > /dev/null 2>&1
[ $? = 2 ] || fail "trace --per-day without --synthetic: exit status"
"$eval_bin" catalog --models 3 --sizes zipf --min-size 1MB --max-size 2MB --out "$dir/bad.csv" > /dev/null 2>&1
[ $? = 2 ] || fail "catalog --sizes zipf: exit status"
[ ! -e "$dir/bad.csv" ] || fail "a refused command wrote its output"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "eval_cli_test: all checks passed"
