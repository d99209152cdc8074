// The processes below the server are hostile: the zygote and the warm-up's
// probe run code nobody approved, so nothing they send is believed.  These
// tests play them through the real binary and check every effect from
// outside: a host process the server could signal is still alive, a host
// directory the server could delete is intact, a session's state is kept,
// later sessions run unchanged code.  As root and as nobody (the server run
// by 65534 through setpriv), with namespaces and without them
// (build/helpers/dockerrun: a container runtime's default rules).
//
// Code goes into the real zygote through its test hook (PSM_TEST_ZYGOTE_HOOK
// runs test/integration/zygote_hook.py where an installed module's
// import-time code runs, and a venv's .pth files once did;
// PSM_TEST_ZYGOTE_PIDFD gives it a pidfd of the victim process, as
// pidfd_open of a host process did without namespaces).  PSM_TEST_HOOK_VIA=venv
// puts the same code in a .pth file of a --venv instead, to run these tests
// against a binary from before the hook (one that still runs a venv's .pth
// files in its zygote).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { BIN, REPO, startClient, newProject, writeFile, execPy, sleep, show, descendants, reachableArgv } from './lib.mjs';

const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const HOOK = path.join(REPO, 'test', 'integration', 'zygote_hook.py');
const VIA_VENV = process.env.PSM_TEST_HOOK_VIA === 'venv';
const PYVER = fs.readdirSync('/usr/lib').filter((d) => /^python3\.\d+$/.test(d)).sort().pop();

const COMBOS = [];
for (const mode of ['namespaces', 'no namespaces'])
	for (const who of AS_ROOT ? ['root', 'nobody'] : ['user']) COMBOS.push({ mode, who });

function chownR(p, uid) {
	if (uid !== undefined) spawnSync('chown', ['-R', `${uid}:${uid}`, p]);
}

/** A process the server could signal (the server's own uid), which no one
 *  asked it to: `sleep`, as `uid`. */
function victimProcess(uid) {
	const p = spawn('sleep', ['600'], { stdio: 'ignore', ...(uid !== undefined ? { uid, gid: uid } : {}) });
	p.exited = false;
	p.on('exit', () => { p.exited = true; });
	return p;
}

function alive(p) {
	if (p.exited) return false;
	try {
		const st = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8');
		return !/^[ZX]$/.test(st.slice(st.lastIndexOf(')') + 2).split(' ')[0]);
	} catch { return false; }
}

/** A private directory of `uid` outside every project, with a file in it. */
function victimDir(uid) {
	const d = fs.mkdtempSync('/var/tmp/psm-victim-');
	fs.writeFileSync(path.join(d, 'keep'), 'precious\n');
	fs.chmodSync(d, 0o700);
	chownR(d, uid);
	process.on('exit', () => fs.rmSync(d, { recursive: true, force: true }));
	return d;
}

