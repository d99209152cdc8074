// The session is hostile: code that rewrites its own process (ctypes), writes
// frames of its own on its control socket, forks helpers, exhausts its file
// descriptors or allocates memory the per-process limits do not see.  Each test
// checks the effect from outside the sandbox: CPU time and memory of the
// session's processes in /proc, heartbeat files, the server's RSS.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { SANITIZED, startClient, newProject, execPy, descendants, sandboxPssMb, sleep, show } from './lib.mjs';

/** CPU time (ms) used so far by every process below the server (the sandbox). */
function sandboxCpuMs(serverPid) {
	const hz = 100;
	let ticks = 0;
	for (const p of descendants(serverPid)) {
		let s;
		try { s = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8'); } catch { continue; }
		const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
		ticks += Number(f[11]) + Number(f[12]); // utime, stime
	}
	return (ticks * 1000) / hz;
}

function serverRssMb(pid) {
	const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
	return Number(s.match(/^VmRSS:\s+(\d+)/m)[1]) / 1024;
}

/** CPU of the sandbox over `ms` after now: near 0 when nothing runs between calls. */
async function cpuOver(h, ms) {
	const a = sandboxCpuMs(h.pid);
	await sleep(ms);
	return sandboxCpuMs(h.pid) - a;
}

const W_RESULT = 27, W_CHECKPOINT = 30;
const frame = (type, body) => `struct.pack("<III", 0x50534d31, ${type}, len(${body})) + ${body}`;

describe('a forged reply on the control socket', () => {
	let h, root;
	before(async () => {
		root = newProject('forged');
		h = await startClient(root, { structured: true });
		assert.equal((await execPy(h, 'import os, struct, json, time\nkept = 7')).sc.status, 'ok');
		await execPy(h, 'kept');
	});
	after(async () => { await h?.close(); });

	test('a result frame written by the cell does not end the call: it times out, rolls back, and nothing runs afterwards', { timeout: 60000 }, async () => {
		const t0 = Date.now();
		const r = await execPy(h, [
			'kept = 8',
			'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": None, "figures": []}).encode()',
			`os.write(3, ${frame(W_RESULT, 'b')})`,
			'while True:',
			'    with open("workspace/spin.beat", "a") as f: f.write("x")',
		].join('\n'), { timeout_s: 3 });
		const took = Date.now() - t0;
		assert.notEqual(r.sc.result, "'forged'", show(r.sc));
		// The cell either broke the protocol (a crash) or ran until its timeout.
		assert.ok(['timeout', 'crashed'].includes(r.sc.status), show(r.sc));
		assert.equal(r.sc.state, 'rolled_back', show(r.sc));
		if (r.sc.status === 'timeout') assert.ok(took >= 2500, `the clock ran on after the frame: ${took} ms`);
		// Nothing of that cell runs between calls.
		await sleep(200);
		const used = await cpuOver(h, 1000);
		assert.ok(used < 150, `the sandbox used ${used} ms of CPU in 1 s between calls`);
		const beat = fs.statSync(path.join(root, 'workspace/spin.beat')).size;
		await sleep(300);
		assert.equal(fs.statSync(path.join(root, 'workspace/spin.beat')).size, beat, 'the heartbeat stopped');
		// The next call gets its own answer, on the state from before.
		const n = await execPy(h, 'kept * 6');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '42'], show(n.sc));
	});

	// A process waiting on the disk (D), or caught between two steps of its
	// work, looks asleep at one look: it must be seen asleep twice, with no
	// CPU time used in between.
	test('a result frame, then a loop that mostly waits on the disk (fsync): still not believed', { timeout: 60000 }, async () => {
		const r = await execPy(h, [
			'kept = 8',
			'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": None, "figures": []}).encode()',
			`os.write(3, ${frame(W_RESULT, 'b')})`,
			'fd = os.open("workspace/sync.beat", os.O_WRONLY | os.O_CREAT | os.O_APPEND)',
			'while True:',
			'    os.write(fd, b"x" * 4096); os.fsync(fd)',
		].join('\n'), { timeout_s: 3 });
		assert.notEqual(r.sc.result, "'forged'", show(r.sc));
		assert.ok(['timeout', 'crashed'].includes(r.sc.status), show(r.sc));
		assert.equal(r.sc.state, 'rolled_back', show(r.sc));
		const beat = fs.statSync(path.join(root, 'workspace/sync.beat')).size;
		await sleep(300);
		assert.equal(fs.statSync(path.join(root, 'workspace/sync.beat')).size, beat, 'the loop stopped');
		const n = await execPy(h, 'kept * 6');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '42'], show(n.sc));
	});

	test('a 16 MB result frame: the session is ended and the server\'s memory stays small', { timeout: 60000 }, async () => {
		const before_ = serverRssMb(h.pid);
		const r = await execPy(h, [
			'kept = 9',
			'b = b\'{"status":"ok","x":[\' + b"0," * (8 * 1024 * 1024 - 64) + b\'0]}\'',  // just under 16 MiB
			`os.write(3, ${frame(W_RESULT, 'b')})`,
			'time.sleep(5)',
		].join('\n'), { timeout_s: 20 });
		assert.notEqual(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.state, 'rolled_back', show(r.sc));
		const grown = serverRssMb(h.pid) - before_;
		assert.ok(grown < 24, `the server's RSS grew by ${grown.toFixed(1)} MB`);
		const n = await execPy(h, 'kept');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
	});

	// Every field of a result is held to its type and bound once, as it
	// arrives (proto/result.h); a forged one names the field it got wrong.
	test('a result frame with a wrong-typed field: a protocol break that names the field, rolled back', { timeout: 60000 }, async () => {
		const r = await execPy(h, [
			'kept = 10',
			'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": {"type": 5}}).encode()',
			`os.write(3, ${frame(W_RESULT, 'b')})`,
			'time.sleep(5)',
		].join('\n'), { timeout_s: 20 });
		assert.equal(r.sc.status, 'crashed', show(r.sc));
		assert.match(r.sc.error.message,
			/broke its protocol with the server \(a W_RESULT whose "error\.type" is not a string \(it is the number 5\)\), so it was ended as a crash/,
			show(r.sc));
		assert.equal(r.sc.state, 'rolled_back', show(r.sc));
		assert.notEqual(r.sc.result, "'forged'", show(r.sc));
		const n = await execPy(h, 'kept');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
	});
});

