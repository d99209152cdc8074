// --check and serving where the project root cannot be a project's: a
// read-only ROOT (the workspace cannot be made there) and ROOT = the
// user's home directory.  --check says the one real cause and what to do,
// in its own report (no server log lines, no "run --check"), and exits 1;
// serving says the same in every tool call and creates nothing there.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, startClient, newProject, callTool, show } from './lib.mjs';

const AS_ROOT = process.getuid() === 0;

function check(root, env = {}, args = []) {
	return spawnSync(BIN, ['--check', '--root', root, ...args], { encoding: 'utf8', input: '', timeout: 120000, env: { ...process.env, ...env } });
}

/** A directory whose file system is read-only for the server: a read-only
 *  bind mount as root (root writes through any mode), mode 0555 otherwise. */
function readOnlyDir(tag) {
	const d = newProject(tag);
	fs.writeFileSync(path.join(d, 'data.csv'), 'a\n1\n');
	if (AS_ROOT) {
		const m = spawnSync('sh', ['-c', `mount --bind "${d}" "${d}" && mount -o remount,ro,bind "${d}"`], { encoding: 'utf8' });
		assert.equal(m.status, 0, m.stderr);
		process.on('exit', () => spawnSync('umount', [d]));
	} else {
		fs.chmodSync(d, 0o555);
		process.on('exit', () => fs.chmodSync(d, 0o755));
	}
	return d;
}

describe('a read-only project root', () => {
	const ro = readOnlyDir('ro-root');
	after(() => { if (AS_ROOT) spawnSync('umount', [ro]); });
	const why = AS_ROOT ? /Read-only file system/ : /Permission denied/;

	test('--check says the workspace cannot be made there, suggests --workspace, exits 1', { timeout: 120000 }, () => {
		const c = check(ro);
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.match(c.stdout, new RegExp(`workspace ${ro}/workspace is missing and cannot be created`), c.stdout);
		assert.match(c.stdout, why);
		assert.match(c.stdout, /--workspace DIR/);
		assert.match(c.stdout, /\ncheck: the server cannot serve here: /);
		assert.doesNotMatch(c.stdout, /serving creates it/);
	});

	test('--check with a --workspace elsewhere passes', { timeout: 120000 }, () => {
		const ws = newProject('ro-ws');
		const c = check(ro, {}, ['--workspace', ws]);
		assert.equal(c.status, 0, c.stdout + c.stderr);
		assert.match(c.stdout, /check: the policy is enforced/);
	});

	test('serving: every call says why and what to pass; the data stays readable with --workspace', { timeout: 60000 }, async () => {
		const h = await startClient(ro, { structured: true });
		try {
			const r = await callTool(h, 'execute_python', { code: '1 + 1' });
			assert.equal(r.isError, true, show(r));
			assert.match(r.content[0].text, /cannot be created/);
			assert.match(r.content[0].text, why);
			assert.match(r.content[0].text, /--workspace DIR/);
		} finally { await h.close(); }
		const ws = newProject('ro-ws2');
		const h2 = await startClient(ro, { structured: true, args: ['--workspace', ws] });
		try {
			const r = await callTool(h2, 'execute_python', { code: 'open("data.csv").read()' });
			assert.equal(r.structuredContent.status, 'ok', show(r));
		} finally { await h2.close(); }
	});
});

describe('ROOT = the home directory', () => {
	test('--check gives the one cause, in its own words, and exits 1; serving creates nothing in it', { timeout: 120000 }, async () => {
		const home = newProject('home');
		fs.mkdirSync(path.join(home, 'code'));
		const env = { HOME: home, XDG_STATE_HOME: path.join(newProject('home-state'), 's') };
		const c = check(home, env);
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.match(c.stdout, /check: the project root .* is the home directory, not a project: start the server with --root set to the project directory/);
		assert.doesNotMatch(c.stdout, /for details/);
		assert.doesNotMatch(c.stdout, /python-sandbox-mcp\[\d+\]/, 'no log lines in the report');
		assert.doesNotMatch(c.stdout, /entries/);
		const h = await startClient(home, { structured: true, env });
		try {
			const r = await callTool(h, 'execute_python', { code: '1 + 1' });
			assert.equal(r.isError, true, show(r));
			assert.match(r.content[0].text, /home directory, not a project/);
			assert.doesNotMatch(r.content[0].text, /for details/);
		} finally { await h.close(); }
		assert.deepEqual(fs.readdirSync(home), ['code'], 'nothing was created in the home directory');
	});
});
