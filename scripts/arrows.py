"""The file-to-file check inside one folder (make layers; layers.py --files).

Each .c file of the folder (with its own header) is a node; an arrow a -> b
says a's object file uses a symbol b's defines (nm), so a call made without
the header counts too.  The arrows are held to a written table, a ratchet:

    order: f1 f2 ...          the files, lowest first
    cycle: f3 f4 ...          files allowed to be in one cycle together
    a -> b                    an allowed downward arrow
    a -> b  up                an upward arrow kept from before

A new arrow, a new upward arrow, files newly in a cycle together or a
file missing from the order fail; so does a line the code no longer
needs (the table only shrinks: `make layers-shrink` drops those lines)."""
import functools
import os
import re
import subprocess

ARROW = re.compile(r'^(\S+)\s*->\s*(\S+)(\s+up)?\s*$')


def nm(path):
    out = subprocess.run(['nm', '-P', path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            yield parts[0], parts[1]


def code_refs(path):
    """{symbol: references from code} of an object file (readelf -r over its .rela.text*)."""
    out = subprocess.run(['readelf', '-rW', path], capture_output=True, text=True, check=True).stdout
    refs, in_text = {}, False
    for line in out.splitlines():
        if line.startswith('Relocation section'):
            in_text = line.split("'")[1].startswith('.rela.text')
            continue
        parts = line.split()
        if in_text and len(parts) >= 5 and parts[2].startswith('R_'):
            refs[parts[4]] = refs.get(parts[4], 0) + 1
    return refs


@functools.lru_cache(maxsize=None)
def graph(folder, objs):
    """(nodes, {(a, b): call sites}, {(a, b): symbols}) of the folder's files."""
    d = os.path.join(objs, folder)
    nodes, defined, used = [], {}, {}
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not f.endswith('.o') or not os.path.exists(os.path.join(folder, f[:-2] + '.c')):
            continue
        me = f[:-2]
        nodes.append(me)
        used[me] = set()
        for sym, kind in nm(os.path.join(d, f)):
            if kind == 'U':
                used[me].add(sym)
            elif kind.isupper():
                defined[sym] = me
    sites, syms = {}, {}
    for me in nodes:
        refs = code_refs(os.path.join(d, me + '.o'))
        for sym in sorted(used[me]):
            other = defined.get(sym)
            if other and other != me:
                sites[(me, other)] = sites.get((me, other), 0) + refs.get(sym, 0)
                syms.setdefault((me, other), []).append(sym)
    return nodes, sites, syms


def sccs(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    adj = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
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
                out.append(sorted(comp))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return sorted(out)


def first_order(nodes, sites):
    """An order, lowest first, with few upward call sites (Eades, Lin and
    Smyth's greedy heuristic, weighted by call sites): only to write the
    first table; after that the table's own order is the rule."""
    left, right, rest = [], [], set(nodes)

    def w_in(n):
        return sum(c for (a, b), c in sites.items() if b == n and a in rest and a != n)

    def w_out(n):
        return sum(c for (a, b), c in sites.items() if a == n and b in rest and b != n)

    while rest:
        sinks = sorted(n for n in rest if not any(a == n and b in rest for a, b in sites))
        if sinks:
            for n in sinks:
                right.insert(0, n)
                rest.discard(n)
            continue
        sources = sorted(n for n in rest if not any(b == n and a in rest for a, b in sites))
        if sources:
            for n in sources:
                left.append(n)
                rest.discard(n)
            continue
        n = max(sorted(rest), key=lambda x: w_out(x) - w_in(x))
        left.append(n)
        rest.discard(n)
    return list(reversed(left + right))


def read_table(path):
    order, cycles, arrows, bad = [], [], {}, []
    with open(path, encoding='utf-8') as fh:
        for i, line in enumerate(fh, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            if line.startswith('order:'):
                order = line[6:].split()
            elif line.startswith('cycle:'):
                cycles.append(set(line[6:].split()))
            elif ARROW.match(line):
                m = ARROW.match(line)
                arrows[(m.group(1), m.group(2))] = bool(m.group(3))
            else:
                bad.append(f'{path}:{i}: not "order:", "cycle:" or "a -> b [up]": {line}')
    return order, cycles, arrows, bad


HEAD = """# The arrows between the files of {folder}/, checked by `make layers`
# (scripts/arrows.py; docs/ARCHITECTURE.md, "The supervisor's rooms").
# A ratchet: a new arrow fails until it is added here by hand, and only
# downward (the callee earlier in "order") and closing no new cycle; "up"
# marks an upward arrow kept from before, and a "cycle:" line files that
# call each other in a circle today.  Both may only go: `make layers-shrink`
# drops the lines the code no longer needs.
"""


def write_table(path, folder, order, cycles, arrows, sites):
    rank = {n: i for i, n in enumerate(order)}
    with open(path, 'w', encoding='utf-8') as fh:
        fh.write(HEAD.format(folder=folder))
        fh.write('order: ' + ' '.join(order) + '\n')
        for c in cycles:
            fh.write('cycle: ' + ' '.join(sorted(c, key=lambda n: rank.get(n, 0))) + '\n')
        for (a, b) in sorted(arrows, key=lambda e: (rank.get(e[0], 0), rank.get(e[1], 0))):
            up = '  up' if arrows[(a, b)] else ''
            fh.write(f'{a} -> {b}{up}\n')


def check(folder, objs, table, mode, problems):
    nodes, sites, syms = graph(folder, objs)
    comps = sccs(nodes, sites)
    if mode == 'init':
        if os.path.exists(table):
            problems.append(f'{table} exists: edit it, or `make layers-shrink`')
            return
        order = first_order(nodes, sites)
        rank = {n: i for i, n in enumerate(order)}
        write_table(table, folder, order, comps,
                    {e: rank[e[1]] > rank[e[0]] for e in sites}, sites)
        print(f'layers: wrote {table}')
    if not os.path.exists(table):
        problems.append(f'{table} is missing: restore it from git (the first one was written '
                        f'with scripts/layers.py --objs DIR --files {folder} {table} --init LAYER...)')
        return
    order, cycles, arrows, bad = read_table(table)
    problems.extend(bad)
    rank = {n: i for i, n in enumerate(order)}
    fix = f'(the table of allowed arrows: {table}; docs/ARCHITECTURE.md)'
    for n in nodes:
        if n not in rank:
            problems.append(f'{folder}/{n}.c is not in the "order:" line of {table}: '
                            'add it where it belongs (lowest first), then its arrows')
    stale = [e for e in arrows if e not in sites]
    grown = [c for c in comps if not any(set(c) <= g for g in cycles)]
    for (a, b) in sorted(sites):
        if (a, b) in arrows or a not in rank or b not in rank:
            continue
        what = ', '.join(syms[(a, b)][:4]) + (' ...' if len(syms[(a, b)]) > 4 else '')
        if rank[b] > rank[a]:
            problems.append(f'new upward arrow {folder}/{a}.c -> {b}.c ({what}): a file may call only '
                            f'files before it in "order:" {fix}; call through what {b}.c is given, '
                            'or move the code down')
        else:
            problems.append(f'new arrow {folder}/{a}.c -> {b}.c ({what}): if it is meant, add the line '
                            f'"{a} -> {b}" to {table} and say why in the commit')
    for (a, b), up in sorted(arrows.items()):
        if a in rank and b in rank and rank[b] > rank[a] and not up:
            problems.append(f'{table}: "{a} -> {b}" goes up the order: upward arrows are only '
                            'the ones kept from before ("up"), never new ones')
    for c in grown:
        problems.append(f'new cycle among {folder}/ files: {" ".join(c)} now call each other '
                        f'in a circle, which no "cycle:" line of {table} allows: break it')
    if stale and mode != 'shrink':
        problems.append(f'{table} allows arrows the code no longer has: '
                        + ', '.join(f'{a} -> {b}' for a, b in stale)
                        + ': the table only shrinks; run `make layers-shrink` and commit it')
    stale_cycles = [g for g in cycles if not any(set(c) <= g and len(set(c)) == len(g) for c in comps)]
    if stale_cycles and mode != 'shrink':
        problems.append(f'{table}: a "cycle:" line is wider than the cycles the code has; '
                        'run `make layers-shrink` and commit it')
    if mode == 'shrink':
        keep = {e: up for e, up in arrows.items() if e in sites}
        newc = [set(c) for c in comps if any(set(c) <= g for g in cycles)]
        write_table(table, folder, order, newc, keep, sites)
        print(f'layers: {table}: {len(arrows) - len(keep)} arrow(s) and '
              f'{len(cycles) - len(newc)} cycle line(s) dropped')
    pairs = sum(1 for (a, b) in sites if a < b and (b, a) in sites)
    ups = [e for e in sites if e[0] in rank and e[1] in rank and rank[e[1]] > rank[e[0]]]
    print(f'layers: {folder}/ by file: {len(nodes)} files, {len(sites)} arrows, '
          f'{sum(sites.values())} cross-file call sites, {pairs} pairs that call each other, '
          f'{len(ups)} upward arrows ({sum(sites[e] for e in ups)} sites)')
    for c in comps:
        inner = [e for e in sites if e[0] in c and e[1] in c]
        print(f'layers: {folder}/ cycle of {len(c)} files ({len(inner)} arrows, '
              f'{sum(sites[e] for e in inner)} sites): {" ".join(c)}')
    for (a, b) in sorted(ups, key=lambda e: -sites[e]):
        print(f'layers: {folder}/ upward: {a} -> {b} ({sites[(a, b)]} sites: '
              f'{", ".join(syms[(a, b)])})')
