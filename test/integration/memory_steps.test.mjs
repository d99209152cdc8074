// The count after a call may be a bound instead of a full look: when the
// watchdog's last full look at the session is recent, the session is one
// stopped process, and the bound (its own and its checkpoint's resident
// pages read again, what the look counted besides, and what every CPU of
// the machine can fill since) is within the limits.  These calls attack
// that bound: each is short (about a millisecond of work, less than the
// watchdog's first look of a call, 4 ms in) and back to back with the last,
// and only the sum of what they hold is over a limit.  Checked from
// outside: the host memory of the sandbox's processes in /proc, and the
// status of each call.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { SANITIZED, VALGRIND, startClient, newProject, writeFile, execPy, sandboxPssMb, show } from './lib.mjs';

describe('calls back to back, each under a limit, their sum over it', () => {
	test('1 MB of shared memory a call: every ok call leaves the session within memory_mb, the one that passes it is stopped', { timeout: 240000 }, async () => {
		// Shared mappings are not in RLIMIT_DATA: only the watchdog's count
		// stops them.  Under AddressSanitizer a session holds about 280 MB
		// more: the limit leaves room for that.
		const mb = SANITIZED ? 768 : 256;
		const h = await startClient(newProject('steps'), { structured: true, args: ['--memory', String(mb)] });
		try {
			const setup = await execPy(h, 'import mmap\nms = []\nstep = b"x" * (1 << 20)\nlen(ms)');
			assert.deepEqual([setup.sc.status, setup.sc.result], ['ok', '0'], show(setup.sc));
			const base = sandboxPssMb(h.pid);
			let stopped = null, held = 0;
			for (let i = 1; i <= 2 * mb && !stopped; i++) {
				const r = await execPy(h, 'm = mmap.mmap(-1, 1 << 20, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\nm.write(step)\nms.append(m)\nlen(ms)');
				if (r.sc.status !== 'ok') {
					stopped = r;
					break;
				}
				assert.deepEqual([r.sc.result, r.sc.state], [String(i), 'kept'], show(r.sc));
				held = i;
				// What the reply says was kept is within the limit: the
				// sandbox's memory above its size before the steps.
				const over = sandboxPssMb(h.pid) - base;
				if (!SANITIZED && !VALGRIND)
					assert.ok(over <= mb, `after ${i} ok calls of 1 MB the sandbox holds ${over.toFixed(0)} MB more, over memory_mb ${mb}`);
			}
			assert.ok(stopped, `${held} calls of 1 MB, all ok, under memory_mb ${mb}`);
			assert.deepEqual([stopped.sc.status, stopped.sc.state], ['memory', 'rolled_back'], show(stopped.sc));
			assert.ok(held <= mb, `${held} calls of 1 MB were ok under memory_mb ${mb}`);
			// Rolled back to the last ok call.
			const n = await execPy(h, 'len(ms)');
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', String(held)], show(n.sc));
		} finally {
			await h.close();
		}
	});

	test('threads started in a short call, over max_processes: stopped, as a look would', { timeout: 120000 }, async () => {
		const root = newProject('threads');
		const skill = writeFile(root, 'SKILL.md', fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8')
			.replace('max_processes: 64', 'max_processes: 8'));
		const h = await startClient(root, { structured: true, args: ['--skill', skill] });
		try {
			const setup = await execPy(h, 'import threading\nstop = threading.Event()\nts = []\n1');
			assert.equal(setup.sc.status, 'ok', show(setup.sc));
			// A warm call just before: the last full look is recent.
			assert.equal((await execPy(h, '1+1')).sc.result, '2');
			const r = await execPy(h, [
				'for i in range(12):',
				'    t = threading.Thread(target=stop.wait, daemon=True)',
				'    t.start()',
				'    ts.append(t)',
				'len(ts)',
			].join('\n'));
			assert.equal(r.sc.status, 'crashed', show(r.sc));
			assert.match(r.sc.error.message, /max_processes/, show(r.sc));
			assert.equal(r.sc.error.denied_by, 'limits', show(r.sc));
			const n = await execPy(h, 'len(ts)');
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '0'], show(n.sc));
		} finally {
			await h.close();
		}
	});
});
