// A warm call wakes only what it needs.  Between calls the server stops the
// session (SIGSTOP) and continues it for the next call (SIGCONT); the
// zygote, the session's parent, only reaps exits, and its learned warm-up
// has nothing to pause when no module is loading.  On a shared 2-core
// machine each needless wake-up of another process is CPU the call waits
// for, and it costs most after think time (cold caches).  So: the zygote
// sleeps through warm calls.  Counted from outside, in the zygote's own
// context switches (/proc/PID/status), not timed.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { newProject, startClient, execPy, descendants, sleep } from './lib.mjs';

function zygotes(pid) {
	return descendants(pid).filter((p) => {
		try {
			return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').startsWith('python-sandbox-mcp: zygote');
		} catch {
			return false;
		}
	});
}

/** The sum of the voluntary and involuntary context switches of pids. */
function switches(pids) {
	let n = 0;
	for (const p of pids) {
		const st = fs.readFileSync(`/proc/${p}/status`, 'utf8');
		for (const key of ['voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches']) {
			const m = st.match(new RegExp(`^${key}:\\s+(\\d+)`, 'm'));
			assert.ok(m, `no ${key} in /proc/${p}/status`);
			n += Number(m[1]);
		}
	}
	return n;
}

describe('the zygote sleeps through warm calls', () => {
	let h;
	before(async () => { h = await startClient(newProject('quietz')); });
	after(async () => { await h?.close(); });

	test('twenty `1+1` calls wake the zygote fewer than twenty times', { timeout: 120000 }, async () => {
		for (let i = 0; i < 5; i++) await execPy(h, '1+1');
		await sleep(1500); // what the first calls started in the background ends
		const z = zygotes(h.pid).map((p) => p.pid);
		assert.ok(z.length >= 1, 'a zygote process below the server');
		const before = switches(z);
		const calls = 20;
		for (let i = 0; i < calls; i++) {
			const r = await execPy(h, '1+1');
			assert.ok(!r.isError, 'the call succeeds');
		}
		const woke = switches(z) - before;
		// Before: a pause and an unpause message for the warm-up, and a
		// SIGCHLD for the session's stop and for its continue, about four
		// wake-ups per call.
		assert.ok(woke < calls, `the zygote woke ${woke} times during ${calls} warm calls (wanted fewer than ${calls})`);
	});
});
