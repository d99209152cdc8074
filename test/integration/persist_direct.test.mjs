// Saved sessions read from the file itself: where the server can hold a
// lease on the snapshot (a local filesystem, nobody has it open for
// writing), the session reads the file straight into the buffers its state
// is built on, while the server hashes the same file and vouches for it
// only if nobody opened it for writing meanwhile.  Checked from outside:
// once restored, the buffers are the session's own memory, whatever then
// happens to the file (a buffer mapped from the file would read its new
// bytes, or end the session with SIGBUS once the file is cut); a file held
// open for writing is streamed instead, and restores all the same.  A
// state of 16 MiB or more is saved in pieces (persist_pieces.test.mjs) and
// always streamed: these use a smaller one.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end } from './persist_lib.mjs';

const BUILD_BIG = 'import numpy as np\nbig = np.arange(1_500_000, dtype=np.float64) * 0.5\nfloat(big.sum())';
const SUM = '562499625000.0';

async function saved(root, xdg) {
	const h = await start(root, xdg);
	const r = await execPy(h, BUILD_BIG);
	assert.equal(r.sc.status, 'ok', show(r.text));
	assert.equal(r.sc.result, SUM);
	await waitSaved(h, 1);
	await end(h, 'eof');
}

describe('a saved state read from the file itself', () => {
	test('restored buffers are the session\'s own: the file changed and cut after the restore changes nothing', { timeout: 120000 }, async () => {
		const root = newProject('pdirect');
		const xdg = stateHome();
		await saved(root, xdg);
		// A second name for the very file restored from: the next save
		// renames a new snapshot over state.snap, this one stays that inode.
		const link = path.join(root, 'restored-from.snap');
		fs.linkSync(snapPath(root), link);

		const h = await start(root, xdg);
		let r = await execPy(h, 'float(big.sum()), big.flags.aligned, big.flags.writeable');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, `(${SUM}, True, True)`);
		assert.match(h.stderr(), /saved state read directly and verified \(\d+ bytes/, 'read from the file, not streamed');

		// From outside, after the reply: every byte of the file changed,
		// then the file cut to nothing.
		const fd = fs.openSync(link, 'r+');
		const size = fs.fstatSync(fd).size;
		const junk = Buffer.alloc(1 << 20, 0xa5);
		for (let off = 0; off < size; off += junk.length) fs.writeSync(fd, junk, 0, Math.min(junk.length, size - off), off);
		fs.fsyncSync(fd);
		fs.ftruncateSync(fd, 0);
		fs.closeSync(fd);
		r = await execPy(h, 'big[0] = 7.0\nfloat(big.sum())');
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'kept', show(r.text));
		assert.equal(r.sc.result, '562499625007.0');
		await h.close();
	});

	test('a snapshot held open for writing by another process is streamed, and restores', { timeout: 120000 }, async () => {
		const root = newProject('pdirect');
		const xdg = stateHome();
		await saved(root, xdg);
		const fd = fs.openSync(snapPath(root), 'r+');
		try {
			const h = await start(root, xdg);
			const r = await execPy(h, 'float(big.sum())');
			assert.equal(r.sc.state, 'restored', show(r.text));
			assert.equal(r.sc.result, SUM);
			assert.match(h.stderr(), /saved state streamed and verified \(\d+ bytes/, 'no lease: streamed');
			await h.close();
		} finally {
			fs.closeSync(fd);
		}
	});
});
