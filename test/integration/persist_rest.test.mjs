// Saved sessions save once the session rests, not after every call.  A save
// pickles the whole state, so a save after every call cost a state's worth
// of CPU per call (780 ms a call on a 4M-row DataFrame).  The server now
// saves the latest state once the session has been idle for a delay (at
// least 5 s; 5 times the last save's duration, at most 10 s), and at exit at
// once.  Checked from outside: the snapshot's inode and the server's log
// lines, the state a new server restores.  (After cells that the replay log
// only logged, that save is a journal of those cells beside the snapshot:
// persist_journal.test.mjs.)
//
// Measured on the code before: a burst of ten calls half a second apart
// wrote the snapshot ten times (one save after each call).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { RawServer, execPy, newProject, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved } from './persist_lib.mjs';

/** The shortest rest after which the state is saved (savepace.h). */
const REST_MS = 5000;

const saves = (err) => (err.match(/state saved \(/g) || []).length;

/** Runs `n` cells that each add one to `x`, `gap` ms apart, on a client
 *  with stderr (h: startClient or RawServer via `call`); returns the longest
 *  pause between two replies, as the server saw it. */
async function burst(call, n, gap) {
	let last = performance.now(), longest = 0;
	for (let i = 0; i < n; i++) {
		if (gap) await sleep(gap);
		const r = await call(`x += 1\nx`);
		const now = performance.now();
		longest = Math.max(longest, now - last);
		last = now;
		assert.equal(r, String(i + 2), `cell ${i + 2} saw x`);
	}
	return longest;
}

describe('saves wait until the session rests', () => {
	test('a burst of calls, then idle time: one save, of the last call\'s state', { timeout: 180000 }, async () => {
		const root = newProject('persist-rest');
		const xdg = stateHome();
		let h = await start(root, xdg);
		let r = await execPy(h, 'x = 1');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1);
		const ino0 = fs.statSync(snapPath(root)).ino;
		const n0 = saves(h.stderr());
		// Ten calls half a second apart: the session works, never rests.
		const longest = await burst(async (code) => (await execPy(h, code)).sc.result, 10, 500);
		const during = saves(h.stderr()) - n0;
		if (longest < REST_MS - 1000) {
			assert.equal(during, 0, `no save while the calls came (longest pause ${longest.toFixed(0)} ms): ${h.stderr().slice(-1500)}`);
			assert.equal(fs.statSync(snapPath(root)).ino, ino0, 'the snapshot was not rewritten during the burst');
		}
		// Then the session rests: the last call's state is saved, once.
		await waitSaved(h, n0 + 1, 30000);
		await sleep(REST_MS + 1500);
		assert.equal(saves(h.stderr()) - n0, 1, `one save after the burst (${during} during it): ${h.stderr().slice(-2000)}`);
		// The burst's cells were only logged: the save is a journal of
		// them beside the snapshot of cell 1, which stays as it is.
		assert.match(h.stderr(), /session default: state saved \(a journal of cells 2 to 11 after the snapshot of cell 1/);
		assert.equal(fs.statSync(snapPath(root)).ino, ino0, 'the snapshot stays, the journal follows it');
		// What is on disk once the session rested survives a SIGKILL.
		process.kill(h.pid, 'SIGKILL');
		await h.close().catch(() => {});
		h = await start(root, xdg);
		r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '11', 'the state after the last call of the burst');
		assert.match(r.text, /\(after cell 1\)[^\n]*\nthen cells 2 to 11, which ran after that save [^\n]* ran again on it/);
		await h.close();
	});

	for (const how of ['eof', 'SIGTERM']) {
		test(`a burst of calls, then ${how} at once: the last call's state is restored`, { timeout: 180000 }, async () => {
			const root = newProject('persist-rest-exit');
			const xdg = stateHome();
			const s = new RawServer(root, { structured: true, args: ['--log-level', 'info'], env: { XDG_STATE_HOME: xdg } });
			try {
				await s.initialize();
				let r = await s.callTool('execute_python', { code: 'x = 1' }, { timeout: 120000 });
				assert.equal(r.result?.isError, false, show(r));
				const longest = await burst(async (code) => {
					const q = await s.callTool('execute_python', { code }, { timeout: 60000 });
					assert.equal(q.result?.isError, false, show(q));
					return q.result.structuredContent?.result;
				}, 8, 0);
				if (longest < REST_MS - 1000)
					assert.equal(fs.existsSync(snapPath(root)), false, `nothing saved while the calls came: ${s.stderr().slice(-1500)}`);
				const e = await s.stop(how, { timeout: 15000 });
				assert.deepEqual(e, { code: 0, signal: null }, s.stderr().slice(-1500));
				assert.equal(saves(s.stderr()), 1, `one save, at exit: ${s.stderr().slice(-1500)}`);
				assert.doesNotMatch(s.stderr(), /could not be saved before the server exited/);
			} finally {
				s.kill();
			}
			const h = await start(root, xdg);
			const r = await execPy(h, 'x');
			assert.equal(r.sc.state, 'restored', show(r.text));
			assert.equal(r.sc.result, '9', 'the state after the last call');
			assert.equal(r.sc.execution_count, 10);
			await h.close();
		});
	}

	test('a SIGKILL during a burst loses the calls since the session last rested, no more', { timeout: 180000 }, async () => {
		const root = newProject('persist-rest-kill');
		const xdg = stateHome();
		let h = await start(root, xdg);
		let r = await execPy(h, 'x = 1');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1);
		const longest = await burst(async (code) => (await execPy(h, code)).sc.result, 5, 0);
		process.kill(h.pid, 'SIGKILL');
		await h.close().catch(() => {});
		h = await start(root, xdg);
		r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', show(r.text));
		if (longest < REST_MS - 1000)
			assert.equal(r.sc.result, '1', 'the state saved when the session last rested (after cell 1)');
		await h.close();
	});
});
