// Branching: execute_python with fork_from starts a new session as a copy of
// another session's state.  The copy sees the parent's variables, imports
// and functions; what it changes never reaches the parent (checked by value,
// and from outside: the copy is a process of its own, a child of the
// zygote, with its own checkpoint); it counts against max_sessions, has its
// own limits, and is saved and restored like any session.  A parent that
// lives only on disk (after a restart) is copied from its saved state.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, writeFile, procTable, descendants, titleOf, sessionProcs, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved } from './persist_lib.mjs';

const PARENT = `
import numpy as np
x = [1, 2, 3]
arr = np.arange(5)
def total():
    return sum(x) + int(arr.sum())
class Box:
    def __init__(self, v):
        self.v = v
box = Box("parent")
`;

function skill(root, limits) {
	writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
		`---\nname: t\ndescription: fork limits\nlimits:\n${limits}---\n`);
}

describe('fork_from', () => {
	test('the copy sees the parent, changes it without touching the parent, and is a process of its own', { timeout: 180000 }, async () => {
		const root = newProject('fork');
		const h = await start(root, stateHome());
		let r = await execPy(h, PARENT);
		assert.equal(r.sc.status, 'ok', show(r.text));
		r = await execPy(h, 'import os\nos.getpid()');
		const parentPid = r.sc.result;
		r = await execPy(h, 'x.append(4); arr[0] = 100; box.v = "copy"\n(total(), list(map(int, arr)), box.v, isinstance(box, Box))',
			{ session: 'branch', fork_from: 'default' });
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'forked', show(r.text));
		assert.match(r.head.rest, /state forked/);
		assert.match(r.text, /note:\n.*forked from session default: this session started as a copy of its state after cell 2/);
		assert.equal(r.sc.result, "(120, [100, 1, 2, 3, 4], 'copy', True)");
		assert.equal(r.sc.execution_count, 3, 'the copy counts on from the parent');
		// The parent is untouched.
		r = await execPy(h, '(total(), list(map(int, arr)), box.v)');
		assert.equal(r.sc.result, "(16, [0, 1, 2, 3, 4], 'parent')", show(r.text));
		assert.equal(r.sc.state, 'kept');
		// The copy goes on as an ordinary session.
		r = await execPy(h, 'import os\n(total(), os.getpid())', { session: 'branch' });
		assert.equal(r.sc.state, 'kept', show(r.text));
		assert.match(r.sc.result, /^\(120, \d+\)$/);
		assert.notEqual(r.sc.result.split(', ')[1], parentPid);
		// From outside: a session process of its own, whose parent is the
		// zygote (not the parent session), with a checkpoint of its own.
		await sleep(300);
		const t = procTable();
		const below = descendants(h.pid).map((p) => t.get(p.pid)).filter(Boolean);
		const cmd = (p) => titleOf(p.pid);
		const parent = below.find((p) => /python-sandbox-mcp: session default/.test(cmd(p)));
		const branch = below.find((p) => /python-sandbox-mcp: session branch/.test(cmd(p)));
		assert.ok(parent && branch, show(below.map((p) => `${p.pid} ${p.ppid} ${cmd(p)}`)));
		assert.equal(branch.ppid, parent.ppid, 'the copy is a child of the zygote, as every session');
		assert.match(cmd(t.get(branch.ppid)), /python-sandbox-mcp: zygote/);
		assert.ok(below.some((p) => p.ppid === branch.pid && /checkpoint branch/.test(cmd(p))), 'the copy has its own checkpoint');
		await h.close();
	});

	test('a crash in the copy rolls back to the forked state, the parent unharmed', { timeout: 120000 }, async () => {
		const root = newProject('fork-crash');
		const h = await start(root, stateHome());
		await execPy(h, PARENT);
		let r = await execPy(h, 'x.append(9)\nimport os, signal\nos.kill(os.getpid(), signal.SIGSEGV)', { session: 'b', fork_from: 'default' });
		assert.equal(r.sc.status, 'crashed', show(r.text));
		assert.equal(r.sc.state, 'rolled_back', show(r.text));
		r = await execPy(h, 'x', { session: 'b' });
		assert.equal(r.sc.result, '[1, 2, 3]', 'back to the forked state');
		r = await execPy(h, 'x');
		assert.equal(r.sc.result, '[1, 2, 3]');
		await h.close();
	});

	// The parent is thawed to fork its copy, and its own code runs there
	// (at-fork hooks).  Attack: a hook that starts a native thread spinning
	// without the interpreter's lock (a Python thread would wait for the
	// lock, asleep) kept the parent from being frozen again: with no
	// deadline and no call, it burnt a CPU "at rest" for good.  Now its
	// rest has the copy's deadline (RESUME_MS, 3 s here): over it, the
	// parent is ended and resumed from its checkpoint, losing nothing.
	// The parent is frozen and swept again once its copy is made.  A call
	// for it in that moment waits for that rest: sent before, it went to a
	// process the server had already stopped (never read: a timeout, the
	// call rolled back), and the sweep asked of the zygote meanwhile ended
	// the new cell's own child.  The zygote's pause in each settle
	// (PSM_TEST_ZYGOTE_SETTLE_MS) holds that moment open.
	test('a call for the parent while it is frozen after its copy runs once it rests, its child unharmed', { timeout: 120000 }, async () => {
		const root = newProject('fork-call-freezing');
		const h = await start(root, stateHome(), { extraArgs: ['--log-level', 'debug'], env: { PSM_TEST_ZYGOTE_SETTLE_MS: '1500' } });
		assert.equal((await execPy(h, 'x = 41')).sc.status, 'ok');
		const [par] = sessionProcs(h.pid, 'default').sessions;
		assert.ok(par, 'the parent session has a process');
		const state = () => { try { return fs.readFileSync(`/proc/${par}/stat`, 'utf8').split(') ')[1][0]; } catch { return '?'; } };
		const copy = execPy(h, 'x + 1', { session: 'branch', fork_from: 'default' });
		// W_FORKED is in (the parent's freeze begins), then the parent is
		// stopped, its settle under way for 1.5 s.
		while (!/session default: forking -> freezing/.test(h.stderr())) await sleep(2);
		let st;
		for (const t0 = Date.now(); (st = state()) !== 'T' && Date.now() - t0 < 1000;) await sleep(2);
		assert.equal(st, 'T', 'the parent is stopped while it is being swept');
		assert.doesNotMatch(h.stderr().split('forking -> freezing')[1], /session default: freezing -> idle/, 'still being swept');
		const r = await execPy(h, 'import os, time\np = os.fork()\nif p == 0:\n    time.sleep(2.5)\n    os._exit(7)\n(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]), x)', { timeout_s: 20 });
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.result, '(7, 41)', show(r.text));
		const c = await copy;
		assert.equal(c.sc.result, '42', show(c.text));
		await h.close();
	});

	test('a parent kept busy by its at-fork hook after the copy is ended and resumed, not left spinning at rest', { timeout: 120000 }, async () => {
		const root = newProject('fork-busy-parent');
		const h = await start(root, stateHome(), { env: { PSM_TEST_RESUME_MS: '3000' } });
		const flag = path.join(root, 'workspace', 'spin-after-fork');
		let r = await execPy(h, [
			'import os, ctypes, mmap',
			'kept = 5',
			'code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)',
			'code.write(bytes([0xeb, 0xfe]))  # jmp .',
			'entry = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(code)))',
			'parent = 0',
			'def hook():',
			'    if os.getpid() == parent and os.path.exists("workspace/spin-after-fork"):',
			'        tid = ctypes.c_ulong()',
			'        ctypes.CDLL(None).pthread_create(ctypes.byref(tid), None, entry, None)',
			'os.register_at_fork(after_in_parent=hook)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.text));
		// Armed for this process only, once its own checkpoint is taken:
		// the fork of the copy is the next fork it makes.
		r = await execPy(h, 'parent = os.getpid()');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await sleep(1500);
		fs.writeFileSync(flag, '');
		r = await execPy(h, 'kept + 1', { session: 'copy', fork_from: 'default' });
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.result, '6');
		// From outside, with no call: the parent session's process uses
		// no CPU once the deadline is past (before: one whole CPU, for good).
		await sleep(5000);
		fs.rmSync(flag);
		const cpu = (pid) => { try { const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); } catch { return -1; } };
		// Found where it sits (a save at rest may be forking its checkpoint,
		// whose title it wears meanwhile).
		const [sess] = sessionProcs(h.pid, 'default').sessions;
		assert.ok(sess, 'the parent session has a process');
		const c0 = cpu(sess);
		await sleep(1000);
		const used = cpu(sess) - c0;
		assert.ok(used >= 0 && used < 30, `the parent session used ${used} ticks of CPU in 1 s at rest`);
		// Its next call runs on the state it had, and says what happened.
		r = await execPy(h, 'kept');
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.result, '5', show(r.text));
		assert.match(r.text, /did not come to rest within 3 s after making a copy of itself.*nothing was lost/s, show(r.text));
		await h.close();
	});

	test('errors: an unknown parent, an existing session, the session itself', { timeout: 120000 }, async () => {
		const root = newProject('fork-errors');
		const h = await start(root, stateHome());
		await execPy(h, 'v = 1');
		await execPy(h, 'w = 2', { session: 'other' });
		let r = await execPy(h, '1', { session: 'new', fork_from: 'nosuch' });
		assert.equal(r.res.isError, true);
		assert.match(r.text, /fork_from.*session "nosuch" does not exist/);
		r = await execPy(h, '1', { session: 'other', fork_from: 'default' });
		assert.equal(r.res.isError, true);
		assert.match(r.text, /cannot fork into session "other": it already exists; choose a new session name, or pass reset: true/);
		r = await execPy(h, '1', { session: 'default', fork_from: 'default' });
		assert.equal(r.res.isError, true);
		assert.match(r.text, /names the session itself/);
		r = await execPy(h, '1', { session: 'x', fork_from: 5 });
		assert.equal(r.res.isError, true);
		// reset: true replaces an existing session with the copy.
		r = await execPy(h, '(v, "w" in globals())', { session: 'other', fork_from: 'default', reset: true });
		assert.equal(r.sc.state, 'forked', show(r.text));
		assert.equal(r.sc.result, '(1, False)');
		await h.close();
	});

	test('a copy counts against max_sessions and has its own memory limit', { timeout: 180000 }, async () => {
		const root = newProject('fork-limits');
		skill(root, '  max_sessions: 2\n  memory_mb: 512\n');
		const h = await start(root, stateHome());
		await execPy(h, 'import numpy as np\nkeep = np.ones(10)');
		let r = await execPy(h, 'keep.sum()', { session: 'b', fork_from: 'default' });
		assert.equal(r.sc.state, 'forked', show(r.text));
		r = await execPy(h, '1', { session: 'c', fork_from: 'default' });
		assert.equal(r.res.isError, true);
		assert.match(r.text, /at most 2 sessions/);
		// Over memory_mb in the copy: the copy is stopped and rolled back to
		// the forked state; the parent does not notice.
		r = await execPy(h, 'big = np.ones(100_000_000)\nbig.sum()', { session: 'b' });
		assert.equal(r.sc.status, 'memory', show(r.text));
		r = await execPy(h, '("big" in globals(), float(keep.sum()))', { session: 'b' });
		assert.equal(r.sc.result, '(False, 10.0)', show(r.text));
		r = await execPy(h, 'float(keep.sum())');
		assert.equal(r.sc.state, 'kept');
		await h.close();
	});

	test('a parent that answers with a forged copy (a pidfd of its own child) is refused and ended as a protocol break', { timeout: 120000 }, async () => {
		const root = newProject('fork-forged');
		// Not saved: a save at rest forks the session too, and on a loaded
		// machine it could come before the copy is asked for, so that the
		// hook below forged its answer to the wrong fork.
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: no saving\nlimits:\n  persist: false\n---\n');
		const h = await start(root, stateHome());
		let r = await execPy(h, 'kept = 7');
		assert.equal(r.sc.status, 'ok', show(r.text));
		// A hook that runs before each fork of the session's process: the
		// first once the test has written workspace/forge-now is the copy's
		// (not the checkpoint's after this call, nor the one a save at rest
		// takes later), where it answers W_FORKED itself, before the real answer,
		// with a pidfd of a child of its own (clone(CLONE_PIDFD): the
		// sandbox refuses pidfd_open): a new process, but no child of the
		// zygote.
		r = await execPy(h, `
import os, socket, struct, json, ctypes, time
W_FORKED = 40
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
done, me = [False], os.getpid()
def forge():
    if os.getpid() != me:
        return  # the checkpoint's own fork of its saver
    if not os.path.exists("workspace/forge-now"):
        open("workspace/forks-seen", "a").write("fork ")  # the checkpoint's
    elif not done[0]:
        done[0] = True
        fdv = ctypes.c_int(-1)
        kid = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(fdv), 0, 0)
        if kid == 0:
            while True:
                time.sleep(1)
        b = json.dumps({"pid": kid}).encode()
        s = socket.socket(fileno=os.dup(3))
        s.sendmsg([struct.pack("<III", 0x50534d31, W_FORKED, len(b)) + b],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fdv.value))])
os.register_at_fork(before=forge)
kept = 8`);
		assert.equal(r.sc.status, 'ok', show(r.text));
		// The checkpoint after that call is taken (its fork seen by the
		// hook) before the copy is asked for.
		const seen = path.join(root, 'workspace/forks-seen');
		for (let i = 0; i < 600 && !fs.existsSync(seen); i++)
			await sleep(50);
		assert.ok(fs.existsSync(seen), 'the checkpoint after the call was taken');
		await sleep(200);
		fs.writeFileSync(path.join(root, 'workspace/forge-now'), '');
		r = await execPy(h, 'kept', { session: 'copy', fork_from: 'default' });
		assert.equal(r.res.isError, true, show(r.text));
		assert.match(r.text, /could not fork session default: its process answered with something that is not its copy/);
		r = await execPy(h, 'kept');
		assert.match(r.text, /broke its protocol with the server \(a copy that is no new child of the zygote\), so it was ended as a crash and resumed from its copy of the state after that call: nothing was lost/, show(r.text));
		assert.equal(r.sc.result, '8', 'the checkpoint of the last state resumed');
		await h.close();
	});

	test('the copy is saved under its own name; a parent that is only on disk is copied from its saved state', { timeout: 180000 }, async () => {
		const root = newProject('fork-saved');
		const xdg = stateHome();
		let h = await start(root, xdg);
		await execPy(h, PARENT);
		await waitSaved(h, 1);
		let r = await execPy(h, 'x.append(7)\nlen(x)', { session: 'b', fork_from: 'default' });
		assert.equal(r.sc.state, 'forked', show(r.text));
		await waitSaved(h, 2);
		await h.close();
		assert.ok(fs.existsSync(snapPath(root, 'b')), 'the copy has a snapshot of its own');
		h = await start(root, xdg);
		r = await execPy(h, 'x', { session: 'b' });
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '[1, 2, 3, 7]');
		// default is on disk only: its copy is restored from its snapshot.
		r = await execPy(h, 'x.append(8)\n(total(), box.v)', { session: 'c', fork_from: 'default' });
		assert.equal(r.sc.state, 'forked', show(r.text));
		assert.match(r.text, /forked from session default: this session started as a copy of its state saved \d+ s ago \(after cell 1\)/);
		assert.equal(r.sc.result, "(24, 'parent')");
		r = await execPy(h, 'x');
		assert.equal(r.sc.state, 'restored', 'the parent is restored untouched');
		assert.equal(r.sc.result, '[1, 2, 3]');
		await h.close();
	});
});
