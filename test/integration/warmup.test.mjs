// Learned warm-up: the zygote learns which modules this project's sessions
// import and loads them while idle, so a fresh session starts with them.
// What a session reports is hostile: these tests try each way a session could
// use the learned list to run its own code in the zygote (the parent of every
// later session) and check the effect from outside: marker files the planted
// modules write, the saved list in the user's state directory, the server's
// log, and what a later fresh session (after reset) finds in sys.modules.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';

import { startClient, execPy, newProject, writeFile, sleep, show, BIN, descendants } from './lib.mjs';

// The jail without namespaces (Landlock + seccomp), as in a container.
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');

const handles = [];
after(async () => {
	for (const h of handles) {
		try { process.kill(h.pid, 'SIGKILL'); } catch { /* gone */ }
		try { await h.close(); } catch { /* gone */ }
	}
});

function stateHome() {
	return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'psm-warmstate-')));
}

async function start(root, xdg, args = [], launch = {}) {
	const h = await startClient(root, { structured: true, args: ['--log-level', 'info', ...args], env: { XDG_STATE_HOME: xdg }, ...launch });
	handles.push(h);
	return h;
}

function listPath(xdg, root) {
	const hex = crypto.createHash('sha256').update(root).digest('hex');
	return path.join(xdg, 'python-sandbox-mcp', `warm-${hex}.json`);
}

function savedList(xdg, root) {
	const p = listPath(xdg, root);
	return fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, 'utf8')).modules : null;
}

/** Waits until the server's log matches re (the zygote's answers are logged). */
async function waitLog(h, re, ms = 90000) {
	const t0 = Date.now();
	while (!re.test(h.stderr())) {
		if (Date.now() - t0 > ms) throw new Error(`no ${re} in the log after ${ms} ms; tail: ${h.stderr().slice(-3000)}`);
		await sleep(100);
	}
}

async function ok(h, code, extra = {}) {
	const r = await execPy(h, code, extra);
	assert.equal(r.sc.status, 'ok', show(r.text));
	return r;
}

