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
		h = await startClient(newProject('ckfail'), { structured: true });
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
