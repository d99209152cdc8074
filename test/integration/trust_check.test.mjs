// Workspace trust and --check (which runs a whole session, so few of them per
// file): the ceiling, the project's request and the approval state, exit 1
// while something is withheld and 0 once approved; a policy that only
// tightens applies without approval and without a note.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, show } from './lib.mjs';
import { SKILL_REL, LOOSE, tmpDir } from './trust_lib.mjs';

describe('workspace trust: --check, and tightening', () => {
	let cfg, env;
	before(() => {
		cfg = tmpDir('trustcfg-check');
		env = { XDG_CONFIG_HOME: cfg };
	});
	after(() => fs.rmSync(cfg, { recursive: true, force: true }));

	function cli(args) {
		return spawnSync(BIN, args, { encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env } });
	}

	test('--check prints the ceiling, the request and the state: exit 1 while withheld, 0 once approved', { timeout: 175000 }, () => {
		const root = newProject('trust-check');
		writeFile(root, SKILL_REL, LOOSE);
		const chk = cli(['--check', '--root', root]);
		assert.equal(chk.status, 1, chk.stdout + chk.stderr);
		assert.match(chk.stdout, /asks for, beyond the built-in policy:\n  - net_access: true\n  - shell_exec: true\n/);
		assert.match(chk.stdout, /NOT approved on this machine/);
		assert.ok(chk.stdout.includes(`approve with: python-sandbox-mcp --trust --root '${root}'`), chk.stdout);
		assert.match(chk.stdout, /the ceiling \(the built-in policy[\s\S]*net_access: false/);
		assert.match(chk.stdout, /the project's request[\s\S]*net_access: true \(network allowed\)/);
		assert.equal(cli(['--trust', '--yes', '--root', root]).status, 0);
		const ok = cli(['--check', '--root', root]);
		assert.equal(ok.status, 0, ok.stdout + ok.stderr);
		assert.match(ok.stdout, /approved on this machine \(this exact file, for this project\)/);
	});

	test('a project policy that only tightens applies without approval and without a note', { timeout: 120000 }, async () => {
		const tight = newProject('trust-tight');
		writeFile(tight, SKILL_REL, LOOSE.replace('shell_exec: true', 'shell_exec: false').replace('net_access: true', 'net_access: false')
			.replace('fs_write: workspace', 'fs_write: false').replace('Body.', 'limits:\n  memory_mb: 512\n---\n').replace(/---\n\n?limits/, 'limits'));
		const tcfg = tmpDir('trustcfg-tight');
		const h = await startClient(tight, { structured: true, env: { XDG_CONFIG_HOME: tcfg } });
		try {
			const r = await execPy(h, 'open("workspace/x.txt", "w").write("x")');
			assert.equal(r.sc.error?.denied_by, 'fs_write', show(r.sc));
			assert.doesNotMatch(r.text, /\nnote:\n/);
			assert.ok(!r.text.includes('withheld'), r.text);
			assert.equal(fs.existsSync(path.join(tight, 'workspace/x.txt')), false);
		} finally { await h.close(); }
		assert.equal(fs.existsSync(path.join(tcfg, 'python-sandbox-mcp')), false, 'nothing was looked up or written');
		fs.rmSync(tcfg, { recursive: true, force: true });
	});
});
