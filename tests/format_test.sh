#!/usr/bin/env bash
# Every C++ file of warm (src, include, tools, tests, fuzz) is as .clang-format writes it. Names
# each file that is not, with clang-format's first complaint about it; fix with
#   clang-format -i FILE          (or, for what a commit changed: git clang-format)
# Exit 77 (skipped) without clang-format 14 (tools/deps installs it).
set -uo pipefail
root=${1:?usage: format_test.sh SOURCE_ROOT}
command -v clang-format >/dev/null || { echo "clang-format not found"; exit 77; }
# Other versions lay out some constructs differently: the tree is formatted by Debian 12's.
version=$(clang-format --version | grep -oE 'version [0-9]+' | cut -d' ' -f2)
[ "$version" = 14 ] || { echo "clang-format $version here; the tree is formatted with version 14"; exit 77; }
cd "$root" || exit 1
mapfile -t files < <(find src include tools tests fuzz -type f \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' \) | sort)
[ "${#files[@]}" -gt 0 ] || { echo "FAIL: no C++ files found under $root"; exit 1; }
# One clang-format per 64 files; each violation is reported as "FILE:LINE:COL: error: ...".
report=$(printf '%s\0' "${files[@]}" | xargs -0 -n 64 clang-format --dry-run -Werror 2>&1)
mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$report" | cut -d: -f1 | sort -u)
for f in "${bad[@]}"; do
  echo "FAIL: $f is not formatted; first difference at $(grep -m1 -oE "^$f:[0-9]+" <<<"$report" | cut -d: -f2)"
done
echo "${#files[@]} files, ${#bad[@]} not formatted"
[ "${#bad[@]}" -eq 0 ]
