// Concurrency: sessions run in parallel, ping is answered while
// code runs, a timeout stops the execution and the server stays responsive.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, show } from './lib.mjs';

describe('concurrency and timeouts', () => {
	let h;
	before(async () => { h = await startClient(newProject('conc'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('two sessions sleeping 2 s each run in parallel', { timeout: 60000 }, async () => {
		// Create both sessions first, so that only the sleeps are compared.
		await Promise.all([execPy(h, 'import time', { session: 'par_a' }), execPy(h, 'import time', { session: 'par_b' })]);
		const code = 't0 = time.time()\ntime.sleep(2)\nt1 = time.time()\n(t0, t1)';
		const t0 = performance.now();
		const [a, b] = await Promise.all([execPy(h, code, { session: 'par_a' }), execPy(h, code, { session: 'par_b' })]);
		const wall = performance.now() - t0;
		assert.equal(a.sc.status, 'ok', show(a.sc));
		assert.equal(b.sc.status, 'ok', show(b.sc));
		const [a0, a1] = a.sc.result.replace(/[()]/g, '').split(',').map(Number);
		const [b0, b1] = b.sc.result.replace(/[()]/g, '').split(',').map(Number);
		// The two sleeps overlap in time (measured inside Python) ...
		assert.ok(a0 < b1 && b0 < a1, `the executions did not overlap: a=[${a0}, ${a1}] b=[${b0}, ${b1}]`);
		// ... and the whole took less than the two executions one after the other.
		assert.ok(wall < a.sc.duration_ms + b.sc.duration_ms, `wall ${wall.toFixed(0)} ms >= ${a.sc.duration_ms} + ${b.sc.duration_ms} ms`);
	});

	test('ping is answered while a session is busy', { timeout: 60000 }, async () => {
		await execPy(h, 'import time', { session: 'busy' });
		let execDone = 0;
		const run = execPy(h, 'time.sleep(3)', { session: 'busy' }).then((r) => { execDone = performance.now(); return r; });
		await new Promise((r) => setTimeout(r, 500));
		const pings = [];
		for (let i = 0; i < 3; i++) {
			const t = performance.now();
			await h.client.ping();
			pings.push(performance.now() - t);
		}
		const pingDone = performance.now();
		const r = await run;
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.ok(pingDone < execDone, `the pings (${pings.map((x) => x.toFixed(1)).join(', ')} ms) waited for the execution`);
	});

	test('another session executes while one is busy', { timeout: 60000 }, async () => {
		await Promise.all([execPy(h, 'import time', { session: 'slow' }), execPy(h, '0', { session: 'quick' })]);
		let slowDone = 0;
		const slow = execPy(h, 'time.sleep(3)', { session: 'slow' }).then((r) => { slowDone = performance.now(); return r; });
		await new Promise((r) => setTimeout(r, 300));
		const q = await execPy(h, '6 * 7', { session: 'quick' });
		const quickDone = performance.now();
		assert.equal(q.sc.result, '42');
		await slow;
		assert.ok(quickDone < slowDone, 'the quick session waited for the slow one');
	});

	test('timeout: status timeout, exit 124, isError; the session and the server keep serving', { timeout: 60000 }, async () => {
		await execPy(h, 'import time\nbefore_timeout = 5', { session: 'to' });
		const t0 = performance.now();
		const r = await execPy(h, 'print("started", flush=True)\ntime.sleep(30)', { session: 'to', timeout_s: 1 });
		const wall = performance.now() - t0;
		assert.equal(r.res.isError, true, show(r.res));
		assert.equal(r.sc.status, 'timeout', show(r.sc));
		assert.equal(r.sc.exit_code, 124);
		assert.equal(r.head?.status, 'timeout', r.text.split('\n')[0]);
		assert.equal(r.head.exit, 124);
		assert.ok(wall < 15000, `the execution was not stopped: ${wall.toFixed(0)} ms for a 30 s sleep with timeout_s 1`);
		assert.ok(r.sc.stdout.includes('started'), `output before the timeout is kept: ${show(r.sc)}`);
		await h.client.ping();
		const after_ = await execPy(h, '1 + 1', { session: 'to' });
		assert.equal(after_.sc.status, 'ok', show(after_.sc));
		assert.equal(after_.sc.result, '2');
		const other = await execPy(h, '2 + 2', { session: 'par_a' });
		assert.equal(other.sc.result, '4');
	});

	test('timeout of a C loop that never checks for signals (sum(range(10**15))) is stopped too', { timeout: 60000 }, async () => {
		const t0 = performance.now();
		const r = await execPy(h, 'sum(range(10**15))', { session: 'to2', timeout_s: 1 });
		assert.equal(r.sc.status, 'timeout', show(r.sc));
		assert.equal(r.sc.exit_code, 124);
		assert.ok(performance.now() - t0 < 15000);
		const again = await execPy(h, '3', { session: 'to2' });
		assert.equal(again.sc.result, '3', show(again.sc));
	});

	test('timeout rolls the state back: names defined before survive (state rolled_back)', { timeout: 60000 }, async () => {
		await execPy(h, 'import time\nkeep_after_timeout = 99', { session: 'rb' });
		const r = await execPy(h, 'keep_after_timeout = -1\ntime.sleep(30)', { session: 'rb', timeout_s: 1 });
		assert.equal(r.sc.status, 'timeout', show(r.sc));
		assert.equal(r.sc.state, 'rolled_back', show(r.sc));
		const k = await execPy(h, 'keep_after_timeout', { session: 'rb' });
		assert.equal(k.sc.result, '99', show(k.sc));
	});

	test('a crash (segfault) rolls the state back, again and again', { timeout: 60000 }, async () => {
		// Session "rb" again: this file uses 8 sessions, the policy's max_sessions.
		await execPy(h, 'import ctypes\nkeep = 7', { session: 'rb' });
		for (let i = 1; i <= 5; i++) {
			const r = await execPy(h, 'keep = -1\nctypes.string_at(0)', { session: 'rb' });
			assert.equal(r.sc.status, 'crashed', `crash ${i}: ${show(r.sc)}`);
			assert.equal(r.sc.exit_code, 139, `crash ${i}: 128 + SIGSEGV: ${show(r.sc)}`);
			assert.equal(r.sc.state, 'rolled_back', `crash ${i}: ${show(r.sc)}`);
			assert.equal(r.res.isError, true);
			const k = await execPy(h, 'keep', { session: 'rb' });
			assert.equal(k.sc.result, '7', `after crash ${i}: ${k.text.split('\n')[0]} ${show(k.sc.error)}`);
		}
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});

// The zygote ends what a dead session left by a list of the live sessions
// and checkpoints that the server made before; on a loaded machine the
// zygote can be preempted for longer than a whole call.  PSM_TEST_ZYGOTE_
// SWEEP_MS pauses it inside each sweep: meanwhile the rolled-back session
// takes a checkpoint, runs a call and crashes again, so that checkpoint is
// an orphan the older list does not name.  Ended by it, the next rollback
// found no copy, and the state was lost without a word.
describe('a zygote slow to sweep', () => {
	let h;
	before(async () => { h = await startClient(newProject('slowsweep'), { structured: true, env: { PSM_TEST_ZYGOTE_SWEEP_MS: '400' } }); });
	after(async () => { await h?.close(); });

	test('does not end the checkpoint a rollback needs', { timeout: 90000 }, async () => {
		await execPy(h, 'import ctypes\nkeep = 7', { session: 'slow' });
		for (let i = 1; i <= 4; i++) {
			const r = await execPy(h, 'keep = -1\nctypes.string_at(0)', { session: 'slow' });
			assert.equal(r.sc.state, 'rolled_back', `crash ${i}: ${show(r.sc)}`);
			const k = await execPy(h, 'keep', { session: 'slow' });
			assert.equal(k.sc.result, '7', `after crash ${i}: ${k.text.split('\n')[0]} ${show(k.sc.error)}`);
		}
	});

	// A cell forks a child that keeps writing to a file, waits `pause`
	// seconds and crashes; `settle` ms later (the paused sweeps) the child
	// must have stopped: the file no longer grows.
	async function orphanThenCrash(beat, pause, settle) {
		const r = await execPy(h, [
			'import os, time, ctypes',
			'if os.fork() == 0:',
			'    os.setsid()',
			'    while True:',
			`        open(${JSON.stringify(beat)}, "a").write("x")`,
			'        time.sleep(0.05)',
			...(pause ? [`time.sleep(${pause})`] : []),
			'ctypes.string_at(0)',
		].join('\n'), { session: 'orphan' });
		assert.equal(r.sc.status, 'crashed', show(r.sc));
		const size = () => (fs.existsSync(path.join(h.root, beat)) ? fs.statSync(path.join(h.root, beat)).size : 0);
		await new Promise((res) => setTimeout(res, settle));
		const then = size();
		await new Promise((res) => setTimeout(res, 1000));
		assert.equal(size(), then, 'the orphan is still writing');
	}

	test('still ends what a crashed cell left running', { timeout: 90000 }, async () => {
		await orphanThenCrash('workspace/outputs/beat.txt', 0.3, 1500); // the sweep, paused 400 ms
	});

	test('also what a cell leaves an instant before it crashes (born in the sweep\'s own clock tick)', { timeout: 90000 }, async () => {
		await orphanThenCrash('workspace/outputs/beat2.txt', 0, 2500); // two sweeps, each paused 400 ms
	});
});
