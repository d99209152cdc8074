// Saves at rest as a journal of cells.  When nothing but cells the replay
// log only logged ran since the session's last whole snapshot, a save at
// rest writes those cells (their code and the digests of their outputs)
// beside the snapshot instead of pickling the whole state again; a restore
// loads the snapshot and runs them again, comparing each output with the
// first run's.  Checked from outside: the files under .sessions (the
// snapshot not rewritten, the journal there), the server's log, and what a
// new server brings back after a SIGKILL: the state, the execution count
// and the note.  Attacks: a journal changed by sandboxed code, and a journal
// of an older snapshot put back beside a newer one.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, show, writeFile } from './lib.mjs';
import { stateHome, start, snapPath, waitLog } from './persist_lib.mjs';

const journalPath = (root) => path.join(root, 'workspace', '.sessions', 'default', 'journal');
const whole = /session default: state saved \(\d+ bytes/g;
const journaled = /session default: state saved \(a journal of cells (\d+) to (\d+) after the snapshot of cell (\d+)/g;
const count = (h, re) => (h.stderr().match(re) || []).length;

async function killed(h) {
	process.kill(h.pid, 'SIGKILL');
	await h.close().catch(() => {});
}

/** x = 1 saved whole at rest, then `cells` logged and saved as a journal. */
async function journalAfter(root, xdg, first, cells) {
	const h = await start(root, xdg);
	let r = await execPy(h, first);
	assert.equal(r.sc.status, 'ok', show(r.text));
	await waitLog(h.stderr, whole, { what: 'the first state saved whole' });
	const ino = fs.statSync(snapPath(root)).ino;
	for (const code of cells) {
		r = await execPy(h, code);
		assert.equal(r.sc.status, 'ok', show(r.text));
	}
	await waitLog(h.stderr, journaled, { what: 'a journal saved at rest' });
	assert.equal(count(h, whole), 1, `no second whole save: ${h.stderr().slice(-1500)}`);
	assert.equal(fs.statSync(snapPath(root)).ino, ino, 'the snapshot was not rewritten');
	const st = fs.statSync(journalPath(root));
	assert.equal(st.mode & 0o777, 0o600, 'the journal is private');
	return h;
}

describe('saves at rest as a journal of logged cells', () => {
	test('a journal, a SIGKILL, a restart: the cells run again on the snapshot', { timeout: 180000 }, async () => {
		const root = newProject('journal');
		const xdg = stateHome();
		let h = await journalAfter(root, xdg, 'x = 1', ['x += 1', 'def f(k):\n    return x * k', 'print("seen", x)\nx += 1']);
		assert.match(h.stderr(), /a journal of cells 2 to 4 after the snapshot of cell 1/);
		await killed(h);
		h = await start(root, xdg);
		const r = await execPy(h, 'f(10)');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '30', 'the state after cell 4, with the function cell 3 defined');
		assert.equal(r.sc.execution_count, 5, 'the count goes on from the journal\'s last cell');
		assert.match(r.text, /restored from its state saved .* \(after cell 1\)/);
		assert.match(r.text, /then cells 2 to 4, which ran after that save and were kept as a journal .* ran again on it \([\d.]+ s\), with the same output as the first time/);
		// The next rest saves the state whole again (it follows a restore).
		await waitLog(h.stderr, whole, { what: 'the restored state saved whole' });
		await killed(h);
		h = await start(root, xdg);
		const r2 = await execPy(h, 'x, f(2)');
		assert.equal(r2.sc.result, '(3, 6)', show(r2.text));
		assert.doesNotMatch(r2.text, /ran again on it/, 'the whole save replaced the journal');
		await h.close();
	});

	test('a journaled cell that fails when run again: the state before it, said so', { timeout: 180000 }, async () => {
		const root = newProject('journal-fail');
		const xdg = stateHome();
		// A generator cannot be pickled: it is not in the snapshot, and
		// the cell that used it fails when run again on the snapshot.
		let h = await journalAfter(root, xdg, 'x = 1\ng = (i for i in range(10))', ['y = next(g)', 'z = 5']);
		await killed(h);
		h = await start(root, xdg);
		const r = await execPy(h, '[x, "y" in dir(), "z" in dir()]');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '[1, False, False]', show(r.text));
		assert.match(r.text, /cell 2 failed when run again \(NameError: name 'g' is not defined\), so the state is as after cell 1: what cells 2 to 3 did to variables is gone/);
		assert.doesNotMatch(r.text, /same output/);
		await h.close();
	});

	test('at exit too: end of input right after the calls writes a journal, not the state', { timeout: 180000 }, async () => {
		const root = newProject('journal-exit');
		const xdg = stateHome();
		let h = await start(root, xdg);
		let r = await execPy(h, 'x = 1');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitLog(h.stderr, whole, { what: 'the first state saved whole' });
		for (const code of ['x += 1', 'x += 1']) {
			r = await execPy(h, code);
			assert.equal(r.sc.status, 'ok', show(r.text));
		}
		const log = h.stderr;
		await h.close();
		assert.match(log(), /state saved \(a journal of cells 2 to 3 after the snapshot of cell 1/, log().slice(-1500));
		assert.equal(count({ stderr: log }, whole), 1, 'no whole save at exit');
		h = await start(root, xdg);
		r = await execPy(h, 'x');
		assert.equal(r.sc.result, '3', show(r.text));
		assert.equal(r.sc.state, 'restored');
		await h.close();
	});

	test('fork_from a session that is only on disk: the copy runs the journal too, the parent keeps it', { timeout: 180000 }, async () => {
		const root = newProject('journal-fork');
		const xdg = stateHome();
		let h = await journalAfter(root, xdg, 'x = 1', ['x += 1', 'x *= 10']);
		await killed(h);
		const before = fs.readFileSync(journalPath(root));
		h = await start(root, xdg);
		let r = await execPy(h, 'x', { session: 'copy', fork_from: 'default' });
		assert.equal(r.sc.state, 'forked', show(r.text));
		assert.equal(r.sc.result, '20', 'the parent\'s state after its journal');
		assert.match(r.text, /forked from session default: [^\n]*\(after cell 1\)[^\n]*\nthen cells 2 to 3, which ran after that save [^\n]* ran again on it/);
		assert.deepEqual(fs.readFileSync(journalPath(root)), before, 'the parent\'s journal is untouched');
		r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '20');
		await h.close();
	});

	test('without checkpoints the journal is not run, and the note says why', { timeout: 180000 }, async () => {
		const root = newProject('journal-nockpt');
		const xdg = stateHome();
		let h = await journalAfter(root, xdg, 'x = 1', ['x += 1', 'x += 1']);
		await killed(h);
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: no checkpoints\nlimits:\n  checkpoint: false\n---\n');
		h = await start(root, xdg);
		const r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '1', 'the snapshot as it was saved');
		assert.match(r.text, /cells 2 to 3, which ran after the saved state of session default was saved and were kept beside it as a journal, are not run again: limits\.checkpoint is false/);
		await h.close();
	});

	test('attack: a journal changed by sandboxed code is refused, and removed', { timeout: 180000 }, async () => {
		const root = newProject('journal-forged');
		const xdg = stateHome();
		let h = await journalAfter(root, xdg, 'x = 1', ['x += 1', 'x += 1']);
		// The cell rewrites the code of the journal's first cell (same
		// length) and is killed with the server before any save after it.
		const r0 = await execPy(h, [
			'p = "workspace/.sessions/default/journal"',
			'b = bytearray(open(p, "rb").read())',
			'i = b.index(b"x += 1")',
			'b[i:i + 6] = b"x += 9"',
			'open(p, "wb").write(bytes(b))',
		].join('\n'));
		assert.equal(r0.sc.status, 'ok', show(r0.text));
		await killed(h);
		assert.ok(fs.readFileSync(journalPath(root)).includes('x += 9'), 'the cell changed the journal');
		h = await start(root, xdg);
		const r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '1', 'the snapshot alone: no cell of the changed journal ran');
		assert.match(r.text, /kept beside it as a journal, were refused \(its bytes do not match the tag the server wrote with them\)/);
		assert.equal(fs.existsSync(journalPath(root)), false, 'the refused journal is removed');
		await h.close();
	});

	test('attack: the journal of an older snapshot put back beside a newer one is not run', { timeout: 180000 }, async () => {
		const root = newProject('journal-stale');
		const xdg = stateHome();
		let h = await journalAfter(root, xdg, 'x = 1', ['x += 1']);
		const old = fs.readFileSync(journalPath(root));
		// A file written: a checkpoint, and the next save is whole.
		const r0 = await execPy(h, 'open("workspace/note.txt", "w").write("a")');
		assert.equal(r0.sc.status, 'ok', show(r0.text));
		await waitLog(h.stderr, whole, { count: 2, what: 'a second whole save' });
		assert.equal(fs.existsSync(journalPath(root)), false, 'a whole save removes the journal before it');
		await killed(h);
		fs.writeFileSync(journalPath(root), old, { mode: 0o600 });
		h = await start(root, xdg);
		const r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '2', 'the newer snapshot, without the older journal\'s cell run on it');
		assert.doesNotMatch(r.text, /journal/);
		assert.equal(fs.existsSync(journalPath(root)), false, 'the stale journal is removed');
		await h.close();
	});
});
