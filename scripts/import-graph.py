#!/usr/bin/env python3
"""The import graph of an engine crate's source, and its cycles.

Reads every .rs file under a `src` folder (default crates/larchdb/src), takes the module each
file is (src/pager/write/dirty.rs is pager::write::dirty, a mod.rs is its folder's module) and
every `crate::...`, `super::...` and `self::...` path it names in a `use` or in code, and draws an
edge from the file's module to the module each path lands in (the longest module prefix of the
path). Test modules (`#[cfg(test)] mod tests { ... }` at the end of a file) are left out: they
may reach anywhere. Prints the edges between top-level modules, then any cycle among files and
among top-level modules; exits 1 if there is one.

    python3 scripts/import-graph.py [SRC_DIR] [--edges]
"""
import os
import re
import sys


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def code_without_tests(text):
    m = re.search(r"^#\[cfg\(test\)\]\s*\nmod tests", text, re.M)
    return text[: m.start()] if m else text


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def expand_use(body):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    body = body.replace(" ", "").replace("\n", "")
    m = re.match(r"^(.*?)\{(.*)\}$", body)
    if not m:
        return [body]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        for e in expand_use(p):
            out.append(prefix + e)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src = args[0] if args else "crates/larchdb/src"
    show_edges = "--edges" in sys.argv
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    modules = set(files)
    edges = {m: set() for m in modules}
    for mod, path in files.items():
        text = strip_comments(code_without_tests(open(path).read()))
        paths = []
        for u in re.finditer(r"\buse\s+([^;]+);", text):
            paths += expand_use(u.group(1))
        paths += re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", text)
        for p in paths:
            p = re.sub(r"\bas\w+$", "", p.split(" as ")[0])
            segs = p.split("::")
            if segs[0] == "crate":
                base, rest = (), segs[1:]
            elif segs[0] in ("super", "self"):
                base = mod
                rest = segs
                while rest and rest[0] in ("super", "self"):
                    if rest[0] == "super":
                        base = base[:-1]
                    rest = rest[1:]
            else:
                continue
            target = base
            for s in rest:
                if base + (s,) in modules or any(m[: len(base) + 1] == base + (s,) for m in modules):
                    base = base + (s,)
                    target = base if base in modules else target
                else:
                    break
            target = base if base in modules else target
            if target != mod and target in modules and mod[: len(target)] != target:
                edges[mod].add(target)
    # Top-level graph: edges between first path segments (a folder is one module).
    top = {}
    for a, bs in edges.items():
        for b in bs:
            ta, tb = a[:1], b[:1]
            if ta != tb:
                top.setdefault(ta, set()).add(tb)
    if show_edges:
        for a in sorted(top):
            print(f"{'::'.join(a) or 'crate'} -> {', '.join(sorted('::'.join(b) or 'crate' for b in top[a]))}")
    found = False
    for name, graph in (("files", edges), ("top-level modules", top)):
        cycle = find_cycle(graph)
        if cycle:
            found = True
            print(f"cycle among {name}: " + " -> ".join("::".join(c) or "crate" for c in cycle))
        else:
            print(f"no cycle among {name} ({len(graph)} nodes, {sum(len(v) for v in graph.values())} edges)")
    sys.exit(1 if found else 0)


def find_cycle(graph):
    color = {}
    stack = []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) is None:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(graph):
        if color.get(n) is None:
            c = visit(n)
            if c:
                return c
    return None


if __name__ == "__main__":
    main()
