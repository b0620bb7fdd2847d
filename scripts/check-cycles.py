#!/usr/bin/env python3
"""Import cycles between the modules of src/, read from the source.

    scripts/check-cycles.py [--scope SCOPE]... [--list] [--src DIR]

A SCOPE is `top` (the top-level modules of src/: config, worker, tls, ...) or a
folder (`supervisor`, `http`, `worker`, `worker::conn`): the modules directly inside
it, each with everything below it. An edge A -> B means a file in A names a path in
B (a `use` line, or a path such as `crate::config::Config` or
`super::super::Ctx` in code). What a `#[cfg(test)]` module at the end of a file
names is left out: tests may look anywhere. Exit 0 when no scope has a cycle; 1
printing each cycle (its modules, and for each edge one file and the path it
names) so the person who broke it sees where; 2 on bad usage.

Why a script and not a crate: the rule is ours (issue 25: layers that do not
import each other), the parse is small (paths, not types), and it runs in
`.ci/run` without a build. Without --scope it checks every scope .ci/run checks
(SCOPES below); --list prints every cycle of every folder, checked or not;
--src reads another tree (tests/structure.rs gives it one with a cycle).
"""

import os
import re
import sys
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")

# What .ci/run holds to: no cycle inside these. `config/`'s own modules
# still read its `raw` table and the table reads them (one declaration per
# setting needs both directions); the rest is held.
SCOPES = [
    "top",
    "http",
    "supervisor",
    "supervisor::machine",
    "worker",
    "worker::conn",
    "worker::conn::h1",
    "worker::conn::h2",
    "worker::conn::h3",
    "worker::conn::transport",
    "worker::quic",
    "quic",
]


def module_of(path):
    """`src/a/b.rs` -> ("a", "b"); `src/a/mod.rs` -> ("a",); lib.rs -> ()."""
    rel = os.path.relpath(path, SRC)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def strip(text):
    """The code of a file without comments, string literals and a trailing
    `#[cfg(test)] mod tests { ... }`."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "''", text)
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def use_paths(code):
    """Every path a `use` declaration names, its braces expanded."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        out.extend(expand(m.group(1).replace("\n", " ")))
    return out


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\s+as\s+\w+$", "", tree).strip()]
    prefix = tree[:brace].rstrip(":").strip()
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for part in parts:
        if not part.strip():
            continue
        for sub in expand(part):
            out.append(f"{prefix}::{sub}" if prefix else sub)
    # `a::{self, b}` names `a` itself.
    return [p.replace("::self", "") for p in out]


def inline_paths(code):
    """Paths in code that start at the crate or a parent: `crate::x::Y`,
    `super::super::Z`."""
    return re.findall(r"\b((?:crate|super)(?:::\w+)+)", code)


def resolve(path, here, modules):
    """The module tuple `path` (written in the file of module `here`) lands in:
    the longest prefix that is a module; None outside the crate."""
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] == "super":
        # In a.rs (module a), `super` is a's parent; in a/mod.rs, too.
        base = here
        while segs and segs[0] == "super":
            base = base[:-1]
            segs = segs[1:]
    elif segs[0] == "self":
        base, segs = here, segs[1:]
    else:
        # A path from the module's own scope: a child module, or an outside crate.
        if here + (segs[0],) in modules:
            base = here
        else:
            return None
    target = base
    for s in segs:
        if target + (s,) in modules:
            target = target + (s,)
        else:
            break
    return target


def graph():
    modules, files = set(), {}
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                path = os.path.join(root, n)
                mod = module_of(path)
                modules.add(mod)
                files[path] = mod
    # Every ancestor of a module file is a module (a folder with mod.rs).
    for m in list(modules):
        for i in range(len(m)):
            modules.add(m[:i])
    edges = defaultdict(dict)  # (from, to) -> (file, path)
    for path, mod in sorted(files.items()):
        code = strip(open(path, encoding="utf-8").read())
        for p in use_paths(code) + inline_paths(code):
            target = resolve(p, mod, modules)
            if target is None or target == mod:
                continue
            edges[mod].setdefault(target, (os.path.relpath(path, REPO), p))
    return modules, edges


def scoped(edges, scope):
    """Edges between the children of `scope` (a module tuple), each node
    the child that holds the module."""
    out = defaultdict(dict)
    depth = len(scope)
    for src, targets in edges.items():
        if src[:depth] != scope or len(src) <= depth:
            continue
        a = src[: depth + 1]
        for dst, why in targets.items():
            if dst[:depth] != scope or len(dst) <= depth:
                continue
            b = dst[: depth + 1]
            if a != b:
                out[a].setdefault(b, why)
    return out


def cycles(g):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(set(g) | {w for t in g.values() for w in t}):
        if v not in index:
            visit(v)
    return sccs


def name(m):
    return "::".join(m) or "crate"


def report(g, scope_name, comps):
    for comp in comps:
        print(f"cycle in {scope_name}: {', '.join(name(m) for m in comp)}")
        members = set(comp)
        for a in comp:
            for b, (file, path) in sorted(g.get(a, {}).items()):
                if b in members:
                    print(f"  {name(a)} -> {name(b)}: {file} names {path}")


def main(argv):
    scopes, list_all = [], False
    i = 0
    while i < len(argv):
        if argv[i] == "--scope" and i + 1 < len(argv):
            scopes.append(argv[i + 1])
            i += 2
        elif argv[i] == "--src" and i + 1 < len(argv):
            global SRC, REPO
            SRC = os.path.abspath(argv[i + 1])
            REPO = os.path.dirname(SRC)
            i += 2
        elif argv[i] == "--list":
            list_all = True
            i += 1
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"check-cycles: unknown argument {argv[i]!r}; see --help", file=sys.stderr)
            return 2
    modules, edges = graph()
    if list_all:
        folders = sorted(m for m in modules if any(len(c) == len(m) + 1 and c[: len(m)] == m for c in modules))
        for folder in folders:
            g = scoped(edges, folder)
            report(g, name(folder) if folder else "top", cycles(g))
        return 0
    found = False
    for scope in scopes or SCOPES:
        tup = () if scope == "top" else tuple(scope.split("::"))
        if tup and tup not in modules:
            print(f"check-cycles: no module {scope} under src/", file=sys.stderr)
            return 2
        g = scoped(edges, tup)
        comps = cycles(g)
        report(g, scope, comps)
        found |= bool(comps)
    if not found:
        print(f"check-cycles: no import cycle in {', '.join(scopes or SCOPES)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
