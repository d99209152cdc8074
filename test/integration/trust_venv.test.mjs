// A project's venv is the project's code.  A cloned repository ships
// .interpreter-venv/ with a .pth file in its site-packages: before, it was
// used with no approval, and the .pth ran inside the zygote (the parent of
// every session, the process that talks to the server).  Now the project's
// venv is used only once the user approves it with --trust (recorded for the
// project's ROOT, by the venv's real path and a fingerprint of pyvenv.cfg and
// its start-up files); any change withdraws it; and even an approved venv
// (or one named with --venv) runs its start-up files in each session only,
// after the fork, never in the zygote or the warm-up's probe.
//
// The planted .pth imports a module of the venv that appends its process's
// command line (ps title: "python-sandbox-mcp: zygote", "...: session NAME")
// to workspace/pth.log: the log, read from outside, says where it ran.
// As root and as nobody, with namespaces and without them (dockerrun).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, show, reachableArgv } from './lib.mjs';
import { tmpDir } from './trust_lib.mjs';

const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const PYVER = (/python3\.(\d+)/.exec(fs.readdirSync('/usr/lib').filter((d) => /^python3\.\d+$/.test(d)).sort().pop()) || [])[1];
const SITE = `lib/python3.${PYVER}/site-packages`;

/** Writes a venv at dir: pyvenv.cfg, a package, and a .pth whose import
 *  line runs psm_vstart (the marker). */
export function plantVenv(dir, log) {
	writeFile(dir, 'pyvenv.cfg', `home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.${PYVER}.2\n`);
	writeFile(dir, `${SITE}/psm_vpkg/__init__.py`, 'MAGIC = "vpkg-ok"\n');
	writeFile(dir, `${SITE}/psm_probe.pth`, 'import psm_vstart\n');
	writeFile(dir, `${SITE}/psm_vstart.py`, [
		'try:',
		`    with open(${JSON.stringify(log)}, "a") as f:`,
		'        f.write(open("/proc/self/cmdline").read().replace("\\0", " ").strip() + "\\n")',
		'except Exception:',
		'    pass',
		'',
	].join('\n'));
}

function chownR(p, uid) {
	spawnSync('chown', ['-R', `${uid}:${uid}`, p]);
}

const readLog = (f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter(Boolean) : []);

const modes = [['namespaces', []], ['no namespaces', [DOCKERRUN]]];
const whos = AS_ROOT ? ['root', 'nobody'] : ['user'];

