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


def run_arrows(lines, mode='check', objs=None):
    """The problems the arrows check finds with a table of these lines."""
    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as fh:
        fh.write('\n'.join(lines) + '\n')
    problems = []
    with redirect_stdout(io.StringIO()):
        arrows.check('supervisor', objs or OBJS, fh.name, mode, problems)
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
        # call.c uses outbuf.c: with outbuf moved above call in the order,
        # that arrow goes up.
        t = [x if not x.startswith('order:') else
             x.replace(' outbuf', '').replace(' call ', ' call outbuf ') for x in table()]
        problems, _ = run_arrows([x for x in t if x != 'call -> outbuf'])
        self.assertTrue(any(p.startswith('new upward arrow supervisor/call.c -> outbuf.c') for p in problems),
                        problems)
        # Kept in the table without an "up" mark, it is still refused.
        problems, _ = run_arrows(t)
        self.assertTrue(any('goes up the order' in p for p in problems), problems)

    def test_new_cycle_is_refused(self):
        # The real objects and two more that call each other.
        # (The check takes the files that have a source beside them: the
        # copy has empty ones, and runs from there.)
        d = tempfile.mkdtemp()
        here = os.getcwd()
        try:
            sup = os.path.join(d, 'obj', 'supervisor')
            shutil.copytree(os.path.join(OBJS, 'supervisor'), sup)
            os.makedirs(os.path.join(d, 'supervisor'))
            for f in os.listdir(sup):
                open(os.path.join(d, 'supervisor', f[:-2] + '.c'), 'w').close()
            for a, b in (('zza', 'zzb'), ('zzb', 'zza')):
                src = os.path.join(d, 'supervisor', a + '.c')
                with open(src, 'w', encoding='utf-8') as fh:
                    fh.write(f'void {b}(int n);\nvoid {a}(int n) {{ if (n) {b}(n - 1); }}\n')
                subprocess.run(['cc', '-c', '-o', os.path.join(sup, a + '.o'), src], check=True)
            t = [x if not x.startswith('order:') else x + ' zza zzb' for x in table()]
            os.chdir(d)
            problems, _ = run_arrows(t + ['zzb -> zza'], objs='obj')
            self.assertTrue(any(p.startswith('new cycle among supervisor/ files: ') for p in problems), problems)
            # Allowed by a "cycle:" line (with its upward arrow marked), it passes.
            problems, _ = run_arrows(t + ['zzb -> zza', 'zza -> zzb  up', 'cycle: zza zzb'], objs='obj')
            self.assertEqual(problems, [])
        finally:
            os.chdir(here)
            shutil.rmtree(d)

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

    def test_the_struct_written_is_the_declared_one(self):
        src = '''
        struct replay { bool lost; };
        void f(struct session *s, struct run *c, struct replay *rp) {
            struct smsg_exec ex = { 0 };
            struct replay_entry *e = 0;
            s->next = 0;
            s->cur->next = 0;
            c->next = 0;
            rp->lost = 1;
            e->cell = 2;
            ex.restore = 0;
            ++s->qtail->cell;
            q->next = 0;
        }'''
        with tempfile.NamedTemporaryFile('w', suffix='.c', delete=False) as fh:
            fh.write(src)
        inner = {('session', 'cur'): 'run', ('session', 'qtail'): 'run', ('session', 'next'): 'session',
                 ('run', 'next'): 'run'}
        got = writers.typed_writes(fh.name, {'next', 'lost', 'cell', 'restore'}, inner)
        os.unlink(fh.name)
        self.assertEqual(got, {('session', 'next'): [6], ('run', 'next'): [7, 8], ('replay', 'lost'): [9],
                               ('replay_entry', 'cell'): [10], ('smsg_exec', 'restore'): [11],
                               ('run', 'cell'): [12], (None, 'next'): [13]})

    def run_writers(self, lines, *flags, sources=None):
        """writers.py over a table of these lines, in a copy of the tree
        whose supervisor/ holds the real headers and these sources."""
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, 'supervisor'))
        for h in ('private.h', 'supervisor.h'):
            shutil.copy(os.path.join('supervisor', h), os.path.join(d, 'supervisor', h))
        for name, text in (sources or {}).items():
            with open(os.path.join(d, 'supervisor', name), 'w', encoding='utf-8') as fh:
                fh.write('#include "private.h"\n' + text)
        path = os.path.join(d, 't.txt')
        with open(path, 'w', encoding='utf-8') as fh:
            fh.write('\n'.join(lines) + '\n')
        p = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts/writers.py'), path, *flags],
                           capture_output=True, text=True, cwd=d if sources else ROOT)
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

    TWO = {'a.c': 'void f(struct session *s) { s->next = 0; }\n',
           'b.c': 'void g(struct sup *sup, struct session *s) { s->next = sup->sessions; }\n'}

    def test_new_writer_names_the_line(self):
        rc, err, _ = self.run_writers([], sources=self.TWO)
        self.assertEqual(rc, 1)
        self.assertIn('session.next gains a writer (supervisor/a.c:2; supervisor/b.c:2)', err)
        self.assertIn('"session.next: a b"', err)
        self.assertEqual(self.run_writers(['session.next: a b'], sources=self.TWO)[:2], (0, ''))

    def test_same_name_in_another_struct_is_another_field(self):
        src = {'a.c': 'void f(struct session *s) { s->next = 0; }\n',
               'b.c': 'void g(struct run *c) { c->next = 0; }\n'
                      'void h(struct session *s) { s->cur->next = 0; }\n',
               'c.c': 'struct replay { int next; };\nvoid k(struct replay *rp) { rp->next = 0; }\n'}
        self.assertEqual(self.run_writers([], sources=src)[:2], (0, ''))

    def test_stale_writer_fails_and_shrink_drops_it(self):
        t = ['session.next: a b c']
        rc, err, _ = self.run_writers(t, sources=self.TWO)
        self.assertEqual(rc, 1)
        self.assertIn('session.next: c', err)
        rc, err, after = self.run_writers(t, '--shrink', sources=self.TWO)
        self.assertEqual((rc, err), (0, ''))
        self.assertIn('session.next: a b', after)
        self.assertEqual(self.run_writers(after, sources=self.TWO)[:2], (0, ''))


if __name__ == '__main__':
    os.chdir(ROOT)
    if len(sys.argv) > 1:
        OBJS = sys.argv.pop(1)
    unittest.main(verbosity=1)
