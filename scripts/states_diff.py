#!/usr/bin/env python3
"""Compares the supervisor's state-change logs of two sets of runs of its
unit tests (PSM_TRACE_STATES=1 build/test/test_supervisor > log).

Usage: scripts/states_diff.py BEFORE_LOG... -- AFTER_LOG...

Each log is cut by cmocka's "[ RUN      ] test" lines; within a test, each
session's states ("phase/life/due") form a path, and the edges of those
paths (state -> next state) are compared, all tests together: the edges
seen after and never before (a new way through the machine: each must be
explained), and those seen before and never after.  Timing makes a path
differ from run to run (two messages read in one event or in two), so
each side is the union of its runs: five runs of each test binary gave
the same 50 and 26 edges but for 4 of the first.  Exit 1 when they
differ."""
import re
import sys


def edges(paths):
    out = {}
    for path in paths:
        test = None
        last = {}
        with open(path, encoding='utf-8', errors='replace') as f:
            for line in f:
                m = re.match(r'\[ RUN +\] (\S+)', line)
                if m:
                    test, last = m.group(1), {}
                    continue
                m = re.match(r'  states: (.*)', line)
                if not m or test is None:
                    continue
                for part in m.group(1).split('; '):
                    if not part:
                        continue
                    name, state = part.rsplit(' ', 1)
                    prev = last.get(name, 'start')
                    if prev != state:
                        out.setdefault(test, set()).add((prev, state))
                    last[name] = state
    return out


def main(argv):
    if '--' not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    i = argv.index('--')
    before, after = edges(argv[:i]), edges(argv[i + 1:])
    b = set().union(*before.values()) if before else set()
    a = set().union(*after.values()) if after else set()
    for tag, only, side in (('after only', a - b, after), ('before only', b - a, before)):
        for e in sorted(only):
            tests = sorted(t for t, v in side.items() if e in v)
            print(f'{tag}: {e[0]} -> {e[1]}   ({", ".join(tests)})')
    print(f'states_diff: {len(b)} edges before, {len(a)} after, {len(a - b)} new, {len(b - a)} gone')
    return 1 if a != b else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