for (const [mode, pre] of modes) {
	for (const who of whos) {
		describe(`the project's venv, ${mode}, the server run by ${who}`, () => {
			let root, venv, log, cfg, home, env;
			const asNobody = who === 'nobody';
			const NOBODY_ARGS = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'];
			// The server in this mode (dockerrun execs it: same pid), as who;
			// nobody runs copies it can reach (the checkout may be private,
			// and dockerrun drops its capabilities before it execs).
			const argv = asNobody ? reachableArgv(pre) : [...pre, BIN];
			const launch = asNobody ? { command: 'setpriv', commandArgs: [...NOBODY_ARGS, ...argv] }
				: { command: argv[0], commandArgs: argv.slice(1) };
			const start = () => startClient(root, { structured: true, env, ...launch });
			// The command line as the same user (the mode plays no part).
			function cli(args) {
				return spawnSync(asNobody ? 'setpriv' : BIN, asNobody ? [...NOBODY_ARGS, BIN, ...args] : args,
					{ encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env } });
			}

			before(() => {
				root = newProject(`tv-${mode.replace(' ', '')}-${who}`);
				venv = path.join(root, '.interpreter-venv');
				log = path.join(root, 'workspace', 'pth.log');
				fs.mkdirSync(path.join(root, 'workspace'));
				plantVenv(venv, log);
				cfg = tmpDir(`tvcfg-${who}`);
				home = tmpDir(`tvhome-${who}`);
				if (asNobody) for (const d of [root, cfg, home]) chownR(d, NOBODY);
				env = { XDG_CONFIG_HOME: cfg, HOME: home };
			});
			after(() => { for (const d of [cfg, home]) fs.rmSync(d, { recursive: true, force: true }); });

			test('unapproved: not used, nothing of it runs anywhere, each session\'s first reply says so and names the command', { timeout: 120000 }, async () => {
				const h = await start();
				try {
					const r = await execPy(h, 'import psm_vpkg', { session: 'a' });
					assert.equal(r.sc.error?.type, 'ModuleNotFoundError', show(r.sc));
					assert.match(r.sc.note, /virtual environment \(.*\.interpreter-venv\) is not approved on this machine, so the interpreter runs without it/, show(r.sc));
					assert.ok(r.sc.note.includes(`python-sandbox-mcp --trust --root '${root}'`), r.sc.note);
					// The hint does not say to create the venv that is there.
					assert.match(r.sc.error.hint, /exists but is not used until the user approves it/, r.sc.error.hint);
					const b = await execPy(h, '1', { session: 'b' });
					assert.match(b.sc.note, /is not approved on this machine/, 'every session\'s first reply');
					const again = await execPy(h, '2', { session: 'b' });
					assert.equal(again.sc.note, undefined, 'the first reply only');
					if (mode === 'no namespaces') assert.match(h.stderr(), /mode: Landlock \+ seccomp/);
				} finally { await h.close(); }
				assert.deepEqual(readLog(log), [], 'the venv\'s .pth ran nowhere');
			});

			test('--trust shows it with its fingerprint and approves it; then its .pth runs in each session only, never in the zygote', { timeout: 170000 }, async () => {
				const t = cli(['--trust', '--yes', '--root', root]);
				assert.equal(t.status, 0, t.stdout + t.stderr);
				assert.match(t.stdout, /virtual environment: .*\.interpreter-venv\nfingerprint: [0-9a-f]{64}, of the files that run when its site-packages are added:\n  - pyvenv\.cfg\n  - lib\/python3\.\d+\/site-packages\/psm_probe\.pth\n  - lib\/python3\.\d+\/site-packages\/psm_vstart\.py\n/, t.stdout);
				const store = fs.readFileSync(path.join(cfg, 'python-sandbox-mcp', 'trusted'), 'utf8');
				assert.match(store, new RegExp(`^[0-9a-f]{64} ${root}\tvenv\t${venv}$`, 'm'), store);
				const h = await start();
				try {
					const r = await execPy(h, 'import psm_vpkg\npsm_vpkg.MAGIC', { session: 's1' });
					assert.equal(r.sc.result, "'vpkg-ok'", show(r.sc));
					assert.equal(r.sc.note, undefined, 'nothing withheld: no note');
					await execPy(h, '1', { session: 's2' });
					const z = await execPy(h, 'import sys\n[p for p in sys.path if "interpreter-venv" in p]', { session: 's2', reset: true });
					assert.match(z.sc.result, /site-packages/, show(z.sc));
				} finally { await h.close(); }
				const lines = readLog(log);
				assert.deepEqual(lines, ['python-sandbox-mcp: session s1', 'python-sandbox-mcp: session s2', 'python-sandbox-mcp: session s2'],
					`the .pth ran once per session (reset: a new one), never in the zygote: ${JSON.stringify(lines)}`);
			});

			test('one changed byte of a start-up file withdraws the approval', { timeout: 120000 }, async () => {
				fs.appendFileSync(path.join(venv, SITE, 'psm_vstart.py'), '# changed\n');
				fs.rmSync(log, { force: true });
				const h = await start();
				try {
					const r = await execPy(h, 'import psm_vpkg');
					assert.equal(r.sc.error?.type, 'ModuleNotFoundError', show(r.sc));
					assert.match(r.sc.note, /is not approved on this machine/);
				} finally { await h.close(); }
				assert.deepEqual(readLog(log), []);
				const chk = cli(['--untrust', '--root', root]);
				assert.equal(chk.status, 0, chk.stdout + chk.stderr);
				assert.match(chk.stdout, /the project's venv is no longer approved/);
			});
		});
	}
}

