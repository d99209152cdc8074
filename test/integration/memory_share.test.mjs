// memory_mb counts what the host holds for a session: a page its processes
// share (a forked worker's copy-on-write pages) once, and the pages its
// checkpoint keeps for a rollback (the old version of what the session
// rewrote since the copy was taken) too.  Counted by proportional shares
// (smaps_rollup), which a server may read when it has CAP_SYS_PTRACE over
// its sessions (root), when its zygote starts in a user namespace it owns
// (another user, with namespaces), or when its sessions stay dumpable
// (another user without namespaces, each session in a Landlock domain of
// its own).  Effects checked from outside: the host memory of the
// sandbox's processes in /proc.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

import { SANITIZED, startClient, newProject, execPy, sandboxPssMb, show, BIN, reachableArgv, memfdCell } from './lib.mjs';

const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const AS_ROOT = process.getuid() === 0;
// The sanitizers' shadow memory makes each process larger: more room, and
// larger arrays so that what must be over stays over.
const MB = SANITIZED ? 1212 : 700;
const FRAME = SANITIZED ? 500 : 300;
const ARRAY = SANITIZED ? 700 : 400;
const env = { PSM_TEST_REPLAY_MS: '0' }; // every call takes its checkpoint

const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];
const MODES = AS_ROOT
	? [['root', false], ['nobody', false], ['nobody', true]]
	: [['the current user', false], ['the current user', true]];
for (const [who, nsfree] of MODES) {
	describe(`memory counted as the host holds it (${nsfree ? 'without namespaces' : 'namespaces'}, the server run by ${who})`, () => {
		let h;
		before(async () => {
			const root = newProject(`share-${who.replace(/ /g, '')}${nsfree ? '-nsfree' : ''}`);
			let launch = {};
			if (who === 'nobody') {
				// nobody runs copies it can reach (the checkout may be private).
				spawnSync('chown', ['-R', '65534:65534', root]);
				launch = { command: 'setpriv', commandArgs: [...NOBODY, ...reachableArgv(nsfree ? [DOCKERRUN] : [])] };
			} else if (nsfree) {
				launch = { command: DOCKERRUN, commandArgs: [BIN] };
			}
			h = await startClient(root, { structured: true, env, args: ['--memory', String(MB)], ...launch });
		});
		after(async () => { await h?.close(); });

		test(`Pool(2) over a ${FRAME} MB frame under memory_mb ${MB}: its workers' shared pages count once`, { timeout: 180000 }, async () => {
			let r = await execPy(h, `import numpy as np\nbig = np.ones(${FRAME} << 17)\nbig.nbytes >> 20`);
			assert.equal(r.sc.status, 'ok', show(r.text));
			let peak = 0;
			const sampler = setInterval(() => { peak = Math.max(peak, sandboxPssMb(h.pid)); }, 200);
			try {
				r = await execPy(h, [
					'import time',
					'from multiprocessing import Pool',
					'def f(i):',
					'    time.sleep(1.5)',
					'    return float(big[i::1000].sum())',
					'with Pool(2) as p:',
					'    out = p.map(f, range(4))',
					'len(out)',
				].join('\n'), { timeout_s: 60 });
			} finally { clearInterval(sampler); }
			if (SANITIZED) {
				// The sanitizers' allocator (shadow, quarantine) gives each
				// forked worker memory of its own that no plain run has:
				// only the server's own work on the count is checked here.
				assert.ok(['ok', 'memory'].includes(r.sc.status), show(r.text));
				assert.equal((await execPy(h, '1 + 1')).sc.status, 'ok');
				return;
			}
			// Three processes of FRAME MB each by their resident pages: the
			// old count stopped this as "memory".
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.match(r.text, /\b4\b/);
			// What the host held meanwhile: the frame once, not three times.
			assert.ok(peak < FRAME * 2, `the sandbox held ${peak.toFixed(0)} MB`);
		});

		test(`a ${ARRAY} MB array rewritten in place: the checkpoint's old pages count, the call stops as memory and rolls back`, { timeout: 180000 }, async () => {
			let r = await execPy(h, `import numpy as np\na = np.ones(${ARRAY} << 17)\na.nbytes >> 20`, { session: 'rw' });
			assert.equal(r.sc.status, 'ok', show(r.text));
			// The session itself stays at ARRAY MB; with its checkpoint's
			// copy of the old pages it is twice that, over memory_mb.
			r = await execPy(h, 'a *= 2\nfloat(a[0])', { session: 'rw', timeout_s: 60 });
			if (SANITIZED && r.sc.status === 'ok') {
				// The sanitizers' numbers are not a plain run's (see above):
				// kept, the state must be the rewritten one.
				assert.match(r.text, /2\.0/, show(r.text));
				return;
			}
			assert.deepEqual([r.sc.status, r.sc.state], ['memory', 'rolled_back'], show(r.text));
			assert.match(r.text, /checkpoint's copy/, show(r.text));
			r = await execPy(h, 'float(a[0]), float(a[-1])', { session: 'rw' });
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.match(r.text, /\(1\.0, 1\.0\)/, 'the state before the call is back');
			// A quarter of it rewritten: within the limit, kept.
			r = await execPy(h, 'a[: a.size // 4] *= 2\nfloat(a[0])', { session: 'rw', timeout_s: 60 });
			assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.text));
		});
	});
}

