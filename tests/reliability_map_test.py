#!/usr/bin/env python3
"""docs/reliability.md is a coverage map: every test its tables cite must be a registered test.

Usage: reliability_map_test.py DOC INTRO_TESTS_JSON

Reads every Markdown table of DOC whose header has a column named "Test" or "Tested in", takes
each backquoted name in that column (`registry_test`, `warmd_security_test`, ...) and checks it
against the test names meson registered (the build's meson-info/intro-tests.json). Fails, naming
the row, for a name that is not a registered test, and for a row of such a table that cites no
test at all unless it says how it is run instead ("fuzzed", "by hand"). Prints how many rows and
citations it checked, so an empty pass (no table found) is visible — and fails then too.
"""

import json
import re
import sys


def tables(lines):
    """Yields (header cells, [(line number, cells)]) for each Markdown table."""
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append((j + 1, split_row(lines[j])))
                j += 1
            yield header, rows
            i = j
        else:
            i += 1


def split_row(line):
    """Cells of a table row; a `|` inside backquotes does not split."""
    cells, cell, quoted = [], "", False
    for c in line.strip().strip("|"):
        if c == "`":
            quoted = not quoted
        if c == "|" and not quoted:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += c
    cells.append(cell.strip())
    return cells


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    doc, intro = sys.argv[1], sys.argv[2]
    registered = {t["name"] for t in json.load(open(intro))}
    lines = open(doc, encoding="utf-8").read().splitlines()
    problems, rows_checked, citations = [], 0, 0
    for header, rows in tables(lines):
        column = next((k for k, h in enumerate(header) if h.lower() in ("test", "tested in", "tests")), None)
        if column is None:
            continue
        for number, cells in rows:
            rows_checked += 1
            cell = cells[column] if column < len(cells) else ""
            names = re.findall(r"`([^`]+)`", cell)
            if not names and not re.search(r"fuzzed|by hand", cell):
                problems.append(f"{doc}:{number}: the row cites no test: {cell!r}")
            for name in names:
                citations += 1
                if name not in registered:
                    problems.append(f"{doc}:{number}: `{name}` is not a registered test")
    for p in problems:
        print(p)
    print(f"{rows_checked} rows, {citations} test citations checked against {len(registered)} registered tests")
    if rows_checked == 0:
        print(f"{doc}: no table with a Test column found")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
