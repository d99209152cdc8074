// What the OOM tests share: a memory cgroup of the test's own, the titles
// and scores of the server's processes, and one case (a session holding a
// large array, a call that fills the cgroup, checked from outside).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { newProject, execPy, descendants, titleOf, sleep, show, BIN, reachableArgv, SANITIZED } from './lib.mjs';
import { start, stateHome } from './persist_lib.mjs';

export const MB = 1048576;
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const NOBODY = 65534;

/** A memory cgroup of this test's own with `bytes` as its limit, below
 *  the one this process is in: { dir, limit(), usage(), peak(), kills(),
 *  cleanup() }. */
let made = 0;
export function memoryCgroup(bytes) {
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

/** The server's live descendants: pid -> { cmd, adj, score } (their
 *  title, oom_score_adj and oom_score). */
export function titles(serverPid) {
	const out = new Map();
	for (const p of descendants(serverPid)) {
		if (p.state === 'Z') continue;
		try {
			const cmd = titleOf(p.pid);
			if (!cmd) continue;
			const adj = Number(fs.readFileSync(`/proc/${p.pid}/oom_score_adj`, 'utf8'));
			const score = Number(fs.readFileSync(`/proc/${p.pid}/oom_score`, 'utf8'));
			out.set(p.pid, { pid: p.pid, cmd, adj, score });
		} catch { /* gone */ }
	}
	return out;
}

/* The array is 160 MB; the cgroup's limit leaves room for it and the
 * zygote, and 80 MB more, not 160.  A rewrite in place copies every page its
 * copy shares (the copy and the session then map as much: the copy's raised
 * oom_score_adj tips the kernel's choice to it, and the call goes on); a
 * new array of that size makes the session the larger by all of it (the
 * kernel takes the session, which is rolled back to its copy). */
export const REWRITE = { code: 'a += 1\nint(a[0])', gone: 'checkpoint default cell 1', reply: ['ok', 'kept'], held: '2' };
export const NEW_ARRAY = { code: 'b = np.ones(160 * 2**20 // 8)\nint(a[0])', gone: 'session default', reply: ['crashed', 'rolled_back'], held: '1' };
/* The rewrite where no score is raised (a server without the privilege to
 * write the copy's): the copy and the session map about as much, and the
 * kernel takes the session, which is rolled back to its copy. */
export const REWRITE_UNRAISED = { ...REWRITE, gone: NEW_ARRAY.gone, reply: NEW_ARRAY.reply, held: NEW_ARRAY.held };

/** How the server of a combo ({ mode: 'namespaces' | 'no namespaces', who:
 *  'root' | 'nobody' }) is started inside the cgroup `dir`: { command,
 *  commandArgs } for start(), and the owner of its files. */
function launch(combo, dir, root) {
	const nobody = combo.who === 'nobody';
	const pre = combo.mode === 'namespaces' ? [] : [DOCKERRUN];
	let argv = [...pre, BIN];
	if (nobody) {
		spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root]);
		argv = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...reachableArgv(pre)];
	}
	// Into the cgroup as root, then (as nobody, through setpriv) the server.
	return { command: 'sh', commandArgs: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, ...argv] };
}

/** One case: a server of `combo` in a memory cgroup `cgs` keeps for its
 *  clean-up; the session makes a 160 MB array, the limit is set 80 MB
 *  above what the cgroup then holds, and `c.code` runs.  `raised`: whether
 *  the copy's oom_score_adj is raised in this combo (else every score is
 *  as it came, and `c` says what the kernel then takes).  Checked from
 *  outside: the scores before the call (the server's the lowest), which
 *  process the kernel took, that the server lives, that the reply says what
 *  the session then holds, that a new copy rolls a timeout back, and the
 *  session's score after each rollback; with `saver`, the saver's score
 *  too, once the session rests (about 7 s more). */
