// Process titles: an operator running `ps` sees what each process below the
// server is (the zygote, each session by name, each checkpoint with the
// session and the cell whose state it holds).  Read from outside, in
// /proc/PID/cmdline of the server's descendants.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { newProject, startClient, execPy, descendants, titleOf, sleep } from './lib.mjs';

function titles(pid) {
	const out = [];
	for (const p of descendants(pid)) {
		const t = titleOf(p.pid);
		if (t) out.push(t);
	}
	return out.sort();
}

/** Polls until every wanted title is there (a checkpoint is forked after the reply). */
async function waitTitles(pid, want, ms = 20000) {
	const end = Date.now() + ms;
	let got = titles(pid);
	while (!want.every((w) => got.includes(w)) && Date.now() < end) {
		await sleep(100);
		got = titles(pid);
	}
	return got;
}

describe('process titles', () => {
	let h;
	// A checkpoint after every call (PSM_TEST_REPLAY_MS=0): cheap cells are
	// otherwise only logged, and the checkpoint holds their state only once
	// the session has rested (test/integration/replay.test.mjs).
	before(async () => { h = await startClient(newProject('title'), { env: { PSM_TEST_REPLAY_MS: '0' } }); });
	after(async () => { await h?.close(); });

	test('ps shows the zygote, each session by name and each checkpoint with its cell', { timeout: 120000 }, async () => {
		const pid = h.pid;
		assert.ok(pid > 0, 'the server pid');
		for (let i = 0; i < 3; i++) await execPy(h, `x = ${i}`);
		await execPy(h, 'y = 1', { session: 'other' });
		const want = [
			'python-sandbox-mcp: zygote',
			'python-sandbox-mcp: session default',
			'python-sandbox-mcp: checkpoint default cell 3',
			'python-sandbox-mcp: session other',
			'python-sandbox-mcp: checkpoint other cell 1',
		];
		const got = await waitTitles(pid, want);
		for (const w of want) assert.ok(got.includes(w), `no process titled "${w}" among: ${JSON.stringify(got)}`);
	});

	test('a checkpoint that resumes after a timeout is titled as the session again', { timeout: 120000 }, async () => {
		const pid = h.pid;
		await execPy(h, 'import time; time.sleep(60)', { timeout_s: 1 });
		// The resumed copy makes a checkpoint of its own state (still cell 3's).
		const want = ['python-sandbox-mcp: session default', 'python-sandbox-mcp: checkpoint default cell 3'];
		const got = await waitTitles(pid, want);
		for (const w of want) assert.ok(got.includes(w), `no process titled "${w}" among: ${JSON.stringify(got)}`);
		assert.equal(got.filter((t) => t === 'python-sandbox-mcp: session default').length, 1, JSON.stringify(got));
	});
});
