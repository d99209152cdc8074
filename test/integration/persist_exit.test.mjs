// Saved sessions and the ways a server ends: the state of every call that
// ended ok is on disk before the server exits, however the client ends it
// (end of input at once, SIGTERM at once, SIGINT, SIGHUP, end of input after
// a pause), and a save that cannot finish in time is named on stderr.  Each
// ending is followed by a new server whose first call must find the last
// cell's state.  Measured before: closed or SIGTERMed right after the last
// reply, the next server restored nothing at all.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { RawServer, execPy, newProject, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitLog } from './persist_lib.mjs';

/** Runs two cells on raw stdio and ends the server `how` right after the
 *  second reply (or `pause` ms later). */
async function runAndEnd(root, xdg, how, { pause = 0 } = {}) {
	const s = new RawServer(root, { args: ['--log-level', 'info'], env: { XDG_STATE_HOME: xdg } });
	try {
		await s.initialize();
		let r = await s.callTool('execute_python', { code: 'import numpy as np\na = np.arange(10)' }, { timeout: 120000 });
		assert.equal(r.result?.isError, false, show(r));
		r = await s.callTool('execute_python', { code: 'b = int(a.sum()) * 2\nb' }, { timeout: 60000 });
		assert.equal(r.result?.isError, false, show(r));
		if (pause)
			await sleep(pause);
		const t0 = performance.now();
		const e = await s.stop(how, { timeout: 15000 });
		const took = performance.now() - t0;
		assert.deepEqual(e, { code: 0, signal: null }, `exit after ${how}; stderr: ${s.stderr().slice(-1500)}`);
		assert.ok(took < 11000, `${how}: exit took ${took.toFixed(0)} ms`);
		assert.deepEqual(s.violations, []);
		return s.stderr();
	} finally {
		s.kill();
	}
}

async function expectRestored(root, xdg) {
	const h = await start(root, xdg);
	const r = await execPy(h, 'b + len(a)');
	assert.equal(r.sc.status, 'ok', show(r.text));
	assert.equal(r.sc.state, 'restored', show(r.text));
	assert.equal(r.sc.result, '100', 'the second cell came back');
	assert.equal(r.sc.execution_count, 3);
	assert.match(r.text, /restored from its state saved \d+ s ago \(after cell 2\)/);
	await h.close();
}

describe('the last state is on disk however the server ends', () => {
	for (const how of ['eof', 'SIGTERM', 'SIGINT', 'SIGHUP']) {
		test(`${how} right after the last reply`, { timeout: 120000 }, async () => {
			const root = newProject('persist-end');
			const xdg = stateHome();
			const err = await runAndEnd(root, xdg, how);
			assert.match(err, /state saved \(/, err.slice(-1500));
			assert.doesNotMatch(err, /could not be saved before the server exited/);
			assert.ok(fs.existsSync(snapPath(root)));
			await expectRestored(root, xdg);
		});
	}

	test('end of input two seconds after the last reply', { timeout: 120000 }, async () => {
		const root = newProject('persist-end');
		const xdg = stateHome();
		await runAndEnd(root, xdg, 'eof', { pause: 2000 });
		await expectRestored(root, xdg);
	});

	test('a save that cannot finish in time is named on stderr, and the exit still comes', { timeout: 240000 }, async () => {
		const root = newProject('persist-end-slow');
		const xdg = stateHome();
		const s = new RawServer(root, { args: ['--log-level', 'info'], env: { XDG_STATE_HOME: xdg } });
		try {
			await s.initialize();
			let r = await s.callTool('execute_python', { code: 'kept = "first"' }, { timeout: 120000 });
			assert.equal(r.result?.isError, false, show(r));
			await waitLog(() => s.stderr(), /state saved \(/);
			r = await s.callTool('execute_python', { code: `
class Slow:
    def __reduce__(self):
        import time
        time.sleep(60)
        return (int, (1,))
slow = Slow()
kept = "second"` }, { timeout: 60000 });
			assert.equal(r.result?.isError, false, show(r));
			const t0 = performance.now();
			const e = await s.stop('SIGTERM', { timeout: 20000 });
			const took = performance.now() - t0;
			assert.deepEqual(e, { code: 0, signal: null });
			assert.ok(took > 9000 && took < 16000, `the wait is bounded at 10 s (and the exit after it): ${took.toFixed(0)} ms`);
			assert.match(s.stderr(), /session default: the state after cell 2 could not be saved before the server exited \(its save was still running\); a restart of the server would bring back the state saved after cell 1/,
				s.stderr().slice(-2000));
		} finally {
			s.kill();
		}
		const h = await start(root, xdg);
		const r = await execPy(h, 'kept');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, "'first'", 'the previous snapshot stays whole');
		await h.close();
	});
});
