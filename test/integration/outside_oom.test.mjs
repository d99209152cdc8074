// The kernel's OOM killer in a memory cgroup too small for what a session
// does: the server runs in a cgroup of its own with a memory limit, a
// session holds a large array (its checkpoint copy shares it), and a call
// rewrites it in place, so that every page is copied and the cgroup fills.
// The kernel kills something; checked from outside: which process it took
// (by the titles of the processes that are gone), that the server lives,
// that the reply says what the session then holds (the next call reads the
// array back), and that the oom_score_adj of the copy and the saver are
// raised while the session's and the zygote's are not.  Needs root and a
// memory cgroup to write (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes), as the CI machine has.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { newProject, execPy, descendants, sleep, show, BIN } from './lib.mjs';
import { start, stateHome } from './persist_lib.mjs';

/** A memory cgroup of this test's own with `bytes` as its limit, below
 *  the one this process is in: { dir, events(), cleanup() }. */
let made = 0;
function memoryCgroup(bytes) {
	const name = `psm-oom-${process.pid}-${++made}`;
	const lines = fs.readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
	const v1 = lines.map((l) => l.split(':')).find((f) => f[1].split(',').includes('memory'));
	let dir, limitFile, eventsFile;
	if (v1) {
		dir = path.join('/sys/fs/cgroup/memory', v1[2], name);
		limitFile = 'memory.limit_in_bytes';
		eventsFile = 'memory.oom_control';
	} else {
		const v2 = lines.find((l) => l.startsWith('0::')).slice(3);
		dir = path.join('/sys/fs/cgroup', v2, name);
		limitFile = 'memory.max';
		eventsFile = 'memory.events';
	}
	fs.mkdirSync(dir);
	const limit = (b) => fs.writeFileSync(path.join(dir, limitFile), String(b));
	limit(bytes);
	// No swap to spill into (v2: memory.swap.max; v1 has none to cap
	// where the machine has no swap).
	try { fs.writeFileSync(path.join(dir, 'memory.swap.max'), '0'); } catch { /* v1, or no swap accounting */ }
	return {
		dir,
		limit,
		usage: () => Number(fs.readFileSync(path.join(dir, v1 ? 'memory.usage_in_bytes' : 'memory.current'), 'utf8')),
		peak: () => { try { return Number(fs.readFileSync(path.join(dir, v1 ? 'memory.max_usage_in_bytes' : 'memory.peak'), 'utf8')); } catch { return -1; } },
		kills: () => Number((fs.readFileSync(path.join(dir, eventsFile), 'utf8').match(/oom_kill (\d+)/) || [0, 0])[1]),
		cleanup: () => { for (let i = 0; i < 50; i++) { try { fs.rmdirSync(dir); return; } catch { /* busy */ } } },
	};
}

function titles(serverPid) {
	const out = new Map();
	for (const p of descendants(serverPid)) {
		if (p.state === 'Z') continue;
		try {
			const cmd = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replace(/\0+$/, '').replace(/\0/g, ' ');
			const adj = Number(fs.readFileSync(`/proc/${p.pid}/oom_score_adj`, 'utf8'));
			out.set(p.pid, { cmd, adj });
		} catch { /* gone */ }
	}
	return out;
}

const MB = 1048576;

/* The array is 160 MB; the cgroup's limit leaves room for it and the
 * zygote, and 80 MB more, not 160.  A rewrite in place copies every page its
 * copy shares (the copy and the session then map as much: the copy's raised
 * oom_score_adj tips the kernel's choice to it, and the call goes on); a
 * new array of that size makes the session the larger by all of it (the
 * kernel takes the session, which is rolled back to its copy). */
const CASES = [
	{ title: 'a large rewrite: the kernel takes the copy, the call goes on, a new copy is taken',
		code: 'a += 1\nint(a[0])', gone: 'checkpoint default cell 1', reply: ['ok', 'kept'], held: '2' },
	{ title: 'a large new array: the kernel takes the session, which is rolled back to its copy',
		code: 'b = np.ones(160 * 2**20 // 8)\nint(a[0])', gone: 'session default', reply: ['crashed', 'rolled_back'], held: '1' },
];

