#!/usr/bin/env python3
"""Import circles between the files of one crate.

Usage: scripts/import-circles.py crates/modules/src

A file "imports" another when it names `crate::<path>` or `super::<path>` (in a `use` or
inline, comments and `#[cfg(test)]` code left out; names re-exported by
lib.rs count as their defining file). Prints each pair of files that import
each other and each larger group of files in a cycle; exits 1 if any.
Parent/child `mod` declarations are not imports.
"""
import os, re, sys
root = sys.argv[1]  # e.g. crates/modules/src
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3]
            parts = rel.split('/')
            if parts[-1] in ('mod', 'lib'):
                parts = parts[:-1]
            files[tuple(parts)] = p
def resolve(path):
    # longest prefix of path that is a file module
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in files:
            return tuple(path[:n])
    return ()
def uses(p, me):
    text = open(p).read()
    # strip test modules
    text = re.split(r'#\[cfg\(test\)\]', text)[0]
    text = '\n'.join(l for l in text.split('\n') if not l.lstrip().startswith('//'))
    out = set()
    for m in re.finditer(r'crate::((?:\w+::)*\w+)', text):
        out.add(resolve(m.group(1).split('::')))
    # grouped imports: crate::{a, b::c}
    for m in re.finditer(r'crate::\{([^}]*)\}', text):
        for item in m.group(1).split(','):
            item = item.strip()
            if item:
                out.add(resolve(item.split('::')))
    for m in re.finditer(r'crate::((?:\w+::)+)\{([^}]*)\}', text):
        base = m.group(1).strip(':').split('::')
        for item in m.group(2).split(','):
            item = item.strip().split(' as ')[0]
            if item and item != 'self':
                out.add(resolve(base + item.split('::')))
    # `super::x` and `super::{x, y::z}`: relative to this file's parent module
    parent = list(me[:-1])
    for m in re.finditer(r'super::((?:\w+::)*\w+)', text):
        out.add(resolve(parent + m.group(1).split('::')))
    for m in re.finditer(r'super::((?:\w+::)*)\{([^}]*)\}', text):
        base = parent + [x for x in m.group(1).split('::') if x]
        for item in m.group(2).split(','):
            item = item.strip().split(' as ')[0]
            if item and item != 'self':
                out.add(resolve(base + item.split('::')))
    return out
graph = {k: {u for u in uses(p, k) if u != k} for k, p in files.items()}
# lib.rs re-exports (crate::Host) resolve to the root (); map root re-exports
lib = files.get(())
reexp = {}
if lib:
    for m in re.finditer(r'pub use (\w+(?:::\w+)*)::(\{[^}]*\}|\w+);', open(lib).read()):
        base = m.group(1).split('::'); items = m.group(2).strip('{}').split(',')
        for it in items:
            reexp[it.strip()] = resolve(base)
    for k, p in files.items():
        text = re.split(r'#\[cfg\(test\)\]', open(p).read())[0]
        text = '\n'.join(l for l in text.split('\n') if not l.lstrip().startswith('//'))
        for name, target in reexp.items():
            if re.search(r'crate::(\{[^}]*\b%s\b|%s\b)' % (name, name), text) and target != k:
                graph[k].add(target)
        graph[k].discard(())
name = lambda k: '/'.join(k) or 'lib'
pairs = sorted({tuple(sorted((name(a), name(b)))) for a in graph for b in graph[a] if a in graph.get(b, ())})
for a, b in pairs:
    print(f'circle: {a} <-> {b}')
# longer cycles via SCC
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in graph: continue
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(name(x) for x in comp))
for v in graph:
    if v not in idx: sc(v)
for s in sccs: print('cycle group:', ' '.join(s))
sys.exit(1 if pairs or sccs else 0)
