#!/usr/bin/env python3
"""The layers of docs/architecture.md hold in the code: every include points down.

Usage: layers_test.py SOURCE_ROOT

The order is written once, in the fenced block of docs/architecture.md's "Layers" section: one
line per src/ folder, `RANK FOLDER [HEADER ...]`, where the headers are the include paths outside
the folder that belong to it (its public headers in include/warm/, generated headers). This test
reads that block and checks every `#include "..."` in src/ and include/warm/:

  - a file may include its own folder's headers and those of a folder of lower rank; folders of
    equal rank are siblings and may not include each other;
  - every src/ folder and every header under include/warm/ has a line in the block, and every
    include can be placed in a folder (a new folder or header is added to the table, not skipped);
  - headers under include/ include only headers under include/, and those include/warm/meson.build
    installs include only each other, so the installed tree compiles without src/.

The tools sit above every layer. The fenced block of the "Tools" section lists, per tools/ folder,
`tools/NAME [FOLDER ...]`: the src/ layers (and other tools' or the tests' folders) it may include
besides its own files and the public headers under include/warm/. Every tools/ folder with C++
sources has a line, and an include outside its list fails: a tool drives the layers through their
interfaces and does not grow its own copy of one (warmd may not reach the actors, the policies or
etcd directly: the cluster's drivers live in src/cluster).

Fails naming each offending file, line and include. Prints what it checked, so an empty pass is
visible (and fails too).
"""

import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu"}


def fenced_block(doc, heading):
    """(line number, line) of each line in the first fenced block of section `heading`."""
    lines = doc.read_text().splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == heading)
    except StopIteration:
        sys.exit(f"{doc}: no '{heading}' section")
    in_block = False
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("## "):
            return
        if line.startswith("```"):
            if in_block:
                return
            in_block = True
            continue
        if in_block:
            yield number, line


def read_layers(doc):
    """Returns ({folder: rank}, {include path: folder}) from the Layers section's fenced block."""
    ranks, owners = {}, {}
    for number, line in fenced_block(doc, "## Layers"):
        words = line.split()
        if not words or not words[0].isdigit():
            continue  # the heading line
        if len(words) < 2 or not words[1].startswith("src/"):
            sys.exit(f"{doc}:{number}: expected 'RANK src/FOLDER [HEADER ...]', got {line!r}")
        folder = words[1]
        ranks[folder] = int(words[0])
        for header in words[2:]:
            if header in owners:
                sys.exit(f"{doc}:{number}: {header} is already given to {owners[header]}")
            owners[header] = folder
    if not ranks:
        sys.exit(f"{doc}: the Layers section has no fenced block of 'RANK src/FOLDER' lines")
    return ranks, owners


def read_tools(doc):
    """Returns {tools folder: set of folders it may include} from the Tools section's block."""
    allowed = {}
    for number, line in fenced_block(doc, "## Tools"):
        words = line.split()
        if not words or not words[0].startswith("tools/"):
            continue
        for folder in words[1:]:
            if not (folder.startswith("src/") or folder.startswith("tools/")
                    or folder == "tests/support"):
                sys.exit(f"{doc}:{number}: expected 'tools/NAME [src/X|tools/Y|tests/support ...]'"
                         f", got {line!r}")
        allowed[words[0]] = set(words[1:])
    if not allowed:
        sys.exit(f"{doc}: the Tools section has no fenced block of 'tools/NAME ...' lines")
    return allowed


