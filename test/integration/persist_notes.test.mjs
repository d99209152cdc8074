// Saved sessions: what the model is told when a state is not saved or not
// restored.  A snapshot made with another key gets a plain note (not the
// tampering alarm); a refused snapshot leaves a fresh session whose cells
// count from 1; a planted snapshot over persist_mb is refused before a byte
// is read, and a planted one that fails its tag gets no extra time; what
// cannot be pickled is named in the next reply, once; a restored state gets
// its checkpoint like any other (a crash after a restore rolls back to it).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved } from './persist_lib.mjs';

/** CPU time (ms) of one process. */
function cpuMs(pid) {
	const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
	const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
	return (Number(f[11]) + Number(f[12])) * 10;
}

async function saved(tag, code = 'value = 123') {
	const root = newProject(tag);
	const xdg = stateHome();
	const h = await start(root, xdg);
	const r = await execPy(h, code);
	assert.equal(r.sc.status, 'ok', show(r.text));
	await waitSaved(h, 1);
	await h.close();
	return { root, xdg };
}

/** A file the size of `bytes` (sparse) that ends with a well-formed
 *  trailer and a wrong tag; the key id is copied from a real snapshot. */
function plant(file, bytes, keyid) {
	fs.mkdirSync(path.dirname(file), { recursive: true });
	const t = Buffer.alloc(72);
	t.write('PSMSNAP2', 0);
	t.writeBigUInt64LE(BigInt(bytes - 72), 8);
	t.writeBigUInt64LE(BigInt(Date.now()), 16);
	t.writeBigUInt64LE(5n, 24);
	keyid.copy(t, 32);
	const fd = fs.openSync(file, 'w');
	fs.ftruncateSync(fd, bytes);
	fs.writeSync(fd, t, 0, t.length, bytes - 72);
	fs.closeSync(fd);
}

const keyidOf = (file) => { const b = fs.readFileSync(file); return b.subarray(b.length - 72 + 32, b.length - 72 + 40); };