// A result frame does not end a call (the session must still be seen asleep
// and frozen): a process that dies after one crashed, whatever it said.
describe('a made-up result, then the process dies', () => {
	test('the call is crashed and rolled back, not ok', { timeout: 60000 }, async () => {
		const h = await startClient(newProject('deadres'), { structured: true });
		try {
			assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
			const r = await execPy(h, [
				'import os, json, signal, struct',
				'kept = 8',
				'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": None}).encode()',
				`os.write(3, ${frame(W_RESULT, 'b')})`,
				'os.kill(os.getpid(), signal.SIGKILL)',
			].join('\n'));
			assert.deepEqual([r.sc.status, r.sc.state, r.sc.exit_code], ['crashed', 'rolled_back', 137], show(r.sc));
			assert.notEqual(r.sc.result, "'forged'", show(r.sc));
			const n = await execPy(h, 'kept');
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
		} finally {
			await h.close();
		}
	});
});

// A cell that sends a result of its own and then sleeps looks idle (no look
// from outside tells its sleep from a wait for the next cell), so its result
// is believed.  What must hold is what follows: thawed to take its
// checkpoint, it is still under the watchdog and a CPU budget, and the next
// call says the session was rolled back.
describe('a made-up result, then asleep through the looks', () => {
	const forge = (lines) => [
		'import os, struct, json, time',
		'kept = 8',
		'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": None, "figures": []}).encode()',
		`os.write(3, ${frame(W_RESULT, 'b')})`,
		'time.sleep(1.5)',
		...lines,
	].join('\n');
	const cases = [
		// Filling shared pages costs CPU too: whichever limit comes first.
		['4 GB of shared memory once thawed', /over memory_mb|ms of CPU while taking its checkpoint/, [
			'import mmap',
			'm = mmap.mmap(-1, 4 << 30, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)',
			'chunk = b"x" * (1 << 20)',
			'for i in range(4096): m.write(chunk)',
			'time.sleep(60)',
		]],
		['a busy loop once thawed', /ms of CPU while taking its checkpoint/, [
			'while True:',
			'    with open("workspace/thaw.beat", "a") as f: f.write("x")',
		]],
	];
	for (const [what, why, lines] of cases) {
		test(`${what}: ended within seconds, and the next call is rolled back`, { timeout: 90000 }, async () => {
			const mb = 512;
			const root = newProject('thaw');
			const h = await startClient(root, { structured: true, args: ['--memory', String(mb)] });
			try {
				assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
				await execPy(h, 'kept');
				const base = sandboxPssMb(h.pid);
				await execPy(h, forge(lines), { timeout_s: 60 });
				let peak = 0;
				const t0 = Date.now();
				// Ended when nothing of it is left but the zygote's other
				// processes: the sandbox's CPU stops, and so does the
				// heartbeat (a loaded machine gives a loop that still runs
				// less than a fifth of a CPU).
				const beatSize = () => { try { return fs.statSync(path.join(root, 'workspace/thaw.beat')).size; } catch { return -1; } };
				for (;;) {
					peak = Math.max(peak, sandboxPssMb(h.pid));
					const b0 = beatSize();
					if (Date.now() - t0 > 4000 && (await cpuOver(h, 500)) < 100 && beatSize() === b0) break;
					assert.ok(Date.now() - t0 < 25000, 'still running 25 s after its reply');
					await sleep(20);
				}
				// While it takes its checkpoint the limit is three times memory_mb:
				// the checkpoint and its saver are forks, and their shared pages
				// count in each.
				if (!SANITIZED) assert.ok(peak - base <= 3 * mb + Math.max(mb / 10, 64), `peak ${peak.toFixed(0)} MB, idle ${base.toFixed(0)} MB, limit ${mb} MB`);
				if (fs.existsSync(path.join(root, 'workspace/thaw.beat'))) {
					const beat = fs.statSync(path.join(root, 'workspace/thaw.beat')).size;
					await sleep(300);
					assert.equal(fs.statSync(path.join(root, 'workspace/thaw.beat')).size, beat, 'the loop stopped');
				}
				const n = await execPy(h, 'kept');
				assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
				assert.match(show(n.sc), why);
				assert.match(show(n.sc), /rolled back/);
			} finally {
				await h.close();
			}
		});
	}
});

