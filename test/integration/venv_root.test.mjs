// The project venv (ROOT/.interpreter-venv) and --root values that name no
// project directory.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';
import { SKILL, projectWith, errorLines } from './reply_lib.mjs';


describe('the project venv (ROOT/.interpreter-venv)', () => {
	// Made offline: python3 -m venv (no --system-site-packages; it brings
	// pip), then its own pip installs a tiny wheel built here.
	const root = newProject('pvenv');
	const venv = path.join(root, '.interpreter-venv');
	let made;
	before(() => {
		made = spawnSync('/usr/bin/python3', ['-m', 'venv', venv], { encoding: 'utf8', timeout: 120000 });
		const build = [
			'import base64, hashlib, sys, zipfile',
			'files = {"psm_local_probe/__init__.py": "MAGIC = \\"local-probe-ok\\"\\n",',
			'         "psm_local_probe-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: psm-local-probe\\nVersion: 0.1\\n",',
			'         "psm_local_probe-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: psm-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}',
			'rec = "".join("%s,sha256=%s,%d\\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(d.encode()).digest()).rstrip(b"=").decode(), len(d)) for n, d in files.items())',
			'files["psm_local_probe-0.1.dist-info/RECORD"] = rec + "psm_local_probe-0.1.dist-info/RECORD,,\\n"',
			'with zipfile.ZipFile(sys.argv[1], "w") as z:',
			'    for n, d in files.items(): z.writestr(n, d)',
		].join('\n');
		const whl = path.join(root, 'psm_local_probe-0.1-py3-none-any.whl');
		const b = spawnSync('/usr/bin/python3', ['-c', build, whl], { encoding: 'utf8' });
		assert.equal(b.status, 0, b.stderr);
		const pip = spawnSync(path.join(venv, 'bin/pip'), ['install', '--no-index', '--no-deps', '--disable-pip-version-check', whl], { encoding: 'utf8', timeout: 120000 });
		assert.equal(pip.status, 0, pip.stdout + pip.stderr);
		fs.rmSync(whl);
	});

	test('python3 -m venv worked', () => { assert.equal(made.status, 0, made.stderr); });

	test('used without --venv once approved (said in --check and the log); its package imports next to the system stack; read-only', { timeout: 240000 }, async () => {
		// A real venv (pip, setuptools' distutils-precedence.pth) is the
		// project's code: unapproved, not used.
		const cfg = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-pvenv-cfg-'));
		const env = { XDG_CONFIG_HOME: cfg };
		const run = (args) => spawnSync(BIN, args, { encoding: 'utf8', timeout: 120000, input: '', env: { PATH: process.env.PATH, ...env } });
		try {
			const before = run(['--root', root, '--check']);
			assert.match(before.stdout, new RegExp(`^venv: ${venv} \\(ROOT/\\.interpreter-venv: NOT approved on this machine, not used\\)$`, 'm'), before.stdout);
			assert.equal(before.status, 1, 'something is withheld');
			const t = run(['--root', root, '--trust', '--yes']);
			assert.equal(t.status, 0, t.stdout + t.stderr);
			const chk = run(['--root', root, '--check']);
			assert.match(chk.stdout, new RegExp(`^venv: ${venv} \\(ROOT/\\.interpreter-venv, approved, read-only, Python 3\\.\\d+\\)$`, 'm'), chk.stdout);
			const h = await startClient(root, { structured: true, env });
			try {
				const r = await execPy(h, 'import psm_local_probe, numpy\npsm_local_probe.MAGIC');
				assert.equal(r.sc.result, "'local-probe-ok'", show(r.text));
				const w = await execPy(h, `open(${JSON.stringify(path.join(venv, 'pyvenv.cfg'))}, "a").write("x")`);
				assert.equal(w.sc.status, 'error', show(w.text));
				assert.ok(!fs.readFileSync(path.join(venv, 'pyvenv.cfg'), 'utf8').endsWith('x'), 'the venv is read-only');
				assert.match(h.stderr(), new RegExp(`venv: ${venv} \\(ROOT/\\.interpreter-venv, approved`), 'the log says which venv');
			} finally { await h.close(); }
		} finally { fs.rmSync(cfg, { recursive: true, force: true }); }
	});

	test('a venv made by another Python version is refused at start (exit 2) with what to do', () => {
		const other = newProject('pvenv-other');
		const ov = path.join(other, '.interpreter-venv');
		fs.mkdirSync(path.join(ov, 'lib/python3.99/site-packages'), { recursive: true });
		fs.writeFileSync(path.join(ov, 'pyvenv.cfg'), 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.99.1\n');
		for (const args of [['--root', other], ['--root', newProject('pvenv-flag'), '--venv', ov]]) {
			const p = spawnSync(BIN, args, { input: '', encoding: 'utf8', timeout: 20000 });
			assert.equal(p.status, 2, show(p));
			assert.match(p.stderr, /was made by Python 3\.99 \(pyvenv\.cfg\), but this server embeds Python 3\.\d+.*recreate it with python3\.\d+ -m venv/, p.stderr);
			assert.equal(p.stdout, '');
		}
	});
});

describe('--root that is no project directory', () => {
	for (const [what, args, env, want] of [
		['a literal ${workspaceFolder}', ['--root', '${workspaceFolder}'], {}, /--root '\$\{workspaceFolder\}' still holds an unexpanded \$\{\.\.\.\}.*write the project's absolute path instead/],
		['an unexpanded CLAUDE_PROJECT_DIR', [], { CLAUDE_PROJECT_DIR: '${PROJECT}/x' }, /CLAUDE_PROJECT_DIR '\$\{PROJECT\}\/x' still holds an unexpanded/],
		['a directory that does not exist', ['--root', '/nonexistent/psm-project'], {}, /--root '\/nonexistent\/psm-project' is not an existing directory: write the absolute path/],
	]) {
		test(`${what}: a usage error (exit 2) that says what to write`, () => {
			const p = spawnSync(BIN, args, { input: '', encoding: 'utf8', timeout: 20000, env: { PATH: process.env.PATH, ...env } });
			assert.equal(p.status, 2, show(p));
			assert.match(p.stderr, want);
			assert.equal(p.stdout, '');
		});
	}
});
