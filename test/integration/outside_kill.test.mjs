// Processes killed from outside the product: a session's checkpoint copy
// (the kernel's OOM killer, an operator's kill by name) and the zygote.
// The rollback promise must hold after either: a copy killed while the
// session rests is taken again before the next call, so the next timeout
// still rolls back to the right state; a zygote that dies brings each
// session back at its next call from its saved state (or says the state
// was lost, and why).  No reply may say `kept` or `rolled_back` about a
// state that was lost.  Both jail modes (namespaces, and Landlock + seccomp
// under a container runtime's default rules: build/helpers/dockerrun), as
// root and as nobody; the processes are found and killed from outside by
// their titles, the state checked through the replies.
import { test as testAll, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { newProject, execPy, writeFile, descendants, titleOf, stillAlive, sleep, show, BIN, reachableArgv } from './lib.mjs';
import { start, stateHome, waitSaved, waitLog } from './persist_lib.mjs';

const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;

/** The server's live descendants whose title (cmdline) matches re. */
export function titled(serverPid, re) {
	const out = [];
	for (const p of descendants(serverPid)) {
		if (p.state === 'Z' || p.state === 'X') continue;
		const cmd = titleOf(p.pid);
		if (cmd && re.test(cmd)) out.push({ ...p, cmd });
	}
	return out;
}

/** Polls fn until it returns a truthy value, up to ms; returns the last value. */
async function until(fn, ms = 15000) {
	const end = Date.now() + ms;
	let v = fn();
	while (!v && Date.now() < end) {
		await sleep(50);
		v = fn();
	}
	return v;
}

const COPY = (name = 'default') => new RegExp(`^python-sandbox-mcp: checkpoint ${name} cell \\d+$`);
const ZYGOTE = /^python-sandbox-mcp: zygote$/;

// As nobody (a server without the privilege to raise the copy's
// oom_score_adj, its sandbox in a user namespace) the first and the fourth
// test: the rest of the machinery is the same, and each test costs seconds.
const combos = [];
for (const mode of ['namespaces', 'no namespaces'])
	for (const who of AS_ROOT ? ['root', 'nobody'] : ['user'])
		combos.push({ mode, who, some: who === 'nobody' });
const FEW = new Set([0, 3, 6]);

/** A server in the jail mode and as the user of the combo, with a key
 *  directory of its own (saved sessions). */
async function server(combo, tag, skill, env) {
	const root = newProject(`ok-${tag}`);
	fs.mkdirSync(path.join(root, 'workspace'));
	const args = [];
	if (skill) args.push('--skill', writeFile(root, 'policy/SKILL.md', skill));
	const nobody = combo.who === 'nobody';
	if (nobody) spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root]);
	const xdg = stateHome(nobody ? { uid: NOBODY, gid: NOBODY } : undefined);
	const pre = combo.mode === 'namespaces' ? [] : [DOCKERRUN];
	let launch = {};
	if (nobody)
		launch = { command: 'setpriv', commandArgs: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...reachableArgv(pre)] };
	else if (pre.length)
		launch = { command: DOCKERRUN, commandArgs: [BIN] };
	return start(root, xdg, { extraArgs: args, env, ...launch });
}

/** Kills the one live copy of the session from outside (once it is the
 *  copy of `cell`, when given: the copy after a reply is taken after it);
 *  returns its pid. */
async function killCopy(h, name = 'default', cell) {
	const copies = await until(() => {
		// A child of the session: the session carries the copy's title for
		// the instant of its fork (the copy is born with it).
		const sessions = new Set(titled(h.pid, new RegExp(`^python-sandbox-mcp: session ${name}$`)).map((p) => p.pid));
		const c = titled(h.pid, COPY(name)).filter((p) => sessions.has(p.ppid));
		return c.length === 1 && (cell === undefined || c[0].cmd.endsWith(` cell ${cell}`)) ? c : null;
	});
	assert.ok(copies, `one checkpoint copy of ${name}: ${show(titled(h.pid, /python-sandbox-mcp/))}`);
	process.kill(copies[0].pid, 'SIGKILL');
	return copies[0].pid;
}

/** A live copy of the session other than pid old: a child of the session
 *  (the session itself carries the copy's title for the instant of its
 *  fork, and a saver its copy's for the instant of its own). */