describe('a forged checkpoint', () => {
	let h, root;
	before(async () => {
		root = newProject('forgedck');
		h = await startClient(root, { structured: true });
		assert.equal((await execPy(h, 'import os, struct, json, time, signal, socket\nkept = 7')).sc.status, 'ok');
		await execPy(h, 'kept');
	});
	after(async () => { await h?.close(); });

	test('a child that ignores the resume signal, announced as the checkpoint, then the session kills itself: the child ends, every later call answers', { timeout: 90000 }, async () => {
		const r = await execPy(h, [
			'kept = 8',
			// pidfd_open is refused in the sandbox: a real pidfd of its own
			// child comes from clone(CLONE_PIDFD), which the code can call.
			'import ctypes',
			'libc = ctypes.CDLL(None, use_errno=True)',
			'libc.syscall.restype = ctypes.c_long',
			'fd = ctypes.c_int(-1)',
			'pid = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(fd), 0, 0)',
			'assert pid >= 0, ctypes.get_errno()',
			'if pid == 0:',
			'    signal.signal(signal.SIGUSR1, signal.SIG_IGN)',
			'    while True:',
			'        with open("workspace/ck.beat", "a") as f: f.write("x")',
			'        time.sleep(0.02)',
			'pfd = fd.value',
			'b = json.dumps({"pid": pid}).encode()',
			'sk = socket.socket(fileno=os.dup(3))',
			`sk.sendmsg([${frame(W_CHECKPOINT, 'b')}], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", pfd))])`,
			'time.sleep(0.3)',
			'os.kill(os.getpid(), 9)',
		].join('\n'), { timeout_s: 10 }, { timeout: 30000 });
		assert.notEqual(r.sc.status, 'ok', show(r.sc));
		// The child is not the session's state: it is ended with the session.
		const beat = () => { try { return fs.statSync(path.join(root, 'workspace/ck.beat')).size; } catch { return -1; } };
		await sleep(500);
		const b1 = beat();
		await sleep(500);
		assert.equal(beat(), b1, 'the announced child no longer runs');
		const n = await execPy(h, 'kept', {}, { timeout: 20000 });
		assert.equal(n.sc.status, 'ok', show(n.sc));
		assert.ok(['7', undefined].includes(n.sc.result ?? undefined) || n.sc.state === 'new', show(n.sc));
		const z = await execPy(h, '6 * 7', { reset: true }, { timeout: 20000 });
		assert.deepEqual([z.sc.status, z.sc.result, z.sc.state], ['ok', '42', 'new'], show(z.sc));
	});
});

