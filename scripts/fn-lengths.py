#!/usr/bin/env python3
"""Lists every function longer than a limit, outside tests.

    python3 scripts/fn-lengths.py [--max 80] [crates/proxy/src ...]

A function runs from the line of its `fn` to the line of its closing brace (rustfmt puts it
at the indentation the `fn` line has). Files named `tests.rs` and `#[cfg(test)]` modules are
left out. Prints `path:line name length` for each function over the limit and exits 1 if
there is any; prints the longest one otherwise.
"""

import os
import re
import sys

FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def functions(path):
    """(line, name, length) of each function of the file at `path`, outside test modules."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, skip_until_indent = [], None
    for i, line in enumerate(lines):
        if skip_until_indent is not None:
            if line.startswith(skip_until_indent + "}"):
                skip_until_indent = None
            continue
        if line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and "mod " in lines[i + 1]:
            if lines[i + 1].rstrip().endswith("{"):
                skip_until_indent = re.match(r"\s*", lines[i + 1]).group(0)
            continue
        m = FN.match(line)
        if not m:
            continue
        indent, name = m.group(1), m.group(2)
        for j in range(i, len(lines)):
            if lines[j].rstrip().endswith(";") and "{" not in "".join(lines[i : j + 1]):
                break  # a declaration without a body
            if lines[j] == indent + "}" or (j == i and line.rstrip().endswith("}")):
                out.append((i + 1, name, j - i + 1))
                break
    return out


def main(argv):
    limit = 80
    if "--max" in argv:
        limit = int(argv[argv.index("--max") + 1])
    roots = [a for a in argv if not a.startswith("--") and not a.isdigit()] or ["crates/proxy/src"]
    found, longest = [], (0, "", 0, "")
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(".rs") or name == "tests.rs":
                    continue
                path = os.path.join(folder, name)
                for line, fn, length in functions(path):
                    if length > longest[2]:
                        longest = (line, fn, length, path)
                    if length > limit:
                        found.append(f"{path}:{line} {fn} {length} lines")
    for entry in found:
        print(entry)
    if not found:
        line, fn, length, path = longest
        print(f"no function over {limit} lines (longest: {path}:{line} {fn}, {length})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
