#!/usr/bin/env python3
"""Edges `use crate::...`/`super::...` (and inline crate:: paths) between the files of a crate's
src/, the crate root included; prints the cycles (strongly connected components)."""
import os, re, sys
def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0: out.append(cur); cur = ''
        else: cur += ch
    if cur.strip(): out.append(cur)
    return out
def expand(tree):
    """'a::{b, c::{d}}' -> [['a','b'], ['a','c','d']]"""
    tree = tree.strip()
    if not tree: return []
    if '{' in tree:
        i = tree.index('{')
        head = [x for x in tree[:i].split('::') if x.strip()]
        inner = tree[i+1:tree.rindex('}')]
        res = []
        for part in split_top(inner):
            for tail in expand(part):
                res.append(head + tail)
        return res
    return [[x.strip().split(' as ')[0].strip() for x in tree.split('::') if x.strip()]]
def analyse(root):
    files = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith('.rs'):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, root)[:-3].split(os.sep)
                is_mod = rel[-1] in ('mod', 'lib', 'main')
                if is_mod: rel = rel[:-1]
                files[tuple(rel)] = (p, is_mod)
    edges = {m: set() for m in files}
    for m, (p, is_mod) in files.items():
        text = open(p).read()
        cut = re.search(r'#\[cfg\(test\)\]\s*(pub\s+)?mod tests', text)
        if cut: text = text[:cut.start()]
        text = re.sub(r'//[^\n]*', '', text)
        paths = []
        for u in re.finditer(r'\buse\s+((?:crate|super|self)::[^;]+);', text, re.S):
            paths += expand(u.group(1))
        here0 = m
        # edition-2018 relative paths: `use child::X` / `pub use child::X` naming a child module
        for u in re.finditer(r'\buse\s+(\w+)(::[^;]+);', text, re.S):
            if u.group(1) in ('crate', 'super', 'self'): continue
            if here0 + (u.group(1),) in files:
                paths += [['self'] + x for x in expand(u.group(1) + u.group(2))]
        # `crate::name!` is a #[macro_export] macro: the root is where Rust puts it, not an import
        for u in re.finditer(r'\b((?:crate|super)(?:::\w+)+)(?!\w|!)', text):
            paths.append(u.group(1).split('::'))
        here = m
        for segs in paths:
            if segs[0] == 'crate': base, segs = (), segs[1:]
            elif segs[0] == 'super':
                base = here
                while segs and segs[0] == 'super':
                    base = base[:-1]; segs = segs[1:]
            else: base, segs = here, segs[1:]
            cand = base; target = base if base in files else None
            for s in segs:
                cand = cand + (s,)
                if cand in files: target = cand
                else: break
            if target is None or target == m: continue
            # a file naming its own ancestors' items is an edge too (a child using its parent's item)
            edges[m].add(target)
    idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def sc(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in edges[v]:
            if w not in idx: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in edges:
        if v not in idx: sc(v)
    return files, edges, out
name = lambda x: '::'.join(x) or '<root>'
for root in sys.argv[1:]:
    files, edges, cycles = analyse(root)
    print(f"{root}: {len(files)} files, {sum(len(e) for e in edges.values())} use-edges, {len(cycles)} cycles")
    for comp in cycles:
        print('  cycle:', ', '.join(sorted(name(x) for x in comp)))
        if '-v' in os.environ.get('CYC', ''):
            for a in comp:
                for b in sorted(edges[a]):
                    if b in comp: print('    ', name(a), '->', name(b))