describe('clean-up the cell cannot stop', () => {
	let h, root;
	before(async () => {
		root = newProject('cleanup');
		h = await startClient(root, { structured: true });
		assert.equal((await execPy(h, 'import os, time, resource\nkept = 7')).sc.status, 'ok');
	});
	after(async () => { await h?.close(); });

	const escapee = (name) => [
		'r, w = os.pipe()',
		'if os.fork() == 0:',
		'    os.setsid()',
		'    if os.fork() == 0:',
		'        os.write(w, b"x")',
		'        while True:',
		`            with open("workspace/${name}.beat", "a") as f: f.write("x")`,
		'            time.sleep(0.02)',
		'    os._exit(0)',
		'os.read(r, 1)',
		`while not (os.path.exists("workspace/${name}.beat") and os.path.getsize("workspace/${name}.beat")): time.sleep(0.01)`,
	].join('\n');
	const size = (f) => { try { return fs.statSync(path.join(root, 'workspace', f)).size; } catch { return -1; } };

	for (const [how, code] of [
		['RLIMIT_NOFILE lowered to 4', 'resource.setrlimit(resource.RLIMIT_NOFILE, (4, 4))'],
		['every file descriptor used up', 'fds = []\ntry:\n    while True: fds.append(os.open("/dev/null", os.O_RDONLY))\nexcept OSError:\n    pass'],
	]) {
		test(`a setsid child survives no call when the cell has ${how}`, { timeout: 30000 }, async () => {
			const name = how.replace(/\W+/g, '_');
			// A session of its own: a cell that lowers its own rlimit keeps it.
			const session = name.slice(0, 60);
			assert.equal((await execPy(h, 'import os, time, resource', { session })).sc.status, 'ok');
			const r = await execPy(h, escapee(name) + '\n' + code, { session });
			assert.ok(['ok', 'error', 'crashed'].includes(r.sc.status), show(r.sc));
			await sleep(300);
			const b = size(`${name}.beat`);
			assert.ok(b > 0, 'the child ran during the call');
			await sleep(600);
			assert.equal(size(`${name}.beat`), b, 'the heartbeat stopped after the call');
			const n = await execPy(h, 'kept');
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
		});
	}

	// Orphans then go to the zygote, not to the session: the end of the call
	// must find them there too.
	test('a setsid child survives no call when the session first stops being its subreaper', { timeout: 30000 }, async () => {
		const r = await execPy(h, 'import ctypes, os, time\nctypes.CDLL(None).prctl(36, 0, 0, 0, 0)\n' + escapee('unreaped'), { session: 'unreaped' });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		await sleep(300);
		const b = size('unreaped.beat');
		assert.ok(b > 0, 'the child ran during the call');
		await sleep(600);
		assert.equal(size('unreaped.beat'), b, 'the heartbeat stopped after the call');
		const n = await execPy(h, 'kept');
		assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
	});
});

