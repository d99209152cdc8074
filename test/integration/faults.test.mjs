// Sessions that never lose work: rollback on timeout, cancellation,
// crash, the memory limit and a kill from outside; limits; processes left
// behind; the zygote killed; a full disk.  Effects are checked from outside
// (/proc, the file system).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, callTool, writeFile, descendants, waitGone, sleep, show, BIN, projectWith } from './lib.mjs';


/** Host pid of the sandboxed process whose pid inside the jail is nsPid. */
function hostPid(serverPid, nsPid) {
	for (const p of descendants(serverPid)) {
		let status;
		try { status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'); } catch { continue; }
		const m = status.match(/^NSpid:\s+(.*)$/m);
		if (m && m[1].trim().split(/\s+/).pop() === String(nsPid)) return p.pid;
	}
	return null;
}

/** hostPid, but only while the process still runs: the session is frozen
 *  between calls, so what the zygote ended below it stays a zombie until
 *  the session reaps it when its next call starts. */
function runningPid(serverPid, nsPid) {
	const p = hostPid(serverPid, nsPid);
	if (p === null) return null;
	try {
		const s = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
		return s.slice(s.lastIndexOf(')') + 2)[0] === 'Z' ? null : p;
	} catch { return null; }
}

describe('rollback', () => {
	let h;
	before(async () => {
		h = await startClient(newProject('faults'), { structured: true });
		const r = await execPy(h, 'import numpy as np, time, os, ctypes\ndf_rows = 1234\narr = np.arange(10)');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		await execPy(h, 'df_rows'); // a reply after the state: the checkpoint holds it
	});
	after(async () => { await h?.close(); });

	async function stateIntact(what) {
		const k = await execPy(h, 'df_rows, int(arr.sum())');
		assert.equal(k.sc.result, '(1234, 45)', `after ${what}: ${show(k.sc)}`);
		assert.equal(k.sc.state, 'kept');
	}

	test('timeout: stopped, rolled back, exit 124', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df_rows = 0\nwhile True: pass', { timeout_s: 1 });
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['timeout', 124, 'rolled_back'], show(r.sc));
		assert.match(r.text, /rolled back/);
		await stateIntact('a timeout');
	});

	test('crash in C (ctypes.string_at(0)): 128+SIGSEGV, rolled back', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df_rows = 0\nctypes.string_at(0)');
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['crashed', 139, 'rolled_back'], show(r.sc));
		await stateIntact('a segfault');
	});

	test('abort(): 128+SIGABRT, rolled back', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df_rows = 0\nos.abort()');
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['crashed', 134, 'rolled_back'], show(r.sc));
		await stateIntact('an abort');
	});

	test('a syscall seccomp kills for (x32 getpid): 128+SIGSYS, rolled back', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df_rows = 0\nctypes.CDLL(None).syscall(0x40000000 + 39)');
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['crashed', 159, 'rolled_back'], show(r.sc));
		await stateIntact('a SIGSYS');
	});

	test('the memory limit: status memory, exit 137, rolled back', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df_rows = 0\nbig = bytearray(64 * 1024**3)');
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['memory', 137, 'rolled_back'], show(r.sc));
		assert.equal(r.sc.error.denied_by, 'limits', show(r.sc.error));
		await stateIntact('the memory limit');
	});

	test('SIGKILL from outside while a cell runs: reported as a crash, rolled back', { timeout: 60000 }, async () => {
		const me = await execPy(h, 'os.getpid()');
		const nsPid = Number(me.sc.result);
		const pending = execPy(h, 'df_rows = 0\ntime.sleep(20)');
		await sleep(700);
		const pid = hostPid(h.pid, nsPid);
		assert.ok(pid, 'the session process is found below the server');
		process.kill(pid, 'SIGKILL');
		const r = await pending;
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['crashed', 137, 'rolled_back'], show(r.sc));
		await stateIntact('a kill from outside');
	});

	test('a Python exception is not a rollback: what ran before it stays', async () => {
		const r = await execPy(h, 'partial = 5\n1/0');
		assert.equal(r.sc.status, 'error');
		assert.equal(r.sc.state, 'kept');
		assert.equal((await execPy(h, 'partial')).sc.result, '5');
	});

	test('ping and another session answer while a cell runs; progress every few seconds for a 12 s cell', { timeout: 60000 }, async () => {
		const seen = [];
		const t0 = Date.now();
		const long = callTool(h, 'execute_python', { code: 'for i in range(24):\n    print("tick", i, flush=True)\n    time.sleep(0.5)' },
			{ onprogress: (p) => seen.push({ ...p, at: Date.now() - t0 }) });
		await sleep(500);
		const p0 = Date.now();
		await h.client.ping();
		assert.ok(Date.now() - p0 < 1000, 'ping is answered at once');
		const other = await execPy(h, '6 * 7', { session: 'beside' });
		assert.equal(other.sc.result, '42');
		const res = await long;
		assert.equal(res.isError, false);
		assert.ok(seen.length >= 2, `at least 2 progress notifications in 12 s: ${show(seen)}`);
		for (let i = 1; i < seen.length; i++) {
			assert.ok(seen[i].progress > seen[i - 1].progress, 'progress increases');
			assert.ok(seen[i].at - seen[i - 1].at <= 5500, 'at least every 5 s');
		}
		assert.ok(seen.every((p) => /tick \d+/.test(p.message)), `the latest line: ${show(seen)}`);
	});

	test('a process the code forks and leaves running is ended when the call ends', { timeout: 30000 }, async () => {
		const r = await execPy(h, 'child = os.fork()\nif child == 0:\n    time.sleep(1000)\n    os._exit(0)\nchild');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		// Ended before the reply (reaped when the next call starts).
		assert.equal(runningPid(h.pid, r.sc.result), null, 'the child no longer runs');
		const gone = await execPy(h, 'try:\n    os.kill(child, 0); alive = True\nexcept ProcessLookupError:\n    alive = False\nalive');
		assert.equal(gone.sc.result, 'False');
	});
});