describe('what the model is told', () => {
	test('another key: a plain note, not the tampering alarm; the file waits for the next save', { timeout: 120000 }, async () => {
		const { root } = await saved('persist-key');
		const other = stateHome();
		let h = await start(root, other);
		let r = await execPy(h, '"value" in globals()');
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.result, 'False');
		assert.equal(r.sc.execution_count, 1, 'a fresh session counts from 1');
		assert.equal(r.head.cell, 1, 'the status line too');
		assert.match(r.text, /note:\n.*saved state of session default was saved with another key: not restored/, show(r.text));
		assert.doesNotMatch(r.text, /do not match the tag|planted/);
		await waitSaved(h, 1);
		await h.close();
		// The next save replaced it, under the new key.
		h = await start(root, other);
		r = await execPy(h, '"value" in globals()');
		assert.equal(r.sc.state, 'restored', show(r.text));
		await h.close();
	});

	test('a changed snapshot: the tampering wording, and the reply counts from cell 1', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-tamper', 'a = 1');
		const p = snapPath(root);
		const buf = fs.readFileSync(p);
		buf[10] ^= 1;
		fs.writeFileSync(p, buf);
		const h = await start(root, xdg);
		const r = await execPy(h, '"a" in globals()');
		assert.equal(r.sc.state, 'new');
		assert.equal(r.sc.execution_count, 1, show(r.text));
		assert.equal(r.head.cell, 1, 'the status line too');
		assert.match(r.text, /do not match the tag the server wrote with them \(changed or planted/);
		await h.close();
	});

	test('a planted 2 GiB sparse snapshot is refused before it is read: no hashing, no extra time', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-sparse');
		plant(snapPath(root, 'victim'), 2 ** 31, keyidOf(snapPath(root)));
		const h = await start(root, xdg);
		await execPy(h, '1', { session: 'warm' });
		const c0 = cpuMs(h.pid);
		const t0 = Date.now();
		// Any second of extra time lets the 3 s sleep end ok (2 GiB gave
		// 64 s before: the call returned ok after 44.6 s).
		const r = await execPy(h, 'import time\ntime.sleep(3)', { session: 'victim', timeout_s: 2 });
		const took = Date.now() - t0;
		assert.equal(r.sc.status, 'timeout', `${took} ms: ${show(r.text)}`);
		assert.ok(cpuMs(h.pid) - c0 < 1000, 'the server hashed nothing');
		assert.match(r.text, /saved state of session victim is not restored: it is 2048 MB, over limits\.persist_mb \(1024 MB\)/, show(r.text));
		await h.close();
	});

	test('a planted snapshot that fails its tag gets no extra time', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-planted');
		plant(snapPath(root, 'victim'), 320 << 20, keyidOf(snapPath(root)));
		const h = await start(root, xdg);
		await execPy(h, '1', { session: 'warm' });
		const t0 = Date.now();
		// 320 MB gave 10 s of extra time before, whatever the verdict: a
		// second of it lets a 3 s sleep end ok under a 2 s timeout.  The
		// verdict, not a wall clock, tells (this machine may be loaded).
		const r = await execPy(h, 'import time\ntime.sleep(3)\n"slept"', { session: 'victim', timeout_s: 2 });
		const took = Date.now() - t0;
		assert.equal(r.sc.status, 'timeout', `${took} ms: ${show(r.text)}`);
		assert.match(r.text, /saved state of session victim was refused: its bytes do not match the tag/);
		await h.close();
	});

	test('what cannot be pickled is named in the next reply, once for each new name', { timeout: 120000 }, async () => {
		const root = newProject('persist-unpicklable');
		// Each cell takes its checkpoint, so that each rest pickles the
		// state (after cells only logged, a save at rest is a journal of
		// them, and what they made comes back by running them again).
		const h = await start(root, stateHome(), { env: { PSM_TEST_REPLAY_MS: '0' } });
		await execPy(h, 'fh = open("workspace/log.txt", "w")\nkept = 1');
		await waitSaved(h, 1);
		let r = await execPy(h, 'kept');
		assert.match(r.text, /note:\nnot saved with the session's state \(a restart of the server loses them; the rest is saved\): fh \(TypeError: cannot pickle '_io.TextIOWrapper' object\)/, show(r.text));
		await waitSaved(h, 2);
		r = await execPy(h, 'import threading\nlk = threading.Lock()');
		assert.doesNotMatch(r.text, /not saved with/, 'said once');
		await waitSaved(h, 3);
		r = await execPy(h, 'kept');
		assert.match(r.text, /not saved with the session's state [^\n]*fh \([^\n]*lk \(TypeError/, 'a new name: said again, with all of them');
		// More than a reply lists: the saver's summary names 32 and counts
		// the rest, and the note counts them all.
		await waitSaved(h, 4);
		await execPy(h, 'for i in range(40):\n    globals()[f"g{i}"] = (x for x in [])');
		await waitSaved(h, 5);
		r = await execPy(h, 'kept');
		assert.match(r.text, /not saved with the session's state [^\n]* and 12 more/, show(r.text));
		await h.close();
	});

	test('a file closed by its with block is not named as not saved, neither in the next reply nor after a restart', { timeout: 120000 }, async () => {
		const code = 'with open("workspace/out.txt", "w") as f:\n    f.write("x")\nrows = [1, 2]\nopen_fh = open("workspace/keep.txt", "w")';
		const { root, xdg } = await saved('persist-closed-file', code);
		const h = await start(root, xdg);
		const r = await execPy(h, 'rows');
		assert.equal(r.sc.result, '[1, 2]', show(r.text));
		assert.match(r.text, /Could not be saved \(run the cells that made them again\): open_fh \(/, show(r.text));
		assert.doesNotMatch(r.text, /\bf \(/, show(r.text));
		await waitSaved(h, 1);
		const again = await execPy(h, 'with open("workspace/out2.txt", "w") as g:\n    g.write("y")');
		assert.doesNotMatch(again.text, /not saved with[^\n]*\bg \(/, show(again.text));
		await h.close();
	});

	test('a restored state has its checkpoint: a crash right after the restore rolls back to it', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-restored-ckpt', 'kept = 41');
		const h = await start(root, xdg);
		let r = await execPy(h, 'kept += 1\nkept');
		assert.equal(r.sc.state, 'restored', show(r.text));
		r = await execPy(h, 'kept = 0\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)');
		assert.equal(r.sc.status, 'crashed', show(r.text));
		assert.equal(r.sc.state, 'rolled_back', show(r.text));
		r = await execPy(h, 'kept');
		assert.equal(r.sc.result, '42');
		await h.close();
	});
});