/** Which of these modules a brand-new session holds before any import of its own. */
async function heldAtStart(h, session, names) {
	const r = await ok(h, `import sys\n[n for n in ${JSON.stringify(names)} if n in sys.modules]`, { session });
	return JSON.parse(r.sc.result.replace(/'/g, '"'));
}

describe('learned warm-up', () => {
	test('a fresh session starts with what earlier sessions imported; the list survives a restart', { timeout: 240000 }, async () => {
		const root = newProject('warm');
		const xdg = stateHome();
		let h = await start(root, xdg);
		// Before anything is learned, a fresh session holds neither.
		assert.deepEqual(await heldAtStart(h, 'before', ['sqlite3', 'xml.dom.minidom']), []);
		await ok(h, 'import sqlite3\nfrom xml.dom import minidom\nsqlite3.sqlite_version', { session: 'learner' });
		await waitLog(h, /warm-up: learned sqlite3/);
		await waitLog(h, /warm-up: learned xml\.dom\.minidom/);
		assert.deepEqual(await heldAtStart(h, 'fresh', ['sqlite3', 'xml.dom.minidom']), ['sqlite3', 'xml.dom.minidom']);
		// reset: true forks from the zygote too.
		const r = await execPy(h, 'import sys\n"sqlite3" in sys.modules', { session: 'learner', reset: true });
		assert.equal(r.sc.result, 'True', show(r.text));

		// Saved in the user's state directory, private, never in the project.
		const p = listPath(xdg, root);
		assert.deepEqual(new Set(savedList(xdg, root)), new Set(['sqlite3', 'xml.dom.minidom']));
		assert.equal(fs.lstatSync(p).mode & 0o777, 0o600);
		assert.equal(fs.statSync(path.dirname(p)).mode & 0o777, 0o700);
		const inProject = fs.readdirSync(root, { recursive: true }).filter((f) => /warm/.test(f));
		assert.deepEqual(inProject, []);
		await h.close();

		// A new server: the first call never waits for the learned list (it
		// is loaded after the first reply), later fresh sessions hold it.
		h = await start(root, xdg);
		assert.deepEqual(await heldAtStart(h, 'first', ['sqlite3', 'xml.dom.minidom']), []);
		await waitLog(h, /warm-up: sqlite3 loaded in the zygote/);
		await waitLog(h, /warm-up: xml\.dom\.minidom loaded in the zygote/);
		assert.deepEqual(await heldAtStart(h, 'second', ['sqlite3', 'xml.dom.minidom']), ['sqlite3', 'xml.dom.minidom']);
		await h.close();

		// --warmup off: nothing loaded, nothing learned; clear: forgotten.
		h = await start(root, xdg, ['--warmup', 'off']);
		await ok(h, 'import mailbox');
		await sleep(1500);
		assert.deepEqual(await heldAtStart(h, 'off', ['sqlite3', 'mailbox']), []);
		assert.doesNotMatch(h.stderr(), /warm-up: learned mailbox/);
		await h.close();
		h = await start(root, xdg, ['--warmup', 'clear']);
		await ok(h, '1');
		assert.equal(fs.existsSync(p), false, 'the list is removed');
		await sleep(1500);
		assert.deepEqual(await heldAtStart(h, 'cleared', ['sqlite3']), []);
		await h.close();
	});

	test('nothing is loaded while a call runs: the zygote waits until no call is in flight', { timeout: 240000 }, async () => {
		const root = newProject('warm-busy');
		const xdg = stateHome();
		const h = await start(root, xdg);
		await ok(h, '1', { session: 'sleeper' });
		const sleeping = execPy(h, 'import time\ntime.sleep(6)\n"slept"', { session: 'sleeper' });
		await sleep(500);
		await ok(h, 'import sqlite3', { session: 'a' });
		// The other session's call still runs: the zygote starts nothing.
		await sleep(3000);
		assert.doesNotMatch(h.stderr(), /warm-up: sqlite3 loaded/);
		const r = await sleeping;
		assert.equal(r.sc.result, "'slept'", show(r.text));
		await waitLog(h, /warm-up: sqlite3 loaded in the zygote/);
		assert.deepEqual(await heldAtStart(h, 'fresh', ['sqlite3']), ['sqlite3']);
		await h.close();
	});

	test('a probe under way is stopped while a call runs, and goes on after it', { timeout: 240000 }, async () => {
		// A probe that went on importing beside a call took the CPU the
		// call waited for (a fresh session's first import of a large
		// package, 1.4x as long).  Many names, so that the zygote probes
		// them one after the other for a second or more after the reply;
		// a call that comes meanwhile must find the probe stopped.
		// As many as one call may teach (the server keeps 16 candidates);
		// the last ones are probed first, and take 100 ms or more each.
		const names = ['asyncio', 'unittest.mock', 'http.client', 'xmlrpc.client', 'email.mime.multipart',
			'sqlite3', 'xml.dom.minidom', 'wave', 'ftplib', 'imaplib', 'smtplib', 'poplib', 'mailbox',
			'dbm', 'matplotlib.backends.backend_pdf', 'numpy.distutils'];
		const probes = (pid) => descendants(pid).filter((p) => {
			try { return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes('warm-up probe'); } catch { return false; }
		});
		const cpu = (pid) => {
			try {
				const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
				const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
				return { state: f[0], ticks: Number(f[11]) + Number(f[12]) };
			} catch { return null; }
		};
		let seen = 0;
		for (let attempt = 0; attempt < 4 && !seen; attempt++) {
			const root = newProject('warm-stop');
			const xdg = stateHome();
			const h = await start(root, xdg);
			await ok(h, '1', { session: 'b' });
			await ok(h, names.map((n) => `import ${n}`).join('\n'), { session: 'a' });
			// The reply is out; the zygote starts its first probe once the
			// session's checkpoint is forked (no probe is forked beside a
			// copy), which under the sanitizers on a loaded machine took
			// longer than the 50 ms this test used to wait: the call then
			// came first, and every probe ran after it.  Waited for.
			for (let i = 0; i < 2000 && !probes(h.pid).length; i++)
				await sleep(10);
			const call = execPy(h, 'import time\ntime.sleep(2.5)\n"slept"', { session: 'b' });
			await sleep(100);
			const during = probes(h.pid).map((p) => ({ pid: p.pid, a: cpu(p.pid) }));
			await sleep(1000);
			for (const p of during) {
				const b = cpu(p.pid);
				if (!p.a || !b) continue; // ended before the call came
				seen++;
				assert.equal(p.a.state, 'T', `probe ${p.pid} runs beside a call (state ${p.a.state})`);
				assert.equal(b.state, 'T', `probe ${p.pid} runs beside a call (state ${b.state})`);
				assert.equal(b.ticks, p.a.ticks, `probe ${p.pid} used CPU while the call ran`);
			}
			const r = await call;
			assert.equal(r.sc.result, "'slept'", show(r.text));
			if (seen) {
				// Behaviour unchanged: the probes go on after the call,
				// and every name is learned, none refused as slow.
				for (const n of names)
					await waitLog(h, new RegExp(`warm-up: learned ${n.replace(/\./g, '\\.')}\n`));
				assert.doesNotMatch(h.stderr(), /refused: importing it took/);
				assert.deepEqual(await heldAtStart(h, 'fresh', ['asyncio', 'numpy.distutils']), ['asyncio', 'numpy.distutils']);
			}
			await h.close();
		}
		assert.ok(seen > 0, 'no probe under way was found while the next call ran, in 4 attempts (one that runs on beside the call is over by then)');
	});

	test('a name the zygote was loading when it died is not sent to the next zygote (no crash loop)', { timeout: 240000 }, async () => {
		const root = newProject('warm-crash');
		const xdg = stateHome();
		const h = await start(root, xdg);
		await ok(h, '1', { session: 'sleeper' });
		// A call in flight holds the warm-up back: the name stays pending.
		const sleeping = execPy(h, 'import time\ntime.sleep(30)', { session: 'sleeper' });
		await sleep(500);
		await ok(h, 'import sqlite3', { session: 'a' });
		await sleep(500);
		// The zygote dies with the name unanswered, as if importing it had
		// crashed it.
		const zygotes = descendants(h.pid).filter((p) => {
			try { return fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(': zygote'); } catch { return false; }
		});
		assert.ok(zygotes.length > 0, 'the zygote is found');
		for (const z of zygotes) process.kill(z.pid, 'SIGKILL');
		const r = await sleeping;
		assert.notEqual(r.sc.status, 'ok', show(r.text));
		await ok(h, '1', { session: 'after' });
		await waitLog(h, /warm-up: sqlite3 refused: the zygote ended before it had loaded it/);
		// Reported again, it is not tried again in this run.
		await ok(h, 'import sqlite3', { session: 'a2' });
		await sleep(2000);
		assert.deepEqual(await heldAtStart(h, 'fresh', ['sqlite3']), []);
		assert.doesNotMatch(h.stderr(), /warm-up: sqlite3 loaded/);
		await h.close();
	});

	test('a module the session wrote (or a package shadowing a real name) never runs in the zygote or a later session', { timeout: 240000 }, async () => {
		const root = newProject('warm-evil');
		const xdg = stateHome();
		const h = await start(root, xdg);
		// Each planted module appends a line to a file in the workspace
		// when it is imported, and plants a flag in builtins.
		const PLANT = (tag) => `import builtins, os
with open(os.path.join(${JSON.stringify(root)}, "workspace", "ran.txt"), "a") as f:
    f.write("${tag} %d\\n" % os.getpid())
builtins.PLANTED = "${tag}"
`;
		writeFile(root, 'workspace/evilmod.py', PLANT('evilmod'));
		writeFile(root, 'workspace/shadow/sqlite3/__init__.py', PLANT('shadow') + 'sqlite_version = "fake"\n');
		writeFile(root, 'workspace/shadow/mailbox.py', PLANT('mailbox'));
		let r = await ok(h, `import sys
sys.path.insert(0, "workspace")
sys.path.insert(0, "workspace/shadow")
import evilmod, sqlite3, mailbox
(sqlite3.sqlite_version, PLANTED)`, { session: 'attacker' });
		assert.equal(r.sc.result, "('fake', 'mailbox')");
		const ran = () => fs.readFileSync(path.join(root, 'workspace', 'ran.txt'), 'utf8').trim().split('\n');
		assert.equal(ran().length, 3, 'each planted module ran once, in the session');

		await waitLog(h, /warm-up: evilmod refused: evilmod is not installed/);
		// The real sqlite3 and mailbox are installed: those names are
		// learned, and what the zygote loads is the installation's.
		await waitLog(h, /warm-up: learned sqlite3/);
		await waitLog(h, /warm-up: learned mailbox/);
		r = await ok(h, `import sys, builtins
(sorted(n for n in ("evilmod", "sqlite3", "mailbox") if n in sys.modules),
 sys.modules["sqlite3"].__file__.startswith("/usr/"), sys.modules["mailbox"].__file__.startswith("/usr/"),
 hasattr(builtins, "PLANTED"))`, { session: 'attacker', reset: true });
		assert.equal(r.sc.result, "(['mailbox', 'sqlite3'], True, True, False)", show(r.text));
		r = await ok(h, 'import sys, builtins\n("evilmod" in sys.modules, hasattr(builtins, "PLANTED"), sys.path[0])', { session: 'other' });
		assert.equal(r.sc.result.startsWith('(False, False, '), true, show(r.text));
		assert.doesNotMatch(r.sc.result, /workspace/);
		assert.equal(ran().length, 3, 'no planted module ran in the zygote, its probe or a later session');
		assert.deepEqual(new Set(savedList(xdg, root)), new Set(['sqlite3', 'mailbox']));
		await h.close();
	});

	test('a forged report: malformed names, too many names, names that fail to import', { timeout: 240000 }, async () => {
		const root = newProject('warm-forge');
		const xdg = stateHome();
		const h = await start(root, xdg);
		// The session owns the bootstrap that writes its result: it can
		// report anything.
		const forge = (names) => `import _psm\n_psm._imports_of = lambda tree: ${JSON.stringify(names)}\n1`;
		await ok(h, forge(['../../etc/passwd', 'os;import x', 'a'.repeat(200), 'évil', '.x', 'x.', '1abc', 'wave']), { session: 'f' });
		await waitLog(h, /warm-up: learned wave/);
		// More names than a cell reports (the bootstrap sends 16 at most):
		// the result's decoder refuses the whole result, and says why.
		const many = Array.from({ length: 17 }, (_, i) => (i === 0 ? 'colorsys' : `m${i}`));
		const r = await execPy(h, `import _psm\n_psm._RESULT_IMPORTS = 17\n${forge(many)}`, { session: 'f' });
		assert.equal(r.sc.status, 'crashed', show(r.text));
		assert.match(r.sc.error.message, /broke its protocol with the server \(a W_RESULT whose "imports" holds more than 16 entries \(17\)\)/, show(r.text));
		// A name that fails to import is refused and never saved; one the
		// zygote must never hold (it prints on import) is refused at once.
		await ok(h, forge(['matplotlib.backends.backend_qtagg', 'this']), { session: 'f' });
		await waitLog(h, /warm-up: matplotlib\.backends\.backend_qtagg refused: importing matplotlib\.backends\.backend_qtagg failed/);
		await waitLog(h, /warm-up: this refused: not a module to hold in the zygote/);
		await sleep(1000);
		assert.deepEqual(savedList(xdg, root), ['wave']);
		assert.deepEqual(await heldAtStart(h, 'fresh', ['wave', 'colorsys', 'this', 'matplotlib.backends.backend_qtagg']), ['wave']);
		for (const bad of ['etc/passwd', 'os;import', 'aaaaaaaaaa', 'évil', 'm16', 'colorsys'])
			assert.equal(h.stderr().includes(`warm-up: learned ${bad}`), false, bad);
		await h.close();
	});

	test('a module in a site directory the sandbox can write is refused (a venv inside the workspace), also without namespaces', { timeout: 240000 }, async () => {
		for (const launch of [{}, { command: DOCKERRUN, commandArgs: [BIN] }]) {
			const root = newProject('warm-venv');
			const xdg = stateHome();
			const [maj, min] = ['3', (/python3\.(\d+)/.exec(fs.readdirSync('/usr/lib').filter((d) => /^python3\.\d+$/.test(d)).sort().pop()) || [])[1]];
			const venv = path.join(root, 'workspace', 'venv');
			writeFile(root, 'workspace/venv/pyvenv.cfg', `home = /usr/bin\ninclude-system-site-packages = true\nversion = ${maj}.${min}.0\n`);
			// Without namespaces the workspace is writable beneath the venv
			// too: what the host plants here, a session could have written.
			writeFile(root, `workspace/venv/lib/python${maj}.${min}/site-packages/venvplant.py`,
				`import builtins, os\nopen(os.path.join(${JSON.stringify(root)}, "workspace", "ran.txt"), "a").write("venvplant\\n")\nbuiltins.PLANTED = 1\n`);
			const h = await start(root, xdg, ['--venv', venv], launch);
			await ok(h, 'import venvplant, sqlite3', { session: 's' });
			await waitLog(h, /warm-up: venvplant refused: venvplant is not installed/);
			await waitLog(h, /warm-up: learned sqlite3/);
			const r = await ok(h, 'import sys, builtins\n("venvplant" in sys.modules, "sqlite3" in sys.modules, hasattr(builtins, "PLANTED"))', { session: 's', reset: true });
			assert.equal(r.sc.result, '(False, True, False)', show(r.text));
			assert.equal(fs.readFileSync(path.join(root, 'workspace', 'ran.txt'), 'utf8'), 'venvplant\n', 'it ran once, in the session');
			await h.close();
		}
	});

	test('a list inside the project (state directory there) is neither believed nor written', { timeout: 240000 }, async () => {
		const root = newProject('warm-inside');
		const xdg = path.join(root, '.state');
		// What a cloned repository could ship: a list naming a module.
		writeFile(root, `.state/python-sandbox-mcp/warm-${crypto.createHash('sha256').update(root).digest('hex')}.json`,
			JSON.stringify({ version: 1, root, modules: ['wave'] }));
		fs.chmodSync(path.join(root, '.state'), 0o700);
		fs.chmodSync(path.join(root, '.state', 'python-sandbox-mcp'), 0o700);
		const h = await start(root, xdg);
		await ok(h, 'import sqlite3');
		await waitLog(h, /warm-up: learned modules are kept for this run only: the state directory .* lies inside the project/);
		await waitLog(h, /warm-up: learned sqlite3/);
		assert.deepEqual(await heldAtStart(h, 'fresh', ['wave', 'sqlite3']), ['sqlite3']);
		assert.deepEqual(savedList(xdg, root), ['wave'], 'the file in the project is left as it was');
		await h.close();
	});
});