// Attack: code forks a process that leaves the session's process group
// (setpgid), or its session (setsid) and orphans itself with a double fork,
// so that it runs on after the call, after a timeout or after a reset,
// writing into the workspace.  Each writes a heartbeat file; after the call
// it must stop growing and the process must be gone.
describe('processes that try to outlive their call', () => {
	let h, root;
	before(async () => {
		root = newProject('leftovers');
		h = await startClient(root, { structured: true });
		assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
	});
	after(async () => { await h.client.close(); });

	/** Python that starts the escapee and leaves its pid in `name`.pid. */
	const escapee = (name, how) => [
		'import os, time',
		'r, w = os.pipe()',
		'c = os.fork()',
		'if c == 0:',
		how === 'setsid' ? '    os.setsid()' : '    os.setpgid(0, 0)',
		'    if os.fork() == 0:',
		`        open("workspace/${name}.pid", "w").write(str(os.getpid()))`,
		'        os.write(w, b"x")',
		'        while True:',
		`            with open("workspace/${name}.beat", "a") as f: f.write("x")`,
		'            time.sleep(0.02)',
		'    os._exit(0)',
		'os.read(r, 1)',
		'os.waitpid(c, 0)',
	].join('\n');
	const size = (f) => { try { return fs.statSync(path.join(root, 'workspace', f)).size; } catch { return -1; } };
	const nsPid = (name) => Number(fs.readFileSync(path.join(root, 'workspace', `${name}.pid`), 'utf8'));

	/** The heartbeat has stopped and the process is gone from /proc, within 5 s. */
	async function assertEnded(name) {
		const pid = nsPid(name);
		const end = Date.now() + 5000;
		let last = size(name + '.beat');
		for (;;) {
			await sleep(200);
			const now = size(name + '.beat');
			if (now === last && hostPid(h.pid, pid) === null) break;
			last = now;
			assert.ok(Date.now() < end, `${name}: the process ${pid} still runs (heartbeat ${now} bytes)`);
		}
		await sleep(300);
		assert.equal(size(name + '.beat'), last, `${name}: the heartbeat stopped for good`);
	}

	for (const how of ['setsid', 'setpgid']) {
		test(`${how} + double fork: ended when the call ends`, { timeout: 30000 }, async () => {
			const r = await execPy(h, escapee(`call-${how}`, how));
			assert.equal(r.sc.status, 'ok', show(r.sc));
			// Ended before the reply comes.
			assert.equal(runningPid(h.pid, nsPid(`call-${how}`)), null, 'ended when the reply comes');
			const before_ = size(`call-${how}.beat`);
			await sleep(300);
			assert.equal(size(`call-${how}.beat`), before_, 'no heartbeat after the call');
		});
	}

	test('a thread the code leaves running does not run between calls', { timeout: 30000 }, async () => {
		const r = await execPy(h, [
			'import threading, time',
			'def beat():',
			'    while True:',
			'        with open("workspace/thread.beat", "a") as f: f.write("x")',
			'        time.sleep(0.01)',
			'threading.Thread(target=beat, daemon=True).start()',
			'time.sleep(0.2)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		// Right after the reply the thread may still take a step: a system
		// call it had under way without the GIL completes, and taking the
		// checkpoint runs a few lines of Python, which may let it through
		// once.  After that it waits for the next call.
		await sleep(300);
		const idle = size('thread.beat');
		assert.ok(idle > 0, 'the thread ran during the call');
		await sleep(600);
		assert.equal(size('thread.beat'), idle, 'nothing was written between calls');
		await execPy(h, 'time.sleep(0.2)');
		assert.ok(size('thread.beat') > idle, 'the thread goes on in the next call');
	});

	for (const [what, waker] of [
		['a thread in time.sleep (waiting for the lock of the interpreter, it wakes every 5 ms)', [
			'def beat():',
			'    while True: time.sleep(0.01)',
			'threading.Thread(target=beat, daemon=True).start()',
		]],
		['a signal timer every 4 ms', [
			'signal.signal(signal.SIGALRM, lambda *a: None)',
			'signal.setitimer(signal.ITIMER_REAL, 0.004, 0.004)',
		]],
	]) {
		test(`${what}, and a thread still hashing after the cell: the call ends ok, the state is kept`, { timeout: 60000 }, async () => {
			// The server freezes a session once two looks close together
			// find every thread asleep with no CPU used in between.  The
			// hashing thread, busy at the first looks, made the looks
			// further apart (up to 20 ms), and the process woke more often
			// than that, so it was never seen asleep twice: a call that had
			// ended ran into its timeout (30 s by default) and lost its
			// state, and so did a checkpoint taken after the reply.
			const session = `periodic-${what.length}`;
			const r = await execPy(h, [
				'import signal, threading, hashlib, time',
				...waker,
				'data = b"x" * (64 << 20)',
				'threading.Thread(target=lambda: hashlib.sha256(data).digest(), daemon=True).start()',
				'v = 5',
			].join('\n'), { session, timeout_s: 10 });
			assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'new'], show(r.sc));
			for (let i = 0; i < 3; i++) {
				const n = await execPy(h, 'v += 1\nv', { session, timeout_s: 10 });
				assert.deepEqual([n.sc.status, n.sc.state, n.sc.result], ['ok', 'kept', String(6 + i)], show(n.sc));
			}
		});
	}

	test('setsid + double fork, then a timeout: ended, and the state rolled back', { timeout: 30000 }, async () => {
		const r = await execPy(h, escapee('timeout', 'setsid') + '\nkept = 8\ntime.sleep(100)', { timeout_s: 1 });
		assert.deepEqual([r.sc.status, r.sc.state], ['timeout', 'rolled_back'], show(r.sc));
		await assertEnded('timeout');
		assert.equal((await execPy(h, 'kept')).sc.result, '7');
	});

	test('setsid + double fork, then a crash: ended, and the state rolled back', { timeout: 30000 }, async () => {
		const r = await execPy(h, escapee('crash', 'setsid') + '\nkept = 9\nos.abort()');
		assert.deepEqual([r.sc.status, r.sc.state], ['crashed', 'rolled_back'], show(r.sc));
		await assertEnded('crash');
		assert.equal((await execPy(h, 'kept')).sc.result, '7');
	});

	test('in a session\'s first call (no checkpoint to resume), then a timeout: ended', { timeout: 30000 }, async () => {
		for (const how of ['setsid', 'setpgid']) {
			const r = await execPy(h, escapee(`first-${how}`, how) + '\ntime.sleep(100)', { session: `first-${how}`, timeout_s: 1 });
			assert.deepEqual([r.sc.status, r.sc.state], ['timeout', 'new'], show(r.sc));
			await assertEnded(`first-${how}`);
		}
		assert.equal((await execPy(h, 'kept')).sc.result, '7', 'the default session is untouched');
	});
});

