// The command line (--version, --help, usage errors,
// --workspace, --timeout) as far as the MCP side sees it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, RawServer, newProject, show } from './lib.mjs';

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