describe('the OOM killer in a small memory cgroup', () => {
	const cgs = [];
	after(() => { for (const c of cgs) c.cleanup(); });

	for (const c of CASES) test(c.title, { timeout: 180000 }, async (t) => {
		assert.equal(process.getuid(), 0, 'this test makes a memory cgroup: run the suite as root (CI does)');
		// The array is 160 MB; the session with numpy about 230 MB, the zygote
		// about 65 MB more; a rewrite in place copies every page the copy
		// shares: 160 MB more than the limit leaves.
		// Room at first; once the array is in, the limit leaves 80 MB
		// (what the session then holds depends on the build: a sanitizer
		// build's sessions are larger).
		const cg = memoryCgroup(2048 * MB);
		cgs.push(cg);
		const root = newProject('oom');
		const h = await start(root, stateHome(), {
			command: 'sh',
			commandArgs: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg.dir, BIN],
		});
		const server = h.pid;
		let r = await execPy(h, 'import numpy as np\na = np.ones(160 * 2**20 // 8)\nint(a[0])', {}, { timeout: 120000 });
		assert.deepEqual([r.sc.status, r.sc.result], ['ok', '1'], show(r.sc));
		await sleep(500); // the copy of that state is forked after the reply
		const limit = cg.usage() + 80 * MB;
		cg.limit(limit);
		t.diagnostic(`after the array: ${(cg.usage() / MB).toFixed(0)} MB; the limit now ${(limit / MB).toFixed(0)} MB`);
		// The copy of that state is taken after the reply.
		let before;
		for (let i = 0; i < 100; i++) {
			before = titles(server);
			// Raised once the server has accepted it (a moment after its fork).
			const v = [...before.values()];
			if (v.some((p) => /checkpoint default cell 1$/.test(p.cmd) && p.adj > 0) && v.some((p) => /session default$/.test(p.cmd))) break;
			await sleep(100);
		}
		const adj = (re) => [...before.values()].filter((p) => re.test(p.cmd)).map((p) => p.adj);
		assert.deepEqual(adj(/checkpoint default/), [50], show([...before.values()]));
		assert.deepEqual(adj(/session default/), [0]);
		assert.ok(adj(/: zygote$/).every((a) => a === 0));
		const k0 = cg.kills();
		r = await execPy(h, c.code, {}, { timeout: 120000 });
		const after1 = titles(server);
		const gone = [...before.entries()].filter(([pid]) => !after1.has(pid)).map(([, p]) => p.cmd);
		t.diagnostic(`peak ${(cg.peak() / MB).toFixed(0)} MB; OOM kills: ${cg.kills() - k0}; gone: ${JSON.stringify(gone)}; reply: ${r.sc.status} ${r.sc.state}`);
		assert.ok(cg.kills() > k0, 'the cgroup ran out of memory (the test must make it)');
		process.kill(server, 0); // the server lives
		assert.deepEqual(gone, [`python-sandbox-mcp: ${c.gone}`], 'the process the kernel took');
		// What the reply said is what the session holds.
		const held = await execPy(h, "int(a[0]) if 'a' in globals() else None", {}, { timeout: 120000 });
		assert.equal(held.sc.status, 'ok', show(held.sc));
		assert.deepEqual([r.sc.status, r.sc.state], c.reply, show(r.text));
		assert.equal(held.sc.result, c.held, show(held.sc));
		// Its copy was taken again: a timeout now rolls back to that state
		// (a cell that writes one page: another rewrite would fill the
		// cgroup again, and the copy killed during a call that then fails
		// loses the state, as its reply says).
		const tmo = await execPy(h, 'a[0] = 7\nimport time\ntime.sleep(60)', { timeout_s: 2 });
		assert.deepEqual([tmo.sc.status, tmo.sc.state], ['timeout', 'rolled_back'], show(tmo.sc));
		const back = await execPy(h, 'int(a[0])');
		assert.equal(back.sc.result, held.sc.result, show(back.sc));
		await h.close();
	});
});