describe('limits', () => {
	test('max_file_mb: a larger file is refused with EFBIG, denied_by limits', { timeout: 60000 }, async () => {
		const [root, skill] = projectWith('fsize', [['max_file_mb: 512', 'max_file_mb: 1']]);
		const h = await startClient(root, { structured: true, args: ['--skill', skill] });
		try {
			const r = await execPy(h, 'with open("workspace/big.bin", "wb") as f:\n    f.write(b"x" * (2 * 1024 * 1024))');
			assert.equal(r.sc.status, 'error', show(r.sc));
			assert.match(r.sc.error.message, /File too large|Errno 27/);
			assert.equal(r.sc.error.denied_by, 'limits');
			assert.equal((await execPy(h, '1 + 1')).sc.result, '2', 'the session survives');
		} finally { await h.close(); }
	});

	test('checkpoint: false: a failed call starts a new session and says so', { timeout: 60000 }, async () => {
		const [root, skill] = projectWith('nockpt', [['checkpoint: true', 'checkpoint: false']]);
		const h = await startClient(root, { structured: true, args: ['--skill', skill] });
		try {
			await execPy(h, 'x = 1');
			const r = await execPy(h, 'import time\ntime.sleep(10)', { timeout_s: 1 });
			assert.deepEqual([r.sc.status, r.sc.state], ['timeout', 'new'], show(r.sc));
			assert.match(r.text, /checkpoint is false/);
			const x = await execPy(h, "'x' in globals()");
			assert.equal(x.sc.result, 'False');
		} finally { await h.close(); }
	});
});

