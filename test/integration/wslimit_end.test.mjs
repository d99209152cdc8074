// limits.max_workspace_mb at the end of a call.  The watcher measures the
// workspace every 250 ms or more while a call runs (budget.test.mjs), so a
// call shorter than that is checked once more on the snapshot taken after
// it, with each file by its size: a sparse file counts as what it would
// take filled in (4 KiB on disk, 60 MB to copy or fill in place).
// Effects checked from outside: the reply, the file on disk, the session's
// state in the next call.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, execPy, show } from './lib.mjs';
import { projectWith } from './reply_lib.mjs';

const MiB = 1024 * 1024;

describe('max_workspace_mb checked at the end of every call', () => {
	let h, root;
	before(async () => {
		let skill;
		[root, skill] = projectWith('wsend', [['max_workspace_mb: 4096', 'max_workspace_mb: 50']]);
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	for (const [what, write] of [
		['one fast write of 60 MB', 'open("workspace/fast.bin", "wb").write(b"z" * (60 << 20))'],
		['a sparse file of 60 MB (4 KiB on disk)', 'f = open("workspace/fast.bin", "wb")\nf.seek(60 << 20)\nf.write(b"z")\nf.close()'],
	]) {
		test(`${what}: status limits, exit 153, rolled back, the file stays`, { timeout: 60000 }, async () => {
			assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
			const r = await execPy(h, `kept = 8\n${write}\n"done"`);
			assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['limits', 153, 'rolled_back'], show(r.sc));
			assert.equal(r.sc.error?.denied_by, 'limits', show(r.sc.error));
			assert.match(r.sc.error.message, /past limits\.max_workspace_mb \(50 MB\)/);
			assert.ok(r.sc.artifacts.some((a) => a.path === 'workspace/fast.bin'), show(r.sc.artifacts));
			const big = path.join(root, 'workspace', 'fast.bin');
			// (The watcher may have stopped a slow write halfway.)
			assert.ok(fs.existsSync(big), 'the server deletes nothing');
			const after_ = await execPy(h, 'kept');
			assert.equal(after_.sc.result, '7', show(after_.sc));
			fs.unlinkSync(big);
		});
	}

	test('a call under the limit ends ok; files that were there before are its baseline', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'open("workspace/small.bin", "wb").write(b"s" * (10 << 20))');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		// 60 MB put there by the user: a call that does not grow the
		// workspace still runs.
		const f = path.join(root, 'workspace', 'user.bin');
		fs.writeFileSync(f, Buffer.alloc(60 * MiB, 1));
		const n = await execPy(h, 'len(open("workspace/user.bin", "rb").read(5))');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '5'], show(n.sc));
		fs.unlinkSync(f);
	});
});