describe('the project\'s venv: --check, --venv, and a venv that is another project\'s', () => {
	let cfg, env;
	before(() => { cfg = tmpDir('tvcfg-misc'); env = { XDG_CONFIG_HOME: cfg }; });
	after(() => fs.rmSync(cfg, { recursive: true, force: true }));
	const cli = (args) => spawnSync(BIN, args, { encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env } });

	test('--check shows the venv and whether it is approved; exit 1 while it is not', { timeout: 175000 }, () => {
		const root = newProject('tv-check');
		plantVenv(path.join(root, '.interpreter-venv'), path.join(root, 'workspace', 'pth.log'));
		const c = cli(['--check', '--root', root]);
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.match(c.stdout, /^venv: .*\.interpreter-venv \(ROOT\/\.interpreter-venv: NOT approved on this machine, not used\)$/m);
		assert.match(c.stdout, /  venv: .*\(ROOT\/\.interpreter-venv\)\n  fingerprint: [0-9a-f]{64}, of:\n  - pyvenv\.cfg\n/);
		assert.match(c.stdout, /state: NOT approved on this machine \(for this project\): the interpreter runs without it/);
		assert.equal(cli(['--trust', '--yes', '--root', root]).status, 0);
		const ok = cli(['--check', '--root', root]);
		assert.equal(ok.status, 0, ok.stdout + ok.stderr);
		assert.match(ok.stdout, /^venv: .* \(ROOT\/\.interpreter-venv, approved, read-only, Python 3\.\d+\)$/m);
		assert.match(ok.stdout, /its \.pth files run, in each session \(never in the zygote\)/);
		const lines = readLog(path.join(root, 'workspace', 'pth.log'));
		assert.ok(lines.every((l) => /^python-sandbox-mcp: session /.test(l)), `--check's zygote ran no .pth: ${JSON.stringify(lines)}`);
	});

	test('--venv DIR is the user\'s word (no approval) and its .pth runs in sessions only; a venv symlinked to another project\'s approved one is not approved', { timeout: 175000 }, async () => {
		// --venv: outside any project, never approved.
		const root = newProject('tv-given');
		fs.mkdirSync(path.join(root, 'workspace'));
		const log = path.join(root, 'workspace', 'pth.log');
		const given = path.join(tmpDir('tv-given-venv'), 'venv');
		plantVenv(given, log);
		let h = await startClient(root, { structured: true, env, args: ['--venv', given] });
		try {
			const r = await execPy(h, 'import psm_vpkg\npsm_vpkg.MAGIC', { session: 'g' });
			assert.equal(r.sc.result, "'vpkg-ok'", show(r.sc));
			assert.equal(r.sc.note, undefined);
		} finally { await h.close(); }
		assert.deepEqual(readLog(log), ['python-sandbox-mcp: session g']);

		// Project A's venv is approved; project B's .interpreter-venv is a
		// symlink to it: its real path is A's, but B was never approved.
		const a = newProject('tv-a');
		plantVenv(path.join(a, '.interpreter-venv'), path.join(a, 'workspace', 'pth.log'));
		assert.equal(cli(['--trust', '--yes', '--root', a]).status, 0);
		const b = newProject('tv-b');
		fs.mkdirSync(path.join(b, 'workspace'));
		fs.symlinkSync(path.join(a, '.interpreter-venv'), path.join(b, '.interpreter-venv'));
		h = await startClient(b, { structured: true, env });
		try {
			const r = await execPy(h, 'import psm_vpkg');
			assert.equal(r.sc.error?.type, 'ModuleNotFoundError', show(r.sc));
			assert.match(r.sc.note, /is not approved on this machine/);
		} finally { await h.close(); }
		assert.deepEqual(readLog(path.join(a, 'workspace', 'pth.log')), [], 'nothing of A\'s venv ran for B');
	});
});
