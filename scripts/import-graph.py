#!/usr/bin/env python3
"""Draws the module import graph of each crate and fails on an import circle.

    python3 scripts/import-graph.py [--dot] [crates/core/src ...]

A module is a file (`a/b.rs` or `a/b/mod.rs` is `a::b`); module A imports B when A's code
(outside `#[cfg(test)]` modules) names `crate::B...` or `super::...` resolving to B, in a
`use` tree or a path. A folder is one unit to the modules beside it: an import from
`a::x` to `b::y` is an import from `a` to `b` among the crate's top-level modules, one from
`a::x` to `a::y` is between `x` and `y` inside `a`, and a module naming its own ancestor or
descendant is not an import (a facade and what it fronts). Prints, for every folder, each
circle among the units inside it (a strongly connected set of more than one) and exits 1
if there is any; `--dot` prints the file-level graph in Graphviz's language instead (the
drawing of the imports).
"""

import os
import re
import sys

CRATES = ["crates/core/src", "crates/llm/src", "crates/proxy/src", "crates/cli/src", "crates/python/src"]


def modules(root):
    """{module path: source} for every .rs file under root (test-only files left out)."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if any(p == "tests" or p.endswith("_tests") for p in parts):
                continue
            with open(path, encoding="utf-8") as f:
                found["::".join(parts)] = f.read()
    return found


def strip_tests(source):
    """The source without `#[cfg(test)]` items (brace-matched)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", source):
        if m.start() < i:
            continue
        out.append(source[i : m.start()])
        j = source.find("{", m.end())
        semi = source.find(";", m.end())
        if j == -1 or (semi != -1 and semi < j):
            i = semi + 1 if semi != -1 else len(source)
            continue
        depth = 0
        for k in range(j, len(source)):
            if source[k] == "{":
                depth += 1
            elif source[k] == "}":
                depth -= 1
                if depth == 0:
                    i = k + 1
                    break
        else:
            i = len(source)
    out.append(source[i:])
    return "".join(out)


def strip_comments(source):
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def use_paths(tree, prefix=""):
    """Expands a use tree (`a::{b, c::{d, e}}`) into full paths."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace == -1:
        return [prefix + tree.split(" as ")[0].strip()]
    head = tree[:brace]
    body = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    out = []
    for part in parts:
        if part.strip():
            out.extend(use_paths(part, prefix + head))
    return out


def referenced(module, source):
    """Every module path the source names, made absolute (crate-relative)."""
    source = strip_comments(strip_tests(source))
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", source):
        paths.extend(use_paths(m.group(1)))
    paths.extend(re.findall(r"\b((?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+)", source))
    here = module.split("::") if module else []
    out = []
    for path in paths:
        segs = [s for s in path.replace(" ", "").split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            out.append(segs[1:])
        elif segs[0] in ("super", "self"):
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super" and base:
                    base.pop()
                segs = segs[1:]
            out.append(base + segs)
    return out


def graph(root):
    mods = modules(root)
    edges = {m: set() for m in mods}
    for module, source in mods.items():
        for segs in referenced(module, source):
            for n in range(len(segs), 0, -1):
                target = "::".join(segs[:n])
                if target in mods:
                    break
            else:
                continue
            if target == module or module.startswith(target + "::") or target.startswith(module + "::"):
                continue
            edges[module].add(target)
    return edges


def levels(edges):
    """{folder: {unit: {unit}}}: each file-level edge as an edge between the two units
    directly inside the deepest folder holding both ends."""
    out = {}
    for a, targets in edges.items():
        for b in targets:
            sa, sb = a.split("::") if a else [], b.split("::") if b else []
            n = 0
            while n < min(len(sa), len(sb)) and sa[n] == sb[n]:
                n += 1
            if n == len(sa) or n == len(sb):
                continue
            folder = "::".join(sa[:n])
            units = out.setdefault(folder, {})
            units.setdefault(sa[n], set()).add(sb[n])
            units.setdefault(sb[n], set())
    return out


def circles(edges):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main(argv):
    dot = "--dot" in argv
    roots = [a for a in argv if not a.startswith("--")] or CRATES
    failed = False
    for root in roots:
        edges = graph(root)
        if dot:
            name = root.split("/")[1] if root.startswith("crates/") else root
            print(f'digraph "{name}" {{')
            for a in sorted(edges):
                for b in sorted(edges[a]):
                    print(f'  "{a or "lib"}" -> "{b or "lib"}";')
            print("}")
            continue
        found = []
        for folder, units in sorted(levels(edges).items()):
            for group in circles(units):
                found.append(group)
                where = f"{root} ({folder})" if folder else root
                print(f"{where}: import circle of {len(group)} modules: {', '.join(group)}")
        failed = failed or bool(found)
        if not found:
            print(f"{root}: {len(edges)} modules, no import circle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
