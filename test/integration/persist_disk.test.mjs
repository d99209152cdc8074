// Saved sessions on a full disk: the workspace is a small tmpfs (make test
// runs as root, as `sudo make test` does for users, so it can mount one).
// A save that does not fit is named with its reason in the next reply and
// at warn level on stderr; the previous snapshot stays whole and is what a
// new server restores.  Measured before: only --log-level debug said why
// ("No space left on device"), and the reply said nothing.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, show } from './lib.mjs';
import { stateHome, start, waitSaved, waitLog } from './persist_lib.mjs';

const mounts = [];
after(() => {
	for (const m of mounts) spawnSync('umount', ['-l', m]);
});

describe('a full disk', () => {
	test('a save that does not fit: the next reply and stderr say why, the previous snapshot stays', { timeout: 300000 }, async () => {
		assert.equal(process.getuid(), 0, 'this test mounts a tmpfs: run it as root (sudo make test)');
		const root = newProject('persist-full');
		const ws = path.join(root, 'workspace');
		fs.mkdirSync(ws, { recursive: true });
		const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=24m,mode=0755', 'psm-full', ws], { encoding: 'utf8' });
		assert.equal(m.status, 0, m.stderr);
		mounts.push(ws);
		fs.mkdirSync(path.join(ws, 'outputs'));
		const xdg = stateHome();
		// Each cell takes its checkpoint, so that its state is saved whole
		// (a cell only logged is saved as a journal of cells, a few bytes).
		let h = await start(root, xdg, { env: { PSM_TEST_REPLAY_MS: '0' } });
		let r = await execPy(h, 'import numpy as np\nsmall = np.arange(1000)');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1);
		r = await execPy(h, 'big = np.ones(4_000_000)\nbig.nbytes');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitLog(h.stderr, /session default: the state after cell 2 was not saved/);
		assert.match(h.stderr(), /warning: session default: the state after cell 2 was not saved: the disk of the workspace is full \(No space left on device\)/, h.stderr().slice(-1500));
		r = await execPy(h, 'small.sum()');
		assert.match(r.text, /note:\nthe state after cell 2 was not saved: the disk of the workspace is full \(No space left on device\): free some space there; a restart of the server would bring back the state saved after cell 1/, show(r.text));
		assert.equal(fs.existsSync(path.join(ws, '.sessions', 'default', '.state.tmp')), false, 'no partial file is left');
		// The next save (this call's state is large too) fails the same
		// way: said on stderr, not again in the reply.
		await waitLog(h.stderr, /was not saved: the disk of the workspace is full/, { count: 2 });
		assert.match(h.stderr(), /the state after cell 3 was not saved: the disk of the workspace is full/);
		r = await execPy(h, '1');
		assert.doesNotMatch(r.text, /not saved/, show(r.text));
		await h.close();
		h = await start(root, xdg);
		r = await execPy(h, '("big" in globals(), int(small.sum()))');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '(False, 499500)', 'the state after cell 1 came back');
		await h.close();
	});
});
