// Workspace trust: approval stores planted as a symlink or inside the project
// are refused; the store is out of the code's reach in the namespace-free
// jail too; usage errors.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, show } from './lib.mjs';
import { SKILL_REL, WITHHELD, LOOSE, tmpDir, storeReachCode, sha256 } from './trust_lib.mjs';

describe('workspace trust: stores that are refused', () => {
	let root, cfg, skill, env;
	before(() => {
		root = newProject('trust-x');
		cfg = tmpDir('trustcfg-x');
		skill = writeFile(root, SKILL_REL, LOOSE);
		env = { XDG_CONFIG_HOME: cfg };
	});
	after(() => fs.rmSync(cfg, { recursive: true, force: true }));

	function cli(args, extraEnv = {}) {
		return spawnSync(BIN, args, { encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env, ...extraEnv } });
	}

	test('a store planted as a symlink is refused: nothing is approved, and the reason is given', { timeout: 120000 }, async () => {
		const hex = sha256(LOOSE);
		const planted = path.join(cfg, 'planted');
		fs.writeFileSync(planted, `${hex} ${skill}\n`, { mode: 0o600 });
		fs.mkdirSync(path.join(cfg, 'python-sandbox-mcp'), { mode: 0o700 });
		const store = path.join(cfg, 'python-sandbox-mcp', 'trusted');
		fs.symlinkSync(planted, store);
		try {
			const h = await startClient(root, { structured: true, env });
			try {
				const r = await execPy(h, 'import subprocess\nsubprocess.run(["true"])');
				assert.equal(r.sc.error?.denied_by, 'shell_exec', show(r.sc));
				assert.ok(r.text.includes(WITHHELD), r.text);
				assert.match(r.text, /approval store was refused: .*symlink/);
				assert.match(h.stderr(), /symlink/);
			} finally { await h.close(); }
			// --trust does not write through it either.
			const t = cli(['--trust', '--yes', '--root', root]);
			assert.equal(t.status, 2, t.stdout + t.stderr);
			assert.match(t.stderr, /symlink/);
			assert.ok(fs.lstatSync(store).isSymbolicLink());
		} finally { fs.rmSync(path.join(cfg, 'python-sandbox-mcp'), { recursive: true, force: true }); }
	});

	test('a store inside the project (XDG_CONFIG_HOME under ROOT) is never believed nor written', { timeout: 120000 }, async () => {
		const inside = path.join(root, '.config');
		const hex = sha256(LOOSE);
		const t = cli(['--trust', '--yes', '--root', root], { XDG_CONFIG_HOME: inside });
		assert.equal(t.status, 2, t.stdout + t.stderr);
		assert.match(t.stderr, /inside the project/);
		assert.equal(fs.existsSync(inside), false, 'nothing was created in the project');
		// A store planted there (by the project itself) approves nothing.
		writeFile(root, '.config/python-sandbox-mcp/trusted', `${hex} ${skill}\n`);
		fs.chmodSync(path.join(inside, 'python-sandbox-mcp'), 0o700);
		fs.chmodSync(path.join(inside, 'python-sandbox-mcp', 'trusted'), 0o600);
		const h = await startClient(root, { structured: true, env: { XDG_CONFIG_HOME: inside } });
		try {
			const r = await execPy(h, 'import socket\nsocket.create_connection(("127.0.0.1", 9))');
			assert.equal(r.sc.error?.denied_by, 'net_access', show(r.sc));
			assert.match(r.text, /inside the project/);
		} finally { await h.close(); }
	});

	test('in the namespace-free jail (Landlock and seccomp, as under Docker\'s default rules) the store is out of reach too', { timeout: 150000 }, async () => {
		const nroot = newProject('trust-nsfree');
		const nskill = writeFile(nroot, SKILL_REL, LOOSE);
		const ncfg = tmpDir('trustcfg-nsfree');
		try {
			const t = cli(['--trust', '--yes', '--root', nroot], { XDG_CONFIG_HOME: ncfg });
			assert.equal(t.status, 0, t.stdout + t.stderr);
			const store = path.join(ncfg, 'python-sandbox-mcp', 'trusted');
			const before = fs.readFileSync(store);
			assert.ok(before.toString().includes(nskill));
			const h = await startClient(nroot, { structured: true, env: { XDG_CONFIG_HOME: ncfg },
				command: path.join(path.dirname(BIN), 'helpers', 'dockerrun'), commandArgs: [BIN] });
			try {
				const r = await execPy(h, storeReachCode(store, ncfg));
				assert.equal(r.sc.status, 'ok', show(r.sc));
				assert.match(h.stderr(), /mode: Landlock \+ seccomp/, 'the namespace-free mode ran');
				assert.doesNotMatch(r.sc.result, /REACHED/);
				assert.match(r.sc.result, /True\]$/, 'cat ran (shell_exec is approved) and could not read it');
			} finally { await h.close(); }
			assert.deepEqual(fs.readFileSync(store), before);
			assert.deepEqual(fs.readdirSync(path.dirname(store)), ['trusted']);
		} finally { fs.rmSync(ncfg, { recursive: true, force: true }); }
	});

	test('usage: --yes alone, and --trust with --check, are usage errors (exit 2)', () => {
		const a = cli(['--yes', '--root', root]);
		assert.equal(a.status, 2, a.stderr);
		assert.match(a.stderr, /--yes only goes with --trust/);
		const b = cli(['--trust', '--check', '--root', root]);
		assert.equal(b.status, 2, b.stderr);
		assert.equal(a.stdout + b.stdout, '');
	});
});
