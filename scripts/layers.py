#!/usr/bin/env python3
"""Checks that the code's layers call only downward (make layers).

usage: scripts/layers.py [--objs DIR [--files FOLDER TABLE [--shrink]]] LAYER...
       (lowest layer first)

A file may include a header of its own folder or of a lower layer's folder,
never of a higher one; and no files may depend on each other in a circle.
A file and its header are one module (jail/jail.c and jail/jail.h).
A folder's private.h makes the files that include it one module (the
supervisor's rooms call each other freely): no file of another folder may
include it, or use a function it declares.
Two graphs of modules are checked:
  - includes: what each .c and .h includes;
  - references (with --objs): which module defines each symbol an object
    file uses (nm), so a call made without the header counts too.
With --files, the .c files of FOLDER are also checked one by one against
the table of allowed arrows TABLE (scripts/arrows.py); --shrink rewrites
that table without the lines the code no longer needs.
Exit 1 with each upward edge and each cycle named; 0 when there is none."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrows  # noqa: E402

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    return os.path.splitext(os.path.normpath(path))[0]


PRIVATE = 'private.h'
DECL = re.compile(r'^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(', re.M)


def private_groups(layers):
    """{path of a .c or .h: its folder's private module} for the files that
    include their folder's private.h, and {symbol: folder} for what each
    private.h declares."""
    group, declared = {}, {}
    for layer in layers:
        priv = os.path.join(layer, PRIVATE)
        if not os.path.exists(priv):
            continue
        with open(priv, encoding='utf-8', errors='replace') as fh:
            for name in DECL.findall(fh.read()):
                declared[name] = layer
        group[priv] = module(priv)
        for f in os.listdir(layer):
            path = os.path.join(layer, f)
            if f.endswith(('.c', '.h')) and f != PRIVATE:
                with open(path, encoding='utf-8', errors='replace') as fh:
                    if PRIVATE in INCLUDE.findall(fh.read()):
                        group[path] = module(priv)
    return group, declared


def cycles(graph):
    """Every elementary cycle found by a depth-first search (one per back edge)."""
    found, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return found


def check(graph, rank, what, problems):
    for a in sorted(graph):
        for b in sorted(graph[a]):
            fa, fb = a.split('/')[0], b.split('/')[0]
            if rank[fb] > rank[fa]:
                problems.append(f'{what}: {a} ({fa}) uses {b} ({fb}), a higher layer')
    for c in cycles(graph):
        problems.append(f'{what} cycle: ' + ' -> '.join(c))


def main(argv):
    objs, files, mode = None, None, 'check'
    if len(argv) > 2 and argv[1] == '--objs':
        objs = argv[2]
        argv = argv[2:]
    if objs and len(argv) > 3 and argv[1] == '--files':
        files = (argv[2], argv[3])
        argv = argv[3:]
    if files and len(argv) > 1 and argv[1] in ('--shrink', '--init'):
        mode = argv[1][2:]
        argv = argv[1:]
    layers = argv[1:]
    if not layers:
        print(__doc__, file=sys.stderr)
        return 2
    rank = {name: i for i, name in enumerate(layers)}
    problems = []

    group, declared = private_groups(layers)
    includes = {}
    for layer in layers:
        for f in sorted(os.listdir(layer)):
            if not f.endswith(('.c', '.h')):
                continue
            path = os.path.join(layer, f)
            me = group.get(path, module(path))
            includes.setdefault(me, set())
            with open(path, encoding='utf-8', errors='replace') as fh:
                for inc in INCLUDE.findall(fh.read()):
                    target = os.path.normpath(os.path.join(layer, inc))
                    if target.split('/')[0] not in rank:
                        problems.append(f'{path} includes {inc}, outside the layers')
                        continue
                    if os.path.basename(target) == PRIVATE and target.split('/')[0] != layer:
                        problems.append(f'{path} includes {inc}, private to {target.split("/")[0]}/')
                        continue
                    tm = group.get(target, module(target))
                    if tm != me:
                        includes[me].add(tm)
    check(includes, rank, 'include', problems)

    if objs:
        defined, used = {}, {}
        for layer in layers:
            d = os.path.join(objs, layer)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if not f.endswith('.o'):
                    continue
                # An object whose source is gone (moved to another folder)
                # is a stale build output, not part of the program.
                if not any(os.path.exists(os.path.join(layer, f[:-2] + ext)) for ext in ('.c', '.S')):
                    continue
                src = next((os.path.join(layer, f[:-2] + ext) for ext in ('.c', '.S')
                            if os.path.exists(os.path.join(layer, f[:-2] + ext))), '')
                me = group.get(src, module(os.path.join(layer, f)))
                out = subprocess.run(['nm', '-P', os.path.join(d, f)], capture_output=True, text=True, check=True).stdout
                used.setdefault(me, set())
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) < 2:
                        continue
                    sym, kind = parts[0], parts[1]
                    if kind == 'U':
                        used[me].add(sym)
                        if declared.get(sym, layer) != layer:
                            problems.append(f'reference: {layer}/{f} uses {sym}, private to {declared[sym]}/')
                    elif kind.isupper():
                        defined[sym] = me
        refs = {}
        for m, syms in used.items():
            refs.setdefault(m, set()).update(defined[s] for s in syms if s in defined and defined[s] != m)
        check(refs, rank, 'reference', problems)

    if files:
        arrows.check(files[0], objs, files[1], mode, problems)

    for p in problems:
        print('layers: ' + p, file=sys.stderr)
    if problems:
        print(f'layers: {len(problems)} problem(s); the order, lowest first: {" ".join(layers)} '
              '(docs/ARCHITECTURE.md)', file=sys.stderr)
        return 1
    print(f'layers: {len(includes)} modules in {len(layers)} layers, every include'
          f'{" and reference" if objs else ""} downward, no cycle')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
