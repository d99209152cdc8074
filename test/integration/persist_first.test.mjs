// Saved sessions: the first call after a restart, the one that brings the
// saved state back.  Its timeout_s is the cell's own, counted from when the
// cell starts (loading the state has a bound of its own, not added to it),
// and its reply says only what is so about the state: restored when it came
// back, and, when the cell was stopped, that the saved state is still on
// disk and the next call loads it again.  Checked through the real binary.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';

import { execPy, newProject, show } from './lib.mjs';
import { stateHome, start, waitSaved, BUILD } from './persist_lib.mjs';

async function saved(tag) {
	const root = newProject(tag);
	const xdg = stateHome();
	const h = await start(root, xdg);
	const r = await execPy(h, BUILD);
	assert.equal(r.sc.status, 'ok', show(r.text));
	await waitSaved(h, 1);
	await h.close();
	return { root, xdg };
}

describe('the first call after a restart', () => {
	test('timeout_s counts from the cell: a sleep past it is stopped, and the state is told as it is', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-first-timeout');
		const h = await start(root, xdg);
		// Before, the call got 10 s on top for loading the state: an 8 s
		// sleep under timeout_s 5 ended ok.  The status tells, not a clock.
		let r = await execPy(h, 'print(len(df), flush=True)\nimport time\ntime.sleep(8)\nlen(df)', { timeout_s: 5 });
		assert.equal(r.sc.status, 'timeout', show(r.text));
		// It ran on the restored state, and the reply says so: nothing
		// about a lost state or a fresh session.
		assert.equal(r.sc.stdout.trim(), '1000', show(r.text));
		assert.doesNotMatch(r.text, /fresh session|could not be loaded|was lost/, show(r.text));
		assert.match(r.text, /saved state of session default \(saved \d+ s ago, after cell 1\) was loaded before this code ran[^\n]*still on disk, unchanged, and the next call in session default loads it again/, show(r.text));
		assert.equal(r.sc.state, 'rolled_back', show(r.text));
		assert.equal(r.sc.execution_count, 2);
		// The next call brings it back, and its cell has a number of its own.
		r = await execPy(h, 'len(df)');
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '1000');
		assert.equal(r.sc.execution_count, 3);
		await h.close();
	});

	test('a first call that uses the restored state says restored, never lost', { timeout: 120000 }, async () => {
		const { root, xdg } = await saved('persist-first-ok');
		const h = await start(root, xdg);
		let r = await execPy(h, 'import time\ntime.sleep(1)\nlen(df)', { timeout_s: 5 });
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '1000');
		assert.doesNotMatch(r.text, /lost|fresh session|could not be loaded/, show(r.text));
		r = await execPy(h, 'len(df)');
		assert.equal(r.sc.state, 'kept', show(r.text));
		await h.close();
	});
});
