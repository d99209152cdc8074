// The command line (--version, --help, usage errors,
// --workspace, --timeout) as far as the MCP side sees it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, REPO, SKILL as SKILL_TEXT, RawServer, newProject, show } from './lib.mjs';

function run(args, opts = {}) {
	return spawnSync(BIN, args, { encoding: 'utf8', timeout: 20000, input: '', ...opts });
}

describe('command line', () => {
	test('--version prints the version and exits 0', () => {
		const r = run(['--version']);
		assert.equal(r.status, 0, r.stderr);
		assert.match(r.stdout, /python-sandbox-mcp \d+\.\d+\.\d+/);
	});

	test('--help prints the usage with every option and exits 0', () => {
		const r = run(['--help']);
		assert.equal(r.status, 0, r.stderr);
		const out = r.stdout + r.stderr;
		for (const o of ['--root', '--workspace', '--skill', '--venv', '--timeout', '--memory', '--structured-content', '--log-level', '--check']) {
			assert.ok(out.includes(o), `--help does not mention ${o}`);
		}
	});

	test('-h is --help: the same text, exit 0; any other short option is a usage error', () => {
		const h = run(['-h']), help = run(['--help']);
		assert.equal(h.status, 0, h.stderr);
		assert.equal(h.stdout, help.stdout);
		const x = run(['-x']);
		assert.equal(x.status, 2, `status ${x.status}: ${x.stderr}`);
		assert.equal(x.stdout, '');
		assert.match(x.stderr, /unknown or incomplete option '-x'/);
	});

	test('an unknown option is a usage error: exit 2, one line on stderr, nothing on stdout', () => {
		const r = run(['--root', newProject('cli'), '--no-such-option']);
		assert.equal(r.status, 2, `status ${r.status}: ${r.stderr}`);
		assert.equal(r.stdout, '', 'stdout carries MCP messages only');
		assert.match(r.stderr, /no-such-option/);
	});

	test('a missing --root directory is an error, exit 2', () => {
		const r = run(['--root', '/nonexistent/psm/root']);
		assert.equal(r.status, 2, `status ${r.status}: ${r.stderr}`);
		assert.equal(r.stdout, '');
	});

	test('--root creates workspace/ and workspace/outputs/', async () => {
		const root = newProject('cli');
		const s = new RawServer(root);
		try {
			const r = await s.initialize();
			assert.ok(r.result, show(r));
			assert.ok(fs.statSync(path.join(root, 'workspace/outputs')).isDirectory());
			assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
		} finally { s.kill(); }
	});

	test('--workspace puts the workspace elsewhere; artifacts are named as Python sees them', { timeout: 60000 }, async () => {
		const root = newProject('cli');
		const s = new RawServer(root, { args: ['--workspace', path.join(root, 'ws2')], structured: true });
		try {
			await s.initialize();
			assert.ok(fs.statSync(path.join(root, 'ws2/outputs')).isDirectory());
			const r = await s.callTool('execute_python', { code: 'open("ws2/outputs/a.txt", "w").write("hi")' }, { timeout: 30000 });
			const sc = r.result?.structuredContent;
			assert.equal(sc?.status, 'ok', show(r));
			assert.deepEqual(sc.artifacts.map((a) => a.path), ['ws2/outputs/a.txt']);
			assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
		} finally { s.kill(); }
	});

	test('--timeout tightens the default timeout', { timeout: 180000 }, async () => {
		const s = new RawServer(newProject('cli'), { args: ['--timeout', '1'], structured: true });
		try {
			await s.initialize();
			// A first call warms the interpreter, so what is timed below is the
			// cell alone, not the start of the zygote on a loaded machine.
			await s.callTool('execute_python', { code: '1' }, { timeout: 120000 });
			const t0 = performance.now();
			const r = await s.callTool('execute_python', { code: 'import time\ntime.sleep(20)' }, { timeout: 30000 });
			assert.equal(r.result?.structuredContent?.status, 'timeout', show(r));
			// Stopped by the 1 s timeout, well before the 20 s sleep ends.
			assert.ok(performance.now() - t0 < 15000);
			assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
		} finally { s.kill(); }
	});
});

