#!/usr/bin/env python3
"""Writes the console's page files into a C++ source as byte arrays (console/assets.hpp).

Usage: embed_assets.py OUTPUT.cpp FILE... — each FILE is served at /console/<its name>, with a
content type from its extension. Run by meson at build time; the page ships inside warmd.
"""
import os
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    # Not text/javascript: httplib compresses text/* (with brotli's slowest level for browsers);
    # served from loopback or a LAN, the page is faster uncompressed.
    ".js": "application/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def main() -> None:
    output, inputs = sys.argv[1], sys.argv[2:]
    lines = ['#include "console/assets.hpp"', "", "namespace warm::console {", "namespace {"]
    entries = []
    for index, path in enumerate(inputs):
        name = os.path.basename(path)
        kind = TYPES.get(os.path.splitext(name)[1])
        if kind is None:
            sys.exit(f"embed_assets.py: no content type for {name}")
        with open(path, "rb") as f:
            data = f.read()
        body = ",".join(str(b) for b in data)
        lines.append(f"const unsigned char file{index}[] = {{{body}, 0}};")
        entries.append(
            f'    {{"/console/{name}", "{kind}", '
            f"std::string_view(reinterpret_cast<const char*>(file{index}), {len(data)})}},"
        )
    lines += ["}  // namespace", "", "const std::vector<asset>& assets() {",
              "  static const std::vector<asset> all{"] + entries + [
        "  };", "  return all;", "}", "", "}  // namespace warm::console", ""]
    with open(output, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
