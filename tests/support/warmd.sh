# Sourced by the black-box shell tests that run the real warmd. Gives them a scratch directory
# $dir (removed on exit, with the warmd started here stopped first), fail() counting $failures,
# and start_warmd. The sourcing script sets $warmd to the warmd executable first.

dir=$(mktemp -d)
warmd_pid=
failures=0
cleanup() {
  [ -n "$warmd_pid" ] && kill "$warmd_pid" 2> /dev/null && wait "$warmd_pid" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# start_warmd DEVICE: warmd over $dir/repo and $dir/state on unix:$dir/warm.sock, logging to
# $dir/warmd.log; ends the test (exit 1) when the socket does not appear within 10 s.
start_warmd() {
  "$warmd" --repo "$dir/repo" --state "$dir/state" --device "$1" --listen "unix:$dir/warm.sock" \
    > "$dir/warmd.log" 2>&1 &
  warmd_pid=$!
  for _ in $(seq 100); do [ -S "$dir/warm.sock" ] && break; sleep 0.1; done
  [ -S "$dir/warm.sock" ] || { echo "FAIL: warmd did not start: $(cat "$dir/warmd.log")"; exit 1; }
}
