#!/usr/bin/env bash
# `warm-eval sweep` through the real executable: a catalog, a long and two short Zipf traces, a
# cells file of 3 traces × 4 capacities × 7 policies. The output with --threads 2 and 4 must be
# byte-identical to --threads 1, and --threads 1 must equal the loop it replaces (one `simulate`
# per cell, its lines prefixed with the cell's tag). Refusals: a malformed line, a tag reusing a
# result field, a missing file (exit 1); a failing simulation prints the lines before it.
#   eval_sweep_test.sh WARM_EVAL
set -u
eval_bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$eval_bin" catalog --models 30 --min-size 200KB --max-size 2MB --seed 3 --out "$dir/catalog.csv" > /dev/null ||
  fail "catalog"
# The first trace is long, so its cells finish last: results gathered as they finish would move.
"$eval_bin" trace --zipf 0.9 --catalog "$dir/catalog.csv" --requests 200000 --rate 300 --seed 1 \
  --out "$dir/t1.csv" > /dev/null || fail "trace 1"
for seed in 2 3; do
  "$eval_bin" trace --zipf 0.7 --catalog "$dir/catalog.csv" --requests 500 --rate 300 --seed "$seed" \
    --out "$dir/t$seed.csv" > /dev/null || fail "trace $seed"
done
policies=lru,lfu,arc,srrip,gdsf,kdf,belady-size
for seed in 1 2 3; do
  for pct in 30 50 70 90; do
    printf '{"trace":"%s","catalog":"%s","capacity":"%s%%","policy":"%s","tag":{"seed":%s,"pct":%s}}\n' \
      "$dir/t$seed.csv" "$dir/catalog.csv" "$pct" "$policies" "$seed" "$pct"
  done
done > "$dir/cells.jsonl"

# The sequential loop `sweep` replaces.
for seed in 1 2 3; do
  for pct in 30 50 70 90; do
    "$eval_bin" simulate --trace "$dir/t$seed.csv" --catalog "$dir/catalog.csv" --capacity "$pct%" \
      --policy "$policies" | sed "s/^{/{\"seed\":$seed,\"pct\":$pct,/"
  done
done > "$dir/loop.out"

for threads in 1 2 4; do
  "$eval_bin" sweep --cells "$dir/cells.jsonl" --threads "$threads" > "$dir/sweep-$threads.out" 2> "$dir/err" ||
    fail "sweep --threads $threads exited $?: $(cat "$dir/err")"
done
[ "$(wc -l < "$dir/sweep-1.out")" = 84 ] || fail "sweep printed $(wc -l < "$dir/sweep-1.out") lines, not 84"
cmp -s "$dir/loop.out" "$dir/sweep-1.out" || fail "sweep --threads 1 differs from the simulate loop"
cmp -s "$dir/sweep-1.out" "$dir/sweep-2.out" || fail "sweep --threads 2 differs from --threads 1"
cmp -s "$dir/sweep-1.out" "$dir/sweep-4.out" || fail "sweep --threads 4 differs from --threads 1"

refuse() {  # refuse WHAT LINE: a cells file of LINE must exit 1
  echo "$2" > "$dir/bad.jsonl"
  "$eval_bin" sweep --cells "$dir/bad.jsonl" > /dev/null 2> "$dir/err"
  [ $? = 1 ] || fail "$1: exit status"
  [ -s "$dir/err" ] || fail "$1: no message"
}
refuse "not JSON" '{"trace":'
refuse "tag with a result field" "{\"trace\":\"$dir/t2.csv\",\"catalog\":\"$dir/catalog.csv\",\"capacity\":\"50%\",\"policy\":\"lru\",\"tag\":{\"hits\":1}}"
refuse "missing trace file" "{\"trace\":\"$dir/none.csv\",\"catalog\":\"$dir/catalog.csv\",\"capacity\":\"50%\",\"policy\":\"lru\"}"
refuse "no policy" "{\"trace\":\"$dir/t2.csv\",\"catalog\":\"$dir/catalog.csv\",\"capacity\":\"50%\"}"
printf '{"trace":"%s","catalog":"%s","capacity":"50%%","policy":"lru,nonesuch,kdf"}\n' "$dir/t2.csv" "$dir/catalog.csv" \
  > "$dir/fails.jsonl"
"$eval_bin" sweep --cells "$dir/fails.jsonl" --threads 2 > "$dir/fails.out" 2> /dev/null
[ $? = 1 ] || fail "failing simulation: exit status"
[ "$(wc -l < "$dir/fails.out")" = 1 ] || fail "failing simulation: expected the 1 line before it"
"$eval_bin" sweep --cells "$dir/cells.jsonl" --threads -1 > /dev/null 2>&1
[ $? = 2 ] || fail "--threads -1: exit status"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "eval_sweep_test: all checks passed"