export async function oomCase(t, cgs, combo, c, { raised = true, saver = false } = {}) {
	assert.equal(process.getuid(), 0, 'this test makes a memory cgroup: run the suite as root (CI does)');
	// Room at first; once the array is in, the limit leaves 80 MB (what
	// the session then holds depends on the build: a sanitizer build's
	// sessions are larger).
	const cg = memoryCgroup(2048 * MB);
	cgs.push(cg);
	const root = newProject('oom');
	const h = await start(root, stateHome(combo.who === 'nobody' ? { uid: NOBODY, gid: NOBODY } : undefined),
		launch(combo, cg.dir, root));
	const server = h.pid;
	// The sandbox cannot raise (or lower) a score itself: /proc is not its
	// to write (the session's score is checked from outside below).
	let r = await execPy(h, "import numpy as np\na = np.ones(160 * 2**20 // 8)\ntry:\n"
		+ "    open('/proc/self/oom_score_adj', 'w').write('60'); w = 'written'\n"
		+ "except OSError as e:\n    w = type(e).__name__\n(int(a[0]), w)", {}, { timeout: 120000 });
	assert.deepEqual([r.sc.status, r.sc.result], ['ok', "(1, 'PermissionError')"], show(r.sc));
	await sleep(500); // the copy of that state is forked after the reply
	const limit = cg.usage() + 80 * MB;
	cg.limit(limit);
	t.diagnostic(`after the array: ${(cg.usage() / MB).toFixed(0)} MB; the limit now ${(limit / MB).toFixed(0)} MB`);
	// The copy of the state is taken after the reply.
	let before;
	for (let i = 0; i < 100; i++) {
		before = titles(server);
		// Raised once the server has accepted it (a moment after its fork).
		const v = [...before.values()];
		if (v.some((p) => /checkpoint default cell 1$/.test(p.cmd) && (p.adj > 0 || !raised)) && v.some((p) => /session default$/.test(p.cmd))) break;
		await sleep(100);
	}
	if (!raised) {
		// Where nothing is raised, a moment more for a raise to show.
		await sleep(500);
		before = titles(server);
	}
	const of = (re) => [...before.values()].filter((p) => re.test(p.cmd));
	const adj = (re) => of(re).map((p) => p.adj);
	assert.deepEqual(adj(/checkpoint default/), [raised ? 50 : 0], show([...before.values()]));
	assert.deepEqual(adj(/session default$/), [0], show([...before.values()]));
	assert.ok(adj(/: zygote$/).every((a) => a === 0));
	// The server is never the kernel's first choice: its score (its own
	// memory, its oom_score_adj) is no higher than that of any process
	// below it, and below the session's, the copy's and the zygote's (the
	// one that holds Python; with namespaces a small one waits above it)
	// while the session holds its array.
	const own = Number(fs.readFileSync(`/proc/${server}/oom_score`, 'utf8'));
	const all = [...before.values()];
	t.diagnostic(`oom_score: the server ${own}; ${all.map((p) => `${p.cmd.replace(/^python-sandbox-mcp: /, '')} ${p.score}`).join(', ')}`);
	// Under AddressSanitizer the server's own memory is mostly the
	// sanitizer's (shadow, quarantine of what it freed): it may pass a
	// process that holds next to nothing (the small zygote that waits, at
	// the lowest score) by the kernel's last unit (667 against 666, seen).
	// The processes that hold the memory are compared in every build.
	const least = Math.min(...all.map((p) => p.score));
	for (const p of all)
		if (!SANITIZED || p.score > least)
			assert.ok(own <= p.score, `the server's oom_score ${own} is above ${p.cmd}'s ${p.score}`);
	const top = (re) => Math.max(...of(re).map((p) => p.score));
	for (const re of [/checkpoint default/, /session default$/, /: zygote$/])
		assert.ok(own < top(re), `the server's oom_score ${own} is below ${re}'s ${top(re)}`);
	const k0 = cg.kills();
	r = await execPy(h, c.code, {}, { timeout: 120000 });
	// The process the kernel took may still be exiting when the reply
	// comes (unmapping a large process takes a while, longer under the
	// sanitizers): it is gone once it is, or a zombie.
	const goneNow = () => { const now = titles(server); return [...before.entries()].filter(([pid]) => !now.has(pid)).map(([, p]) => p.cmd); };
	let gone = goneNow();
	for (let i = 0; i < 50 && gone.length === 0 && cg.kills() > k0; i++) {
		await sleep(100);
		gone = goneNow();
	}
	t.diagnostic(`peak ${(cg.peak() / MB).toFixed(0)} MB; OOM kills: ${cg.kills() - k0}; gone: ${JSON.stringify(gone)}; reply: ${r.sc.status} ${r.sc.state}`);
	assert.ok(cg.kills() > k0, 'the cgroup ran out of memory (the test must make it)');
	process.kill(server, 0); // the server lives
	assert.deepEqual(gone, [`python-sandbox-mcp: ${c.gone}`], 'the process the kernel took');
	// What the reply said is what the session holds.
	const held = await execPy(h, "int(a[0]) if 'a' in globals() else None", {}, { timeout: 120000 });
	assert.equal(held.sc.status, 'ok', show(held.sc));
	assert.deepEqual([r.sc.status, r.sc.state], c.reply, show(r.text));
	assert.equal(held.sc.result, c.held, show(held.sc));
	// A session resumed from its copy has the score the session had, not
	// the copy's raised one (or it and each copy it forks would tie).
	// (The session carries its copy's title for the instant of a fork.)
	const sessionAdj = async () => {
		let a = [];
		for (let i = 0; i < 50 && a.length !== 1; i++, await sleep(100))
			a = [...titles(server).values()].filter((p) => /session default$/.test(p.cmd)).map((p) => p.adj);
		return a;
	};
	assert.deepEqual(await sessionAdj(), [0], 'the session\'s oom_score_adj after the call');
	// Its copy was taken again: a timeout now rolls back to that state
	// (a cell that writes one page: another rewrite would fill the
	// cgroup again, and the copy killed during a call that then fails
	// loses the state, as its reply says).
	const tmo = await execPy(h, 'a[0] = 7\nimport time\ntime.sleep(60)', { timeout_s: 2 });
	assert.deepEqual([tmo.sc.status, tmo.sc.state], ['timeout', 'rolled_back'], show(tmo.sc));
	const back = await execPy(h, 'int(a[0])');
	assert.equal(back.sc.result, held.sc.result, show(back.sc));
	assert.deepEqual(await sessionAdj(), [0], 'the session\'s oom_score_adj after a timeout rolled it back');
	if (saver) {
		// The saver, the first to offer: a save starts once the session
		// rests, and a value whose pickling takes 2 s (code of the
		// session's runs in the saver) keeps it alive long enough to read.
		cg.limit(2048 * MB);
		r = await execPy(h, 'import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(2)\n        return (int, (0,))\nslow = Slow()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		// The last sight of it (raised a moment after its fork).
		let sv = [];
		const look = () => {
			const now = [...titles(server).values()].filter((p) => /: saver default cell \d+$/.test(p.cmd));
			if (now.length) sv = now;
		};
		for (let i = 0; i < 300 && !sv.some((p) => p.adj > 0 || !raised); i++, await sleep(100)) look();
		if (!raised) {
			await sleep(500);
			look();
		}
		assert.deepEqual(sv.map((p) => p.adj), [raised ? 1000 : 0], 'the saver\'s oom_score_adj');
	}
	await h.close();
}