// Root in a container that dropped CAP_SYS_PTRACE (setpriv takes it out of
// the bounding set, so the exec'd server has none): it lists a session's
// /proc/PID/fd by its DAC capabilities but reads no link there, so the
// memfds it counted were none.  Before: 400 MB of memfds under memory_mb
// 256 ended ok; now memfd_create is refused, and --check says so.
if (AS_ROOT) {
	describe('root without CAP_SYS_PTRACE', () => {
		const NOPTRACE = ['--bounding-set=-sys_ptrace'];
		test('memfds it cannot see are refused, not left uncounted', { timeout: 120000 }, async () => {
			const root = newProject('share-noptrace');
			const h = await startClient(root, { structured: true, args: ['--memory', '256'], command: 'setpriv', commandArgs: [...NOPTRACE, BIN] });
			try {
				const r = await execPy(h, memfdCell(), { timeout_s: 60 });
				assert.notEqual(r.sc.status, 'ok', show(r.text));
				assert.match(r.sc.error?.message || '', /memfd_create is refused in this sandbox/, show(r.text));
			} finally { await h.close(); }
			const c = spawnSync('setpriv', [...NOPTRACE, BIN, '--check', '--root', root], { encoding: 'utf8', timeout: 100000 });
			assert.match(c.stdout, /^memfds: memfd_create refused/m, c.stdout + c.stderr);
		});

		// In a container's default rules (no CAP_SYS_PTRACE, no
		// namespaces) its sessions run as nobody, whose smaps_rollup the
		// kernel refuses it: it cannot tell how much of the checkpoint's
		// memory is the copy's own.  Before, a 400 MB array rewritten in
		// place under memory_mb 700 ended ok while the host held both
		// versions (840 MB held by the sandbox).  Now the copy is given up for the call
		// (memory_mb holds) and the replies say rollback was not
		// available, and why.
		test(`a ${ARRAY} MB array rewritten in place under memory_mb ${MB} without namespaces: the copy it cannot count is given up, and the reply says so`, { timeout: 240000 }, async () => {
			const root = newProject('share-noptrace-copy');
			const h = await startClient(root, { structured: true, env, args: ['--memory', String(MB)], command: DOCKERRUN, commandArgs: [BIN] });
			try {
				let r = await execPy(h, `import numpy as np\na = np.ones(${ARRAY} << 17)\na.nbytes >> 20`);
				assert.equal(r.sc.status, 'ok', show(r.text));
				let peak = 0;
				const sampler = setInterval(() => { peak = Math.max(peak, sandboxPssMb(h.pid)); }, 20);
				try {
					r = await execPy(h, 'a *= 2\nfloat(a[0])', { timeout_s: 60 });
				} finally { clearInterval(sampler); }
				assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.text));
				assert.match(r.text, /rollback was not available for the rest of this call/, show(r.text));
				assert.match(r.text, /CAP_SYS_PTRACE/, show(r.text));
				assert.ok(peak < MB + 64, `the sandbox held ${peak.toFixed(0)} MB under memory_mb ${MB}`);
				// A call that then fails has nothing to go back to, and
				// says why; it never claims a rollback.
				r = await execPy(h, 'a *= 2\nimport time\ntime.sleep(120)', { timeout_s: 3 });
				assert.equal(r.sc.status, 'timeout', show(r.text));
				assert.notEqual(r.sc.state, 'rolled_back', show(r.text));
				assert.match(r.text, /given up during the call/, show(r.text));
			} finally { await h.close(); }
		});
	});
}

describe('--check says how memory is counted', () => {
	test('proportional shares as root and as another user, with namespaces and without', { timeout: 120000 }, () => {
		const root = newProject('share-check');
		const check = (argv) => {
			const r = spawnSync(argv[0], [...argv.slice(1), '--check', '--root', root], { encoding: 'utf8', timeout: 100000 });
			return r.stdout + r.stderr;
		};
		let out = check([BIN]);
		assert.match(out, /^memory counted by: proportional shares/m, out);
		assert.match(out, AS_ROOT ? /\(root: CAP_SYS_PTRACE\)/ : /started in a user namespace this server owns/, out);
		// Without namespaces (a container runtime's default rules).
		// (A container runtime's default rules drop CAP_SYS_PTRACE: root
		// then reads neither its sessions' shares nor their descriptors'
		// links; another user reads its own dumpable sessions.)
		out = check([DOCKERRUN, BIN]);
		assert.match(out, AS_ROOT ? /^memory counted by: resident pages .*a root without CAP_SYS_PTRACE/m
			: /^memory counted by: proportional shares .*the namespace-free mode.*stay dumpable/m, out);
		// memfds are refused in every mode (hostile_memory.test.mjs says why).
		assert.match(out, /^memfds: memfd_create refused/m, out);
		if (AS_ROOT) {
			spawnSync('chown', ['-R', '65534:65534', root]);
			out = check(['setpriv', ...NOBODY, ...reachableArgv()]);
			assert.match(out, /^memory counted by: proportional shares .*started in a user namespace this server owns/m, out);
			assert.match(out, /^memfds: memfd_create refused/m, out);
			// Without namespaces its sessions run as its own uid and stay
			// dumpable (each in a Landlock domain of its own): it reads
			// their smaps_rollup.
			out = check(['setpriv', ...NOBODY, ...reachableArgv([DOCKERRUN])]);
			assert.match(out, /^memory counted by: proportional shares .*the namespace-free mode.*stay dumpable/m, out);
			assert.match(out, /^memfds: memfd_create refused/m, out);
		}
	});
});