describe('faults of the machinery', () => {
	test('the zygote killed from outside: a new one is warmed, the next call works and says the session is new', { timeout: 60000 }, async () => {
		const h = await startClient(newProject('zyg'), { structured: true });
		try {
			await execPy(h, 'x = 1');
			const all = descendants(h.pid);
			const kids = all.filter((p) => p.ppid === h.pid);
			assert.ok(kids.length >= 1);
			for (const k of kids) process.kill(k.pid, 'SIGKILL');
			// Everything inside the jail ends with it (pid namespace).
			assert.deepEqual((await waitGone(all, 5000)).map((p) => p.pid), []);
			const r = await execPy(h, "'x' in globals()");
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.equal(r.sc.state, 'new');
			assert.equal(r.sc.result, 'False');
		} finally { await h.close(); }
	});

	test('a full disk: a clear ENOSPC error, the session and the server survive', { timeout: 60000 }, async () => {
		// A size-capped tmpfs over the workspace, in a mount namespace of the
		// server's own (needs root, as CI runs).
		assert.equal(process.getuid(), 0, 'this test mounts a tmpfs: run the suite as root (CI does)');
		const root = newProject('full');
		const ws = path.join(root, 'workspace');
		fs.mkdirSync(ws);
		const h = await startClient(root, {
			structured: true,
			command: 'unshare',
			commandArgs: ['-m', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=1m,mode=0777 tmpfs "$0" && exec "$@"', ws, BIN],
		});
		try {
			const r = await execPy(h, 'with open("workspace/fill.bin", "wb") as f:\n    f.write(b"x" * (4 * 1024 * 1024))');
			assert.equal(r.sc.status, 'error', show(r.sc));
			assert.match(r.sc.error.message, /No space left on device|Errno 28/);
			const again = await execPy(h, '2 + 2');
			assert.equal(again.sc.result, '4');
			// Output too large for the reply needs a log file: on a full disk the
			// reply still has head and tail and says the log could not be kept.
			const out = await execPy(h, 'print("y" * 100000)');
			assert.equal(out.sc.status, 'ok');
			assert.equal(out.sc.output_truncated, true);
			await h.client.ping();
		} finally { await h.close(); }
	});
});