/** The server for one combination, with the hook's plan in the workspace. */
async function serve(combo, tag, plan, { victim, args = [] } = {}) {
	const uid = combo.who === 'nobody' ? NOBODY : undefined;
	const root = newProject(`hz-${tag}`);
	const ws = path.join(root, 'workspace');
	fs.mkdirSync(path.join(ws, 'outputs'), { recursive: true });
	writeFile(root, 'workspace/.hook-plan', JSON.stringify(plan));
	const state = path.join(root, '..', `${path.basename(root)}-state`);
	fs.mkdirSync(state, { mode: 0o700 });
	process.on('exit', () => fs.rmSync(state, { recursive: true, force: true }));
	const env = { XDG_STATE_HOME: state, HOME: state };
	const extra = [];
	if (VIA_VENV) {
		const site = path.join(ws, 'venv', 'lib', PYVER, 'site-packages');
		writeFile(root, `workspace/venv/pyvenv.cfg`, `home = /usr/bin\ninclude-system-site-packages = true\nversion = ${PYVER.slice(6)}.0\n`);
		fs.copyFileSync(HOOK, path.join(ws, '.hook.py'));
		writeFile(root, path.relative(root, path.join(site, 'hook.pth')),
			`import runpy; runpy.run_path(${JSON.stringify(path.join(ws, '.hook.py'))})\n`);
		extra.push('--venv', path.join(ws, 'venv'));
	} else {
		env.PSM_TEST_ZYGOTE_HOOK = path.join(root, 'hook.py');
		fs.copyFileSync(HOOK, env.PSM_TEST_ZYGOTE_HOOK);
		if (victim) env.PSM_TEST_ZYGOTE_PIDFD = String(victim.pid);
	}
	chownR(root, uid);
	chownR(state, uid);
	const pre = combo.mode === 'namespaces' ? [] : [DOCKERRUN];
	// nobody runs copies it can reach (the checkout may be private).
	const server = uid !== undefined ? reachableArgv(pre) : [...pre, BIN];
	const launch = uid !== undefined
		? { command: 'setpriv', commandArgs: [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', ...server] }
		: { command: server[0], commandArgs: server.slice(1) };
	const h = await startClient(root, { structured: true, args: ['--log-level', process.env.PSM_HZ_LOG || 'info', ...extra, ...args], env, ...launch });
	h.ws = ws;
	h.hookLog = () => { try { return fs.readFileSync(path.join(ws, '.hook-log'), 'utf8'); } catch { return ''; } };
	return h;
}

async function waitFor(what, fn, ms = 60000) {
	const t0 = Date.now();
	for (;;) {
		const v = fn();
		if (v) return v;
		if (Date.now() - t0 > ms) throw new Error(`no ${what} after ${ms} ms`);
		await sleep(100);
	}
}

async function waitLog(h, re, ms = 90000) {
	try {
		await waitFor(`${re} in the log`, () => re.test(h.stderr()), ms);
	} catch (e) {
		throw new Error(`${e.message}; log: ${h.stderr().slice(-3000)}; hook: ${h.hookLog?.() ?? ''}`);
	}
}

async function waitHook(h, re, ms = 30000) {
	try {
		await waitFor(`${re} in the hook's log`, () => re.test(h.hookLog()), ms);
	} catch (e) {
		throw new Error(`${e.message}; hook: ${h.hookLog()}; log: ${h.stderr().slice(-3000)}`);
	}
}

// Every combination runs at once: most of the time is spent waiting for
// the zygotes that the server starts again.
describe('a hostile zygote: forged messages', { concurrency: true }, () => {
	for (const combo of COMBOS) {
		describe(`${combo.mode}, the server run by ${combo.who}`, { concurrency: 1 }, () => {
			let h, victim, dir;
			before(async () => {
				const uid = combo.who === 'nobody' ? NOBODY : undefined;
				victim = victimProcess(uid);
				dir = victimDir(uid);
				// A scratch directory's name that exists, so that the path
				// resolves (the zygote knows its own; this one is the test's).
				const base = fs.mkdtempSync('/tmp/psm-scratch-hz-');
				fs.chmodSync(base, 0o755); // a server run by nobody resolves through it
				process.on('exit', () => fs.rmSync(base, { recursive: true, force: true }));
				const climb = `${base}/../..${dir}`;
				h = await serve(combo, `link-${combo.mode.replace(' ', '')}-${combo.who}`,
					{ victim: victim.pid, frames: [{ do: 'spawned' }, { do: 'ready', scratch: climb }, { do: 'exited' }] },
					{ victim, args: ['--warmup', 'off'] });
			});
			after(async () => {
				await h?.close();
				// The server is gone: whatever it cleaned up at exit, this
				// directory was never its own.
				assert.equal(fs.readFileSync(path.join(dir, 'keep'), 'utf8'), 'precious\n', 'the victim directory is intact');
				assert.ok(alive(victim), 'the victim process is alive');
				victim.kill('SIGKILL');
			});

			let bpid;
			const breaks = () => (h.stderr().match(/the zygote broke its protocol with the server/g) || []).length;

			// Each zygote writes its forged frame at its second spawn: a
			// first session, then the one that sees the frame (which the
			// replacement sends to the next zygote, where it runs).
			test('a spawn report for a session never asked for, with a host process\'s pidfd: nothing is signalled', { timeout: 120000 }, async () => {
				assert.equal((await execPy(h, '1', { session: 'x' }, { timeout: 110000 })).sc.status, 'ok');
				const r = await execPy(h, '6 * 7', { session: 'a' }, { timeout: 110000 });
				await waitHook(h, /sending W_SPAWNED/);
				await sleep(300);
				assert.ok(alive(victim), `the victim process was signalled (${show(r.sc)}); hook: ${h.hookLog()}`);
				await waitLog(h, /the zygote broke its protocol with the server \(a spawn report for session process 999999, which the server never asked for\)/);
				// The call it touched ran in the next zygote, and says why.
				assert.equal(r.sc.result, '42', show(r.sc));
				assert.match(r.text, /broke its protocol with the server/, show(r.text));
			});

			test('a second W_READY whose scratch path climbs out: the zygote is replaced, the path is never used', { timeout: 120000 }, async () => {
				const r = await execPy(h, 'import os\nkept = 5\nos.getpid()', { session: 'b' }, { timeout: 110000 });
				bpid = r.sc.result;
				await waitHook(h, /sending W_READY/);
				// The directory is checked again after the server has exited.
				assert.ok(fs.existsSync(path.join(dir, 'keep')));
				await waitLog(h, /broke its protocol with the server \(W_READY \(type 21\) where the server expected none\)/);
				assert.match(r.text, /broke its protocol with the server/, show(r.text));
				assert.equal(breaks(), 2);
			});

			test('an exit report for a live session changes nothing: its state is kept', { timeout: 120000 }, async () => {
				let r = await execPy(h, 'import os\nkept_c = 7\nos.getpid()', { session: 'c' }, { timeout: 110000 });
				// The hook reports each session it finds among the zygote's
				// children at c's spawn by its title: c, and b unless b is
				// retitling itself around its checkpoint's fork just then
				// (setproctitle clears the title before it writes the new
				// one: read in a loop while a process retitles, 22 % of the
				// reads came back empty and 17 % showed its first command
				// line).  Either report is for a live session.
				await waitHook(h, /sent W_EXITED for pid \d+ \(python-sandbox-mcp: (session|checkpoint) [bc]\b/);
				assert.equal(r.sc.status, 'ok', show(r.sc));
				const cpid = r.sc.result;
				// The same processes, their state kept (not a checkpoint
				// resumed in their place while they ran on unwatched).
				r = await execPy(h, 'import os\n(kept + 1, os.getpid())', { session: 'b' });
				assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', `(6, ${bpid})`, 'kept'], show(r.sc));
				r = await execPy(h, 'import os\n(kept_c + 1, os.getpid())', { session: 'c' });
				assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', `(8, ${cpid})`, 'kept'], show(r.sc));
				assert.equal(breaks(), 2, h.stderr().slice(-2000));
			});
		});
	}
});

// What the sandboxed code plants in the workspace: it records where it ran,
// tries to end the session named victim and to read its environment, and
// replaces builtins.compile (so that it would see every later cell).  In
// the warm-up's probe it then writes the probe's answer itself, so that the
// zygote imports the name too.
const plant = (victim) => `import builtins, os
WS = os.path.dirname(os.path.abspath(__file__))
def _title(pid="self"):
    try:
        return open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
me = _title()
out = [me]
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError as e:
    # Without a pid namespace a session's (and the probe's) domain
    # does not list /proc: the test names the victim's processes.
    out.append("listing /proc refused: " + type(e).__name__)
    pids = open(os.path.join(WS, "victims.txt")).read().split()
for p in pids:
    if int(p) != os.getpid():
        t = _title(p) or "a process of session ${victim}"
        if t.endswith(" ${victim}") or " ${victim} cell " in t:
            try:
                open("/proc/%s/environ" % p, "rb").read()
                out.append("read the environment of " + t)
            except OSError as e:
                out.append("environ refused: " + type(e).__name__)
            try:
                os.kill(int(p), 9)
                out.append("killed " + t)
            except OSError as e:
                out.append("kill refused: " + type(e).__name__)
builtins.PLANTED = me
with open(os.path.join(WS, "ran.txt"), "a") as f:
    f.write(" | ".join(out) + "\\n")
if "warm-up probe" in me:
    name = me.rsplit(" ", 1)[-1]
    for fd in range(3, 64):
        try:
            if os.readlink("/proc/self/fd/%d" % fd).startswith("pipe:") and os.get_blocking(fd) is not None:
                flags = int(open("/proc/self/fdinfo/%d" % fd).read().split("flags:")[1].split()[0], 8)
                if flags & 3 == 1:
                    os.write(fd, ('{"ok": true, "ms": 1, "order": ["%s"]}' % name).encode())
        except (OSError, IndexError, ValueError):
            pass
    os._exit(0)
`;
// Run in the zygote itself: no signal (the zygote's replacement ends every
// session anyway), only the change every later session would inherit.
const PLANT_ZYGOTE = `import builtins, os
builtins.PLANTED = "zygote"
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran.txt"), "a") as f:
    f.write("planted_zygote %d\\n" % os.getpid())
`;

describe('a hostile warm-up: nothing a session wrote runs in the probe, the zygote or a later session', { concurrency: true }, () => {
	for (const combo of COMBOS) {
		describe(`${combo.mode}, the server run by ${combo.who}`, { concurrency: 1 }, () => {
			let h;
			const victim = `victim-${combo.mode === 'namespaces' ? 'ns' : 'nsfree'}-${combo.who}`;
			const ran = () => { try { return fs.readFileSync(path.join(h.ws, 'ran.txt'), 'utf8'); } catch { return ''; } };
			const victimKept = async () => {
				const v = await execPy(h, 'secret', { session: victim });
				assert.deepEqual([v.sc.status, v.sc.result, v.sc.state], ['ok', '7', 'kept'], `the victim session lost its state: ${show(v.sc)}; ran: ${ran()}`);
			};
			const fresh = async (session) => {
				const r = await execPy(h, 'import builtins\n(hasattr(builtins, "PLANTED"), builtins.compile.__module__)', { session, reset: true });
				assert.equal(r.sc.status, 'ok', show(r.text));
				return r.sc.result;
			};
			before(async () => {
				h = await serve(combo, `warm-${combo.mode.replace(' ', '')}-${combo.who}`, { modules: true });
				writeFile(h.root, 'workspace/__init__.py', plant(victim));
				writeFile(h.root, 'workspace/planted.py', plant(victim));
				writeFile(h.root, 'workspace/planted_zygote.py', PLANT_ZYGOTE);
				chownR(h.ws, combo.who === 'nobody' ? NOBODY : undefined);
				const v = await execPy(h, 'secret = 7', { session: victim }, { timeout: 120000 });
				assert.equal(v.sc.status, 'ok', show(v.text));
			});
			after(async () => { await h?.close(); });

			test('the measured attack: unittest.__main__ reported, its test discovery would import the workspace', { timeout: 120000 }, async () => {
				const r = await execPy(h, 'import sys, types\nsys.modules["unittest.__main__"] = types.ModuleType("unittest.__main__")\nimport unittest.__main__\n1', { session: 'attacker' });
				assert.equal(r.sc.status, 'ok', show(r.text));
				// What the warm-up does with the name takes a few seconds:
				// after them nothing planted ran anywhere.
				await sleep(4000);
				assert.equal(ran(), '', 'the planted code ran');
				await victimKept();
				assert.equal(await fresh('later'), '(False, \'builtins\')');
				await waitLog(h, /warm-up: unittest\.__main__ refused: a __main__ module runs a program when imported/);
			});

			test('an installed module that runs a test discovery at import finds an empty directory', { timeout: 120000 }, async () => {
				await execPy(h, 'import colorsys', { session: 'attacker' });
				// Refused (a discovery in a directory that is gone fails) or
				// loaded: either way nothing of the workspace ran.
				await sleep(4000);
				assert.equal(ran(), '', 'the planted code ran');
				await waitLog(h, /warm-up: colorsys (loaded in the zygote|refused)/);
				await victimKept();
				assert.equal(await fresh('later2'), '(False, \'builtins\')');
			});

			test('code that runs in the probe can neither signal nor read a session, and its own answer gains nothing', { timeout: 120000 }, async () => {
				// The victim's processes as the host sees them (used where
				// the probe cannot list /proc: no pid namespace).
				const pids = descendants(h.pid).filter((p) => {
					try { return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(` ${victim}`); } catch { return false; }
				}).map((p) => p.pid);
				assert.ok(pids.length > 0, 'the victim session is found');
				writeFile(h.root, 'workspace/victims.txt', pids.join('\n'));
				chownR(h.ws, combo.who === 'nobody' ? NOBODY : undefined);
				await execPy(h, 'import wave', { session: 'attacker' });
				await waitFor('the planted code in the probe', () => /warm-up probe wave/.test(ran()));
				await sleep(3000);
				await victimKept();
				const line = ran().split('\n').find((l) => /warm-up probe wave/.test(l));
				assert.doesNotMatch(line, /killed|read the environment/, line);
				assert.match(line, /kill refused: PermissionError/, line);
				assert.equal(await fresh('later3'), '(False, \'builtins\')');
				await waitLog(h, /warm-up: wave (loaded in the zygote|refused)/);
			});

			test('a zygote whose import ran code from the workspace is replaced, though the import failed', { timeout: 120000 }, async () => {
				await execPy(h, 'import mailbox', { session: 'attacker' });
				await waitFor('the planted code in the zygote', () => /planted_zygote/.test(ran()));
				await sleep(3000);
				assert.equal(await fresh('later4'), '(False, \'builtins\')');
				await waitLog(h, /warm-up: mailbox refused: it ran code from outside the installation/);
				await waitLog(h, /the zygote ended/);
			});
		});
	}
});