function newCopy(h, old, name = 'default') {
	const sessions = new Set(titled(h.pid, new RegExp(`^python-sandbox-mcp: session ${name}$`)).map((p) => p.pid));
	return titled(h.pid, COPY(name)).find((p) => p.pid !== old && sessions.has(p.ppid));
}

/** Kills the zygote from outside (pid 1 of the jail's pid namespace, below
 *  the intermediate process that waits for it, or the one zygote without
 *  namespaces); waits until it and its sessions are gone and a new one runs. */
async function killZygote(h) {
	const zs = await until(() => { const z = titled(h.pid, ZYGOTE); return z.length ? z : null; });
	assert.ok(zs, 'the zygote is found by its title');
	const pids = new Set(zs.map((p) => p.pid));
	const z = zs.find((p) => pids.has(p.ppid)) || zs[0];
	const below = descendants(z.pid);
	process.kill(z.pid, 'SIGKILL');
	const z2 = await until(() => titled(h.pid, ZYGOTE).some((p) => !pids.has(p.pid))
		&& stillAlive([...zs, ...below]).length === 0, 30000);
	assert.ok(z2, 'the zygote and its sessions are gone, a new zygote is started');
	return z.pid;
}

const SLEEP = 'import time\ntime.sleep(60)';

for (const combo of combos) {
	describe(`${combo.mode}, as ${combo.who}`, () => {
		const hs = [];
		let n = 0;
		// Not run as nobody (FEW): left out, not skipped.
		const test = (name, opts, fn) => { const i = n++; if (!combo.some || FEW.has(i)) testAll(name, opts, fn); };
		after(async () => { for (const h of hs) await h.close().catch(() => {}); });

		test('the copy killed while the session rests: a new one is taken, a timeout rolls back to the right state', { timeout: 120000 }, async () => {
			const h = await server(combo, 'rest');
			hs.push(h);
			let r = await execPy(h, 'x = 41', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			r = await execPy(h, 'x += 1');
			assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.sc));
			const old = await killCopy(h, 'default', 2);
			// Taken again at once, while the session rests.
			const again = await until(() => newCopy(h, old), 30000);
			const t = await execPy(h, `x += 100\n${SLEEP}`, { timeout_s: 2 });
			r = await execPy(h, 'x');
			assert.deepEqual([t.sc.status, t.sc.state, r.sc.status, r.sc.state, r.sc.result], ['timeout', 'rolled_back', 'ok', 'kept', '42'],
				`${show(t.text)}\n${show(r.text)}`);
			assert.ok(again, 'a new copy was taken');
			assert.match(t.text, /killed from outside[^]*a new one was taken/, show(t.sc));
		});

		test('the copy killed during a call: a new one before the next call, which rolls back to the right state', { timeout: 120000 }, async () => {
			const h = await server(combo, 'mid');
			hs.push(h);
			let r = await execPy(h, 'x = 1', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const call = execPy(h, 'import time\ntime.sleep(2)\nx = 50');
			await sleep(500);
			await killCopy(h);
			r = await call;
			assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.sc));
			r = await execPy(h, `x += 1\n${SLEEP}`, { timeout_s: 2 });
			assert.deepEqual([r.sc.status, r.sc.state], ['timeout', 'rolled_back'], show(r.sc));
			r = await execPy(h, 'x');
			assert.equal(r.sc.result, '50', show(r.sc));
		});

		test('the copy killed during a call that then times out: the reply says the state was lost, and why', { timeout: 120000 }, async () => {
			const h = await server(combo, 'lost');
			hs.push(h);
			let r = await execPy(h, 'x = 1', {}, { timeout: 120000 });
			const call = execPy(h, `x = 2\n${SLEEP}`, { timeout_s: 3 });
			await sleep(800);
			await killCopy(h);
			r = await call;
			assert.equal(r.sc.status, 'timeout', show(r.sc));
			assert.notEqual(r.sc.state, 'rolled_back', show(r.sc));
			assert.notEqual(r.sc.state, 'kept', show(r.sc));
			assert.match(r.text, /copy[^]*killed from outside/, show(r.sc));
			r = await execPy(h, "'x' in globals()");
			assert.equal(r.sc.status, 'ok', show(r.sc));
		});

		test('the zygote killed with a saved state: the session comes back from it, the note names what was lost', { timeout: 180000 }, async () => {
			const h = await server(combo, 'zsaved');
			hs.push(h);
			let r = await execPy(h, 'x = 1', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			await waitSaved(h, 1);
			r = await execPy(h, 'y = 2');
			assert.equal(r.sc.state, 'kept', show(r.sc));
			await killZygote(h);
			r = await execPy(h, "(x, 'y' in globals())", {}, { timeout: 120000 });
			assert.deepEqual([r.sc.status, r.sc.state, r.sc.result], ['ok', 'restored', '(1, False)'], show(r.sc));
			assert.match(r.text, /zygote[^]*was killed[^]*after cell 1[^]*cell 2[^]*was lost/, show(r.sc));
			r = await execPy(h, 'x + 1');
			assert.deepEqual([r.sc.state, r.sc.result], ['kept', '2'], show(r.sc));
		});

		test('the zygote killed without a saved state, and during a call: crashed with the reason, then `state new` saying why', { timeout: 180000 }, async () => {
			const h = await server(combo, 'znew');
			hs.push(h);
			let r = await execPy(h, 'x = 1', {}, { timeout: 120000 });
			const call = execPy(h, SLEEP, { timeout_s: 30 });
			await sleep(800);
			await killZygote(h);
			r = await call;
			assert.equal(r.sc.status, 'crashed', show(r.sc));
			assert.equal(r.sc.state, 'new', show(r.sc));
			assert.match(r.text, /zygote/, show(r.sc));
			r = await execPy(h, "'x' in globals()", {}, { timeout: 120000 });
			assert.deepEqual([r.sc.status, r.sc.state, r.sc.result], ['ok', 'new', 'False'], show(r.sc));
			assert.match(r.text, /state was lost: the interpreter's zygote[^]*was killed[^]*no saved state/, show(r.sc));
		});

		test('the copy killed while the session is being frozen after taking it: taken again before it rests', { timeout: 120000 }, async () => {
			// Freezing the session made slow (the zygote's settle, its last
			// step, takes 1.5 s): the copy taken to save the state at rest
			// is killed half a second into the freeze that follows it (the
			// save itself is done by then).
			// Before, the server could not take a new copy then (the
			// session was not idle, its checkpoint still due) and never did
			// once it rested: a later timeout lost the state.
			const h = await server(combo, 'freezing', undefined, { PSM_TEST_ZYGOTE_SETTLE_MS: '1500' });
			hs.push(h);
			let r = await execPy(h, 'x = 41', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			r = await execPy(h, 'x += 1');
			assert.deepEqual([r.sc.status, r.sc.state], ['ok', 'kept'], show(r.sc));
			// The copy that saves the state at rest: the state is saved once
			// it is taken, so nothing takes another unless the server does.
			await waitLog(() => h.stderr(), /at rest: saving the state after cell 2/);
			await sleep(500);
			const old = await killCopy(h, 'default', 2);
			const again = await until(() => newCopy(h, old), 30000);
			assert.ok(again, `a new copy was taken: ${h.stderr().slice(-1500)}`);
			const t = await execPy(h, `x += 100\n${SLEEP}`, { timeout_s: 2 });
			r = await execPy(h, 'x');
			assert.deepEqual([t.sc.status, t.sc.state, r.sc.status, r.sc.state, r.sc.result], ['timeout', 'rolled_back', 'ok', 'kept', '42'],
				`${show(t.text)}\n${show(r.text)}`);
		});

		test('the copy killed a moment before a call is sent, still exiting: taken again first, the timeout rolls back', { timeout: 120000 }, async () => {
			// The kill from outside lands just ahead of the call: the copy
			// is still exiting (a large process takes milliseconds to unmap)
			// when the call would go, so its pidfd does not say it yet.  The
			// server kills it itself at that moment, from a test hook (an
			// outside kill cannot be timed that finely), and the new copy
			// too, as the call goes again.  Before, the call ran with no
			// copy and its timeout lost the state (`new`).
			const h = await server(combo, 'sending', undefined, { PSM_TEST_KILL_COPY_AT_SEND: '2' });
			hs.push(h);
			let r = await execPy(h, 'x = 41', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const t = await execPy(h, `x += 100\n${SLEEP}`, { timeout_s: 2 });
			r = await execPy(h, 'x');
			assert.deepEqual([t.sc.status, t.sc.state, r.sc.status, r.sc.state, r.sc.result], ['timeout', 'rolled_back', 'ok', 'kept', '41'],
				`${show(t.text)}\n${show(r.text)}`);
			assert.match(t.text, /killed from outside[^]*a new one was taken/, show(t.sc));
		});
	});
}