def check_tools(root, ranks, owners, problems):
    """The Tools rule; returns the number of includes checked."""
    allowed = read_tools(root / "docs" / "architecture.md")
    folders = {f"tools/{p.name}" for p in (root / "tools").iterdir()
               if p.is_dir() and any(q.suffix in SOURCE_SUFFIXES for q in p.rglob("*"))}
    for folder in sorted(folders - allowed.keys()):
        problems.append(f"{folder}: a tools/ folder with C++ sources and no line in "
                        "docs/architecture.md's Tools")
    for folder in sorted(allowed.keys() - folders):
        problems.append(f"docs/architecture.md Tools: {folder} has no C++ sources")
    checked = 0
    for folder in sorted(folders & allowed.keys()):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                include = match.group(1)
                checked += 1
                where = f"{path.relative_to(root)}:{number}: #include \"{include}\""
                if include.startswith("warm/") and (root / "include" / include).is_file():
                    continue  # the embedding API
                if include.startswith("../"):
                    target = str((path.parent / include).resolve().parent.relative_to(root.resolve()))
                elif (path.parent / include).is_file():
                    continue  # its own files
                elif include.endswith(".capnp.h") and (path.parent / include[:-2]).is_file():
                    continue  # generated from its own schema
                elif include in owners:
                    target = owners[include]
                elif include.split("/")[0] == "support" and (root / "tests" / include).is_file():
                    target = "tests/support"
                elif f"src/{include.split('/')[0]}" in ranks and "/" in include:
                    target = f"src/{include.split('/')[0]}"
                else:
                    problems.append(f"{where}: cannot tell which folder this header belongs to")
                    continue
                if target != folder and target not in allowed[folder]:
                    problems.append(f"{where}: {folder} may include only "
                                    f"{' '.join(sorted(allowed[folder])) or 'its own files'} "
                                    f"besides warm/ (docs/architecture.md, Tools); {target} is not "
                                    "among them")
    return checked


def installed_headers(meson_build):
    """The header names include/warm/meson.build installs."""
    text = meson_build.read_text()
    call = text[text.index("install_headers("):]
    call = call[:call.index(")")]
    return {"warm/" + name for name in re.findall(r"'([^']+\.hpp)'", call)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = Path(sys.argv[1])
    ranks, owners = read_layers(root / "docs" / "architecture.md")
    problems = []

    folders = {f"src/{p.name}" for p in (root / "src").iterdir() if p.is_dir()}
    for folder in sorted(folders - ranks.keys()):
        problems.append(f"{folder}: a src/ folder with no line in docs/architecture.md's Layers")
    for folder in sorted(ranks.keys() - folders):
        problems.append(f"docs/architecture.md Layers: {folder} does not exist")

    files = []  # (path relative to root, the folder it belongs to)
    for folder in sorted(folders & ranks.keys()):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES:
                files.append((path.relative_to(root), folder))
    for path in sorted((root / "include").rglob("*")):
        if path.suffix in SOURCE_SUFFIXES:
            name = str(path.relative_to(root / "include"))
            if name not in owners:
                problems.append(f"include/{name}: a public header with no folder in "
                                "docs/architecture.md's Layers")
                continue
            files.append((path.relative_to(root), owners[name]))

    def owner_of(include, including):
        if include in owners:
            return owners[include]
        top = include.split("/")[0]
        if "/" in include and f"src/{top}" in ranks:
            return f"src/{top}"
        if (root / including.parent / include).is_file():  # beside the including file
            return None
        return "?"

    installed = installed_headers(root / "include" / "warm" / "meson.build")
    checked = 0
    for path, folder in files:
        for number, line in enumerate((root / path).read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            include = match.group(1)
            checked += 1
            where = f"{path}:{number}: #include \"{include}\""
            public = str(path.relative_to("include")) if path.parts[0] == "include" else None
            if public is not None and not (root / "include" / include).is_file():
                problems.append(f"{where}: a header under include/ includes one that is not under "
                                "include/ (the embedding API must compile without src/)")
            if public in installed and include not in installed:
                problems.append(f"{where}: an installed header includes a header that is not "
                                "installed (include/warm/meson.build)")
            target = owner_of(include, path)
            if target is None:
                target = folder if public is None else "?"
            if target == "?":
                problems.append(f"{where}: cannot tell which layer this header belongs to "
                                "(docs/architecture.md, Layers)")
            elif target != folder and ranks[target] >= ranks[folder]:
                how = "a sibling" if ranks[target] == ranks[folder] else "a layer above"
                problems.append(f"{where}: {folder} (rank {ranks[folder]}) includes {target} "
                                f"(rank {ranks[target]}), {how}; includes must point down")

    tool_includes = check_tools(root, ranks, owners, problems)
    for problem in problems:
        print(problem)
    print(f"layers_test: {len(files)} files in {len(ranks)} folders, {checked} includes checked, "
          f"{tool_includes} includes of the tools checked, {len(problems)} problems")
    if problems or checked == 0 or tool_includes == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
