#!/usr/bin/env bash
# Install test: stages `meson install` into a temporary DESTDIR, then builds the embedding example
# (tools/example/embed.cpp) the way a consumer would — only the staged headers and library, found
# through the staged warm.pc with pkg-config — and runs it.
#
# Usage: install_test.sh BUILD_DIR SOURCE_DIR   (meson passes both; see tests/meson.build)
# Fails when: the install fails, warm.pc is missing or unusable, the example does not compile or
# link against the staged tree (or picks up warm headers from anywhere else), or the example
# exits non-zero or prints something other than an output row, a LOADED status and "ok".
set -euo pipefail

build=${1:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
source=${2:?usage: install_test.sh BUILD_DIR SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/warm-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

fail() {
  echo "install_test: $*" >&2
  exit 1
}

# 1. Stage the install.
if ! meson install -C "$build" --destdir "$dest" --no-rebuild >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  fail "meson install failed"
fi

# 2. Find the staged warm.pc and point pkg-config at the staged prefix.
pc=$(find "$dest" -name warm.pc -print -quit)
[ -n "$pc" ] || fail "no warm.pc under $dest"
prefix=$(pkg-config --variable=prefix "$pc")
[ -n "$prefix" ] || fail "warm.pc has no prefix variable"
staged_prefix=$dest$prefix
[ -f "$staged_prefix/include/warm/runtime.hpp" ] || fail "runtime.hpp is not installed under $staged_prefix/include"
export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$(pkg-config --define-variable=prefix="$staged_prefix" --cflags --libs --static warm) ||
  fail "pkg-config cannot resolve warm (a Requires entry without its .pc?)"
echo "pkg-config --cflags --libs --static warm: $flags"
# Each library once in warm.pc's own Libs (meson's .pc generator repeated libtorch's dozens of
# times; what the Requires add is theirs).
repeated=$(grep -E '^Libs:' "$pc" | tr ' ' '\n' | grep -E '^(-l|/)' | sort | uniq -d)
[ -z "$repeated" ] || fail "warm.pc names these more than once: $repeated"

# 3. Compile and link the example against the staged tree only (no -I into the source tree).
#    The dependency file proves which warm headers the compiler really used.
cd "$tmp"
# shellcheck disable=SC2086  # $flags is a list of words
if ! c++ -std=c++17 -O1 -MD -MF embed.d "$source/tools/example/embed.cpp" -o embed $flags >compile.log 2>&1; then
  cat compile.log >&2
  fail "the example does not build against the installed warm"
fi
tr ' \\' '\n\n' <embed.d | grep -E '/warm/[a-z_]+\.hpp$' | sort -u >headers.txt
grep -q "^$staged_prefix/include/warm/runtime.hpp$" headers.txt || fail "runtime.hpp did not come from the staged install"
if grep -v "^$staged_prefix/include/warm/" headers.txt; then
  fail "the example used the warm headers above from outside the staged install"
fi

# 4. Run it.
run_example() {  # executable
  local status=0
  "./$1" "$tmp/run-$1" >"$1.log" 2>&1 || status=$?
  cat "$1.log"
  [ "$status" -eq 0 ] || fail "$1 exited with status $status"
  grep -Eq '^output output \[1, 3\]:( -?[0-9]+\.[0-9]+){3}$' "$1.log" || fail "$1: no output row of 3 values"
  grep -q '^status tiny: LOADED on host' "$1.log" || fail "$1: no LOADED status"
  grep -qx 'ok' "$1.log" || fail "$1 did not finish"
}
run_example embed

# 5. The same against the build tree, uninstalled: pkg-config prefers warm-uninstalled.pc where
#    PKG_CONFIG_PATH names the build's src/runtime.
flags=$(PKG_CONFIG_PATH="$build/src/runtime" pkg-config --cflags --libs warm) ||
  fail "pkg-config cannot resolve warm from $build/src/runtime"
echo "uninstalled: pkg-config --cflags --libs warm: $flags"
# shellcheck disable=SC2086
if ! c++ -std=c++17 -O1 -MD -MF embed-here.d "$source/tools/example/embed.cpp" -o embed-here $flags >compile-here.log 2>&1; then
  cat compile-here.log >&2
  fail "the example does not build against the uninstalled build tree"
fi
here_include=$(PKG_CONFIG_PATH="$build/src/runtime" pkg-config --variable=includedir warm)
[ "$(realpath "$here_include")" = "$(realpath "$source/include")" ] ||
  fail "warm-uninstalled.pc's includedir is $here_include, not the source tree's include/"
tr ' \\' '\n\n' <embed-here.d | grep -qxF "$here_include/warm/runtime.hpp" ||
  fail "the uninstalled build did not take runtime.hpp from $here_include"
run_example embed-here
echo "install_test: ok"
