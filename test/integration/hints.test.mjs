// Hints that say what to do: a package that is not installed (and
// scripts/setup.sh --full), a relative write into the read-only root.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';
import { SKILL, projectWith, errorLines } from './reply_lib.mjs';


describe('a package that is not installed', () => {
	let h;
	before(async () => { h = await startClient(newProject('missing'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('the hint says it is not installed, what of the usual stack is, and how to add it', async () => {
		// The first of these that this machine lacks (each has a Debian package).
		const pick = await execPy(h, 'import importlib.util\n[m for m in ("xgboost", "cv2", "geopandas", "numba", "h5py", "tables") if importlib.util.find_spec(m) is None][:1]');
		const m = /'(\w+)'/.exec(pick.sc.result);
		assert.ok(m, `this machine lacks one of them: ${pick.sc.result}`);
		const deb = { xgboost: 'python3-xgboost', cv2: 'python3-opencv', geopandas: 'python3-geopandas', numba: 'python3-numba', h5py: 'python3-h5py', tables: 'python3-tables' }[m[1]];
		const r = await execPy(h, `import ${m[1]}`);
		assert.equal(r.sc.error.type, 'ModuleNotFoundError');
		const hint = r.sc.error.hint;
		assert.ok(hint, show(r.text));
		assert.match(hint, new RegExp(`^${m[1]} is not installed on this machine`));
		assert.match(hint, /Installed here: numpy \d[\w.+]*, pandas \d[\w.+]*, matplotlib \d/);
		assert.ok(hint.includes(deb), `names ${deb}: ${hint}`);
		assert.ok(hint.includes('--venv') && hint.includes(`${h.root}/.interpreter-venv`), hint);
		const lines = r.sections.error.trimEnd().split('\n');
		assert.equal(lines[lines.length - 1], hint, 'the hint ends the error section');
		assert.equal(lines[lines.length - 2], `ModuleNotFoundError: No module named '${m[1]}'`);
	});

	test('a name with no known Debian package points to --venv; a missing submodule of an installed package gets no hint', async () => {
		const r = await execPy(h, 'import surely_not_a_real_package_psm');
		assert.match(r.sc.error.hint, /^surely_not_a_real_package_psm is not installed on this machine.*--venv/);
		assert.ok(!r.sc.error.hint.includes('Debian package'), r.sc.error.hint);
		const sub = await execPy(h, 'import numpy.surely_not_a_submodule');
		assert.equal(sub.sc.error.type, 'ModuleNotFoundError');
		assert.equal(sub.sc.error.hint, undefined, show(sub.sc.error));
	});
});

// The hint names the venv as it is: the one the server uses, or a project
// venv that is there but not used (made after the server started, or not
// approved): never "create" one that exists.
describe('a package that is not installed, with a venv', () => {
	const PYV = spawnSync('/usr/bin/python3', ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' }).stdout.trim();
	function fakeVenv(dir) {
		fs.mkdirSync(path.join(dir, `lib/python${PYV}/site-packages`), { recursive: true });
		fs.writeFileSync(path.join(dir, 'pyvenv.cfg'), `home = /usr/bin\ninclude-system-site-packages = true\nversion = ${PYV}.0\n`);
		return dir;
	}

	test('a project venv that exists but is not used: said so, never "create it"', { timeout: 60000 }, async () => {
		const root = newProject('hint-venv-unused');
		const h = await startClient(root, { structured: true });
		try {
			fakeVenv(path.join(root, '.interpreter-venv'));
			const r = await execPy(h, 'import surely_not_a_real_package_psm');
			const hint = r.sc.error.hint;
			assert.ok(hint.includes(`${root}/.interpreter-venv exists, but this server does not use it`), hint);
			assert.doesNotMatch(hint, /create/);
			assert.ok(hint.includes(`${root}/.interpreter-venv/bin/pip install surely_not_a_real_package_psm`), hint);
			assert.match(hint, /restart/);
		} finally { await h.close(); }
	});

	test('the venv the server uses (--venv): install it there', { timeout: 60000 }, async () => {
		const root = newProject('hint-venv-used');
		const venv = fakeVenv(path.join(newProject('hint-venv-dir'), 'v'));
		const h = await startClient(root, { structured: true, args: ['--venv', venv] });
		try {
			const r = await execPy(h, 'import surely_not_a_real_package_psm');
			const hint = r.sc.error.hint;
			assert.ok(hint.includes(`install it into the venv this server uses, ${venv} (${venv}/bin/pip install surely_not_a_real_package_psm)`), hint);
			assert.doesNotMatch(hint, /create/);
		} finally { await h.close(); }
	});
});

describe('scripts/setup.sh --full', () => {
	// apt-get and dpkg-query replaced by stubs on PATH: every package is
	// "missing", and the stub records what would be installed.
	function run(args) {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-setup-'));
		fs.writeFileSync(path.join(dir, 'dpkg-query'), '#!/bin/sh\necho not-installed\n', { mode: 0o755 });
		fs.writeFileSync(path.join(dir, 'apt-get'), `#!/bin/sh\necho "$@" >> ${dir}/log\n`, { mode: 0o755 });
		fs.writeFileSync(path.join(dir, 'sudo'), '#!/bin/sh\nexec "$@"\n', { mode: 0o755 });
		const p = spawnSync('sh', [path.join(REPO, 'scripts/setup.sh'), ...args], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: 'utf8' });
		let log = '';
		try { log = fs.readFileSync(path.join(dir, 'log'), 'utf8'); } catch { /* none */ }
		fs.rmSync(dir, { recursive: true, force: true });
		return { status: p.status, stderr: p.stderr, installed: (log.split('\n').find((l) => l.includes('install')) || '').split(/\s+/) };
	}
	const FULL = ['python3-scipy', 'python3-sklearn', 'python3-statsmodels', 'python3-seaborn', 'python3-sympy', 'python3-openpyxl'];

	test('the default installs none of the full stack; --full adds all six', () => {
		const plain = run([]);
		assert.equal(plain.status, 0, plain.stderr);
		assert.ok(plain.installed.includes('python3-numpy'), show(plain.installed));
		for (const p of FULL) assert.ok(!plain.installed.includes(p), `${p} without --full`);
		const full = run(['--full']);
		assert.equal(full.status, 0, full.stderr);
		for (const p of [...FULL, 'python3-numpy']) assert.ok(full.installed.includes(p), `${p} with --full: ${show(full.installed)}`);
	});

	test('an unknown option is refused (exit 2)', () => {
		const r = run(['--ful']);
		assert.equal(r.status, 2);
		assert.match(r.stderr, /unknown option --ful/);
	});
});

describe('a relative write into the read-only project root', () => {
	let h;
	before(async () => { h = await startClient(newProject('relwrite'), { structured: true }); });
	after(async () => { await h?.close(); });

	for (const [what, code, want] of [
		['open("ans.png")', 'open("ans.png", "wb").write(b"x")', 'workspace/ans.png'],
		['plt.savefig("ans.png") (library frames in between)', 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig("ans.png")', 'workspace/ans.png'],
		['df.to_csv("train.csv")', 'import pandas as pd\npd.DataFrame({"a": [1]}).to_csv("train.csv")', 'workspace/train.csv'],
		['os.makedirs("results/run1") (refused at its first folder)', 'import os\nos.makedirs("results/run1")', 'workspace/results'],
	]) {
		test(`${what}: the hint names the exact path to write instead`, async () => {
			const r = await execPy(h, code);
			assert.equal(r.sc.error?.denied_by, 'fs_write', show(r.text));
			assert.ok(r.sc.error.hint.includes(`write ${want} instead`), r.sc.error.hint);
			assert.ok(!fs.existsSync(path.join(h.root, want.replace('workspace/', ''))), 'nothing was written in the root');
		});
	}

	test('SKILL.md tells the model to give every file its workspace path', () => {
		const body = SKILL.split('\n---\n').slice(1).join('\n---\n');
		assert.match(body, /never a bare name such as `ans\.png`/);
	});
});

describe('a secret under the project', () => {
	test('reading .env is refused with a hint that never says to copy it into the workspace', { timeout: 60000 }, async (t) => {
		// Not under /tmp, where the jail's private /tmp would cover the project.
		const root = fs.realpathSync(fs.mkdtempSync('/var/tmp/psm-hint-secret-'));
		fs.chmodSync(root, 0o755);
		t.after(() => fs.rmSync(root, { recursive: true, force: true }));
		writeFile(root, '.env', 'API_KEY=TOP-SECRET-CANARY\n');
		const h = await startClient(root, { structured: true });
		try {
			const r = await execPy(h, 'open(".env").read()');
			assert.equal(r.sc.error?.denied_by, 'fs_read', show(r.sc));
			assert.doesNotMatch(r.sc.error.hint, /put input files/, r.sc.error.hint);
			assert.match(r.sc.error.hint, /secrets .* Do not copy such a file into workspace\//, r.sc.error.hint);
			// A file outside the project still gets the way to bring one in.
			const out = await execPy(h, 'open("/var/tmp/psm-surely-not-here/data.csv").read()');
			assert.equal(out.sc.error?.denied_by, 'fs_read', show(out.sc));
			assert.match(out.sc.error.hint, /put input files in workspace\//, out.sc.error.hint);
		} finally { await h.close(); }
	});
});
