#!/usr/bin/env python3
"""The ratchets of make layers, tried on copies of their tables: the
file-to-file arrows of supervisor/ (scripts/arrows.py, over the real
object files) and the writers of the core structs' fields
(scripts/writers.py, over the real sources and a made-up one).

usage: test/layers/test_ratchet.py OBJDIR   (e.g. build/obj; run by make unit)"""
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import arrows  # noqa: E402
import writers  # noqa: E402

OBJS = 'build/obj'
ARROWS = 'scripts/supervisor-arrows.txt'
WRITERS = 'scripts/supervisor-writers.txt'


def run_arrows(lines, mode='check'):
    """The problems the arrows check finds with a table of these lines."""
    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as fh:
        fh.write('\n'.join(lines) + '\n')
    problems = []
    with redirect_stdout(io.StringIO()):
        arrows.check('supervisor', OBJS, fh.name, mode, problems)
    with open(fh.name, encoding='utf-8') as f:
        after = f.read().splitlines()
    os.unlink(fh.name)
    return problems, after


def table():
    with open(ARROWS, encoding='utf-8') as fh:
        return fh.read().splitlines()


class Arrows(unittest.TestCase):
    def test_checked_in_table_passes(self):
        self.assertEqual(run_arrows(table())[0], [])

    def test_new_arrow_names_the_line_to_add(self):
        t = table()
        line = next(x for x in t if x.startswith('call -> outbuf'))
        problems, _ = run_arrows([x for x in t if x != line])
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('new arrow supervisor/call.c -> outbuf.c (outbuf_finish)', problems[0])
        self.assertIn('add the line "call -> outbuf"', problems[0])

    def test_new_upward_arrow_is_refused(self):
        t = table()
        line = next(x for x in t if x.endswith(' up'))
        a, b = line.split()[0], line.split()[2]
        problems, _ = run_arrows([x for x in t if x != line])
        self.assertTrue(any(p.startswith(f'new upward arrow supervisor/{a}.c -> {b}.c') for p in problems),
                        problems)
        # Written back without its mark, it is still refused.
        problems, _ = run_arrows([x if x != line else f'{a} -> {b}' for x in t])
        self.assertTrue(any('goes up the order' in p for p in problems), problems)

    def test_new_cycle_is_refused(self):
        t = [x for x in table() if not x.startswith('cycle:')]
        problems, _ = run_arrows(t)
        self.assertTrue(any(p.startswith('new cycle among supervisor/ files: ') for p in problems), problems)

    def test_stale_arrow_fails_and_shrink_drops_it(self):
        t = table() + ['call -> kproc']
        problems, _ = run_arrows(t)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('allows arrows the code no longer has: call -> kproc', problems[0])
        self.assertIn('make layers-shrink', problems[0])
        problems, after = run_arrows(t, 'shrink')
        self.assertEqual(problems, [])
        self.assertNotIn('call -> kproc', after)
        self.assertEqual(run_arrows(after)[0], [])

    def test_file_missing_from_the_order(self):
        t = [x if not x.startswith('order:') else x.replace(' zstart', '') for x in table()]
        problems, _ = run_arrows(t)
        self.assertTrue(any('supervisor/zstart.c is not in the "order:" line' in p for p in problems), problems)


class Writers(unittest.TestCase):
    def test_parser(self):
        src = '''
        void f(struct session *s, struct run *r, struct sup *sup) {
            s->pid = 1;            /* s->alive = true; in a comment */
            s->cells += 2;
            ++s->cur->resends;
            r->status--;
            s->broke[0] = 0;
            sup->epoch |= 1;
            if (s->dirty == true || s->killed != false || s->id <= 3) return;
            struct zmsg_settle st = { .hpid = 3 };
            log("s->ctrl = 4");
            x.next = NULL;
        }'''
        with tempfile.NamedTemporaryFile('w', suffix='.c', delete=False) as fh:
            fh.write(src)
        names = {'pid', 'cells', 'resends', 'status', 'broke', 'epoch', 'dirty', 'killed', 'id',
                 'hpid', 'ctrl', 'alive', 'next'}
        got = writers.writes(fh.name, names)
        os.unlink(fh.name)
        self.assertEqual(sorted(got), ['broke', 'cells', 'epoch', 'next', 'pid', 'resends', 'status'])
        self.assertEqual(got['pid'], [3])

    def run_writers(self, lines, *flags):
        d = tempfile.mkdtemp()
        path = os.path.join(d, 't.txt')
        with open(path, 'w', encoding='utf-8') as fh:
            fh.write('\n'.join(lines) + '\n')
        p = subprocess.run([sys.executable, 'scripts/writers.py', path, *flags],
                           capture_output=True, text=True)
        with open(path, encoding='utf-8') as fh:
            after = fh.read().splitlines()
        shutil.rmtree(d)
        return p.returncode, p.stderr, after

    def table(self):
        with open(WRITERS, encoding='utf-8') as fh:
            return fh.read().splitlines()

    def test_checked_in_table_passes(self):
        rc, err, _ = self.run_writers(self.table())
        self.assertEqual((rc, err), (0, ''))

    def test_new_writer_names_the_line(self):
        t = [x for x in self.table() if not x.startswith('session.next:')] + ['session.next: call']
        rc, err, _ = self.run_writers(t)
        self.assertEqual(rc, 1)
        self.assertIn('session.next gains a writer (supervisor/supervisor.c:', err)
        self.assertIn('"session.next: call supervisor"', err)

    def test_stale_writer_fails_and_shrink_drops_it(self):
        t = [x if not x.startswith('session.next:') else 'session.next: call process supervisor'
             for x in self.table()]
        rc, err, _ = self.run_writers(t)
        self.assertEqual(rc, 1)
        self.assertIn('session.next: process', err)
        rc, err, after = self.run_writers(t, '--shrink')
        self.assertEqual((rc, err), (0, ''))
        self.assertIn('session.next: call supervisor', after)
        self.assertEqual(self.run_writers(after)[:2], (0, ''))


if __name__ == '__main__':
    os.chdir(ROOT)
    if len(sys.argv) > 1:
        OBJS = sys.argv.pop(1)
    unittest.main(verbosity=1)