// make install-skill, as the README gives it, from a copy of the checkout
// (a failing run must not write into this one).
describe('make install-skill', () => {
	function checkout() {
		const d = newProject('checkout');
		fs.mkdirSync(path.join(d, 'scripts'));
		for (const f of ['Makefile', 'SKILL.md', 'VERSION', 'scripts/install-skill.in']) fs.copyFileSync(path.join(REPO, f), path.join(d, f));
		return d;
	}
	const make = (args, cwd) => spawnSync('make', ['-s', ...args], { cwd, encoding: 'utf8', timeout: 60000, env: { ...process.env, MAKEFLAGS: '' } });
	const REL = '.claude/skills/code-interpreter-sandbox-executor/SKILL.md';
	const AGENTS = '.agents/skills/code-interpreter-sandbox-executor/SKILL.md';

	test('make -C CHECKOUT without PROJECT= refuses and says what to write; nothing lands in the checkout', () => {
		const co = checkout();
		const proj = newProject('proj');
		const r = make(['-C', co, 'install-skill'], proj);
		assert.equal(r.status, 2, r.stdout + r.stderr);
		assert.match(r.stderr, /PROJECT=/);
		assert.equal(fs.existsSync(path.join(co, '.agents')) || fs.existsSync(path.join(co, '.claude')), false);
		const ok = make(['-C', co, 'install-skill', `PROJECT=${proj}`], proj);
		assert.equal(ok.status, 0, ok.stderr);
		assert.equal(fs.readFileSync(path.join(proj, REL), 'utf8'), SKILL_TEXT);
		assert.equal(fs.readFileSync(path.join(proj, AGENTS), 'utf8'), SKILL_TEXT);
	});

	test('a copy the project edited is kept, and make says so; FORCE=1 replaces it', () => {
		const co = checkout();
		const proj = newProject('proj-mod');
		fs.mkdirSync(path.dirname(path.join(proj, REL)), { recursive: true });
		fs.writeFileSync(path.join(proj, REL), 'mine\n');
		const r = make(['-C', co, 'install-skill', `PROJECT=${proj}`], proj);
		assert.notEqual(r.status, 0, r.stdout + r.stderr);
		assert.equal(fs.readFileSync(path.join(proj, REL), 'utf8'), 'mine\n');
		assert.ok(r.stderr.includes(`kept ${proj}/${REL}`), r.stderr);
		assert.equal(fs.readFileSync(path.join(proj, AGENTS), 'utf8'), SKILL_TEXT, 'the other copy is installed');
		const f = make(['-C', co, 'install-skill', `PROJECT=${proj}`, 'FORCE=1'], proj);
		assert.equal(f.status, 0, f.stderr);
		assert.equal(fs.readFileSync(path.join(proj, REL), 'utf8'), SKILL_TEXT);
	});

	test('the server and --check say which of two differing copies is used', { timeout: 60000 }, () => {
		const proj = newProject('two-copies');
		fs.mkdirSync(path.dirname(path.join(proj, REL)), { recursive: true });
		fs.mkdirSync(path.dirname(path.join(proj, AGENTS)), { recursive: true });
		fs.writeFileSync(path.join(proj, AGENTS), SKILL_TEXT);
		fs.writeFileSync(path.join(proj, REL), SKILL_TEXT.replace('timeout_s: 30', 'timeout_s: 20'));
		const want = `${proj}/${REL} differs from ${proj}/${AGENTS}, which is the one used`;
		const c = run(['--check', '--root', proj]);
		assert.ok(c.stdout.includes(want), c.stdout);
		const s = run(['--root', proj]);
		assert.equal(s.status, 0, s.stderr);
		assert.ok(s.stderr.includes(want), s.stderr);
		// The way out is one an installed server has (no Makefile there).
		assert.ok(c.stdout.includes(`cp '${proj}/${AGENTS}' '${proj}/${REL}'`), c.stdout);
		assert.ok(c.stdout.includes(`python-sandbox-mcp-install-skill --force '${proj}'`), c.stdout);
		assert.doesNotMatch(c.stdout, /make install-skill/);
	});
});
