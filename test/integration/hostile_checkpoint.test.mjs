// A session that cannot take its checkpoint.  The checkpoint of a call's
// state is forked by the session after the reply went out; a session whose
// code used up its descriptors (or lowered its own limit) sends the
// checkpoint message without the checkpoint's pidfd.  That is not what the
// server asked for: the session is ended as a crash, the previous
// checkpoint resumes, and the next reply says so.  Checked from outside:
// the next call's result and note, and no process of the session left
// beyond the idle ones.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startClient, newProject, execPy, descendants, descendantsDown, sleep, show } from './lib.mjs';

describe('a checkpoint message without its checkpoint', () => {
	let h;
	before(async () => {
		// A checkpoint after every call (PSM_TEST_REPLAY_MS=0): a cheap
		// cell is otherwise only logged, and the checkpoint it cannot take
		// comes later (replay.c).
		h = await startClient(newProject('ckfail'), { structured: true, env: { PSM_TEST_REPLAY_MS: '0' } });
		assert.equal((await execPy(h, 'x = 1')).sc.status, 'ok');
	});
	after(async () => { await h?.close(); });

	for (const [how, code] of [
		['every descriptor used up', 'fds = []\ntry:\n    while True: fds.append(os.open("/dev/null", os.O_RDONLY))\nexcept OSError:\n    pass'],
		['RLIMIT_NOFILE lowered to 4', 'fds = [resource.setrlimit(resource.RLIMIT_NOFILE, (4, 4))]'],
	]) {
		test(`${how}: ended as a crash, rolled back to the previous checkpoint, the next reply says so`, { timeout: 60000 }, async () => {
			const session = how.replace(/\W+/g, '_');
			const first = await execPy(h, 'import os, resource\nkept = 7', { session });
			assert.equal(first.sc.status, 'ok', show(first.sc));
			// Its checkpoint is taken after the reply.
			await sleep(500);
			const idle = descendants(h.pid).length;
			const r = await execPy(h, `kept = 8\n${code}\nlen(fds) > 0`, { session });
			// The reply goes out before the checkpoint is taken: the call
			// itself is what the code did.
			assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', 'True', 'kept'], show(r.sc));
			const n = await execPy(h, '(kept, "fds" in globals())', { session }, { timeout: 40000 });
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '(7, False)'], show(n.sc));
			// The note of an ok reply: its text's note section, and
			// structuredContent's error of type Note.
			assert.equal(n.sc.error?.type, 'Note', show(n.sc));
			assert.match(n.sc.error.message, /broke its protocol with the server \(a checkpoint message without the checkpoint\)/);
			assert.match(n.sc.error.message, /rolled back to its state before that call/);
			assert.match(n.text, /\nnote:\n.*rolled back to its state before that call/);
			// Said once.
			const again = await execPy(h, 'kept', { session });
			assert.equal(again.sc.error, null, show(again.sc));
			const left = await descendantsDown(h.pid, idle + 2);
			assert.ok(left <= idle + 2, `${left} processes below the server, ${idle} before (plus this session's new checkpoint)`);
		});
	}
});

// A session that never sends its checkpoint.  The checkpoint is a fork, and
// the interpreter's before-fork hooks run in it: a hook that sleeps holds
// the session asleep (so no CPU budget ends it) with the checkpoint never
// sent.  The server waits 30 s for it, then ends the session as a crash and
// resumes the previous checkpoint; a reset meanwhile is answered at once.
describe('a checkpoint that never comes', () => {
	let h;
	before(async () => {
		h = await startClient(newProject('cknever'), { structured: true });
	});
	after(async () => { await h?.close(); });

	const hang = 'import os, time\nos.register_at_fork(before=lambda: time.sleep(1000))\nkept = 8';

	test('ended after 30 s, rolled back to the previous checkpoint, and the next reply says so', { timeout: 120000 }, async () => {
		const session = 'never';
		assert.equal((await execPy(h, 'kept = 7', { session })).sc.status, 'ok');
		const r = await execPy(h, hang, { session });
		assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.sc));
		const n = await execPy(h, 'kept', { session }, { timeout: 90000 });
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
		assert.equal(n.sc.error?.type, 'Note', show(n.sc));
		assert.match(n.sc.error.message, /broke its protocol with the server \(no checkpoint within 30 s\)/);
		assert.match(n.sc.error.message, /rolled back to its state before that call/);
		// The rolled-back session takes its checkpoints again.
		const after_ = await execPy(h, 'kept = 9\nkept', { session });
		assert.deepEqual([after_.sc.status, after_.sc.result], ['ok', '9'], show(after_.sc));
		assert.equal((await execPy(h, 'kept', { session })).sc.result, '9');
	});

	test('a reset while the server waits for it is answered without the wait', { timeout: 120000 }, async () => {
		const session = 'never-reset';
		assert.equal((await execPy(h, 'kept = 7', { session })).sc.status, 'ok');
		assert.equal((await execPy(h, hang, { session })).sc.status, 'ok');
		const t0 = Date.now();
		const r = await execPy(h, '"kept" in globals()', { session, reset: true }, { timeout: 90000 });
		const waited = Date.now() - t0;
		assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', 'False', 'new'], show(r.sc));
		assert.ok(waited < 20000, `the reset waited ${waited} ms, as for the checkpoint's 30 s timer`);
	});
});