describe('a protocol fuzzer inside the sandbox', () => {
	test('random and mutated frames on every descriptor: the server lives, the next call answers itself, nothing is left running', { timeout: 120000 }, async () => {
		const h = await startClient(newProject('fuzz'), { structured: true });
		try {
			assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
			await execPy(h, 'kept');
			// The checkpoint of a call's state is taken just after its reply.
			await sleep(500);
			// Live processes: a retired checkpoint stays a zombie of the
			// frozen session until its next call reaps it (one that only
			// logs a cheap cell takes no checkpoint, so no reap either).
			const live = () => descendants(h.pid).filter((p) => p.state !== 'Z').length;
			const idle = live();
			for (let seed = 1; seed <= 4; seed++) {
				const r = await execPy(h, fuzzCell(seed, 0.6), { timeout_s: 5 }, { timeout: 30000 });
				assert.ok(r.sc, `seed ${seed}: a result`);
				const ping = await h.client.ping();
				assert.ok(ping, 'the server answers');
				const n = await execPy(h, `${seed} * 1000 + kept`, {}, { timeout: 30000 });
				assert.equal(n.sc.status, 'ok', `seed ${seed}: ${show(n.sc)}`);
				assert.ok([String(seed * 1000 + 7)].includes(n.sc.result) || n.sc.state === 'new', `seed ${seed}: ${show(n.sc)}`);
				if (n.sc.state === 'new') assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
				let left = live();
				for (const t0 = Date.now(); left > idle && Date.now() - t0 < 10000; left = live()) await sleep(100);
				assert.ok(left <= idle, `seed ${seed}: ${left} processes below the server, ${idle} when idle`);
			}
		} finally {
			await h.close();
		}
	});
});

/** Python: for `secs` seconds, write random and mutated well-formed frames,
 *  some carrying descriptors, to fds 0-3 and to every socket it can find. */
export function fuzzCell(seed, secs) {
	return `
import os, random, struct, json, socket, time, ctypes
rnd = random.Random(${seed})
# A child with a pidfd (clone(CLONE_PIDFD): the sandbox refuses pidfd_open).
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
kidfd = ctypes.c_int(-1)
kid = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(kidfd), 0, 0)
if kid == 0:
    time.sleep(60)
    os._exit(0)
def body():
    k = rnd.randrange(6)
    if k == 0: return b""
    if k == 1: return os.urandom(rnd.randrange(1, 300))
    if k == 2: return json.dumps({"pid": rnd.choice([kid, os.getpid(), 1, -1, 2**40]), "status": rnd.choice(["ok", "memory", "error", 7]), "resumed": True}).encode()
    if k == 3: return b"[" * rnd.randrange(1, 5000)
    if k == 4: return json.dumps({"status": "ok", "result": "x" * rnd.randrange(100000)}).encode()
    return b'{"status":"ok"' + os.urandom(8)
def frame():
    b = body()
    t = rnd.choice([rnd.randrange(0, 40), 27, 28, 29, 30, 31, 0xffffffff])
    n = rnd.choice([len(b), len(b), len(b) + 1, rnd.randrange(2**32)])
    magic = 0x50534d31 if rnd.random() < 0.9 else rnd.randrange(2**32)
    f = struct.pack("<III", magic, t, n) + b
    if rnd.random() < 0.2: f = f[:rnd.randrange(len(f) + 1)]
    return f
fds = [0, 1, 2, 3]
for fd in range(4, 64):
    try:
        os.fstat(fd); fds.append(fd)
    except OSError:
        pass
end = time.monotonic() + ${secs}
while time.monotonic() < end:
    fd = rnd.choice(fds)
    f = frame()
    try:
        if rnd.random() < 0.3:
            d = os.dup(fd)
            extra = [os.dup(kidfd.value)]
            if rnd.random() < 0.5: extra += list(os.pipe())
            try:
                sk = socket.socket(fileno=d)
                sk.sendmsg([f], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(extra), *extra))])
            finally:
                os.close(d)
                for e in extra: os.close(e)
        else:
            os.write(fd, f)
    except OSError:
        pass
if rnd.random() < 0.5:
    os.kill(os.getpid(), 9)
`;
}
