// A SKILL.md the server cannot use (a typo in the policy) does not end the
// server: a client that only sees "Failed to connect" leaves the model with
// no tools and no reason.  The server serves, tools/list works, and every
// tool call answers isError with the policy's FILE:LINE message and what to
// write; nothing runs and nothing is created in the project.  --check exits
// 1 with the same message.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, SKILL, startClient, newProject, writeFile, callTool, descendants, show, TOOL_NAMES } from './lib.mjs';

const REL = '.claude/skills/code-interpreter-sandbox-executor/SKILL.md';
const TYPO = SKILL.replace('net_access: false', 'net_access: "yes"');
const LINE = TYPO.split('\n').findIndex((l) => l.includes('net_access: "yes"')) + 1;

describe('a policy the server cannot use', () => {
	let h, root, skill, want;
	before(async () => {
		root = newProject('polerr');
		skill = writeFile(root, REL, TYPO);
		want = `${skill}:${LINE}: permissions.net_access: expected true or false, got "yes" (a quoted string); write true or false without quotes`;
		h = await startClient(root, { structured: true });
	});
	after(async () => { await h?.close(); });

	test('the server serves: initialize and tools/list answer', () => {
		assert.deepEqual(h.tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
		assert.ok(h.stderr().includes(`policy error: ${want}`), h.stderr());
	});

	test('every execute_python says FILE:LINE, what to write, and that nothing ran', { timeout: 30000 }, async () => {
		for (const session of ['default', 'other', 'default']) {
			const r = await callTool(h, 'execute_python', { code: 'open("workspace/x", "w").write("ran")', session });
			assert.equal(r.isError, true, show(r));
			const text = r.content[0].text;
			assert.ok(text.includes(want), text);
			assert.match(text, /no code runs until it is fixed/);
			assert.match(text, /restart/);
		}
		assert.equal(fs.existsSync(path.join(root, 'workspace')), false, 'nothing was created in the project');
		assert.deepEqual(descendants(h.pid), [], 'no interpreter was started');
	});

	test('list_artifacts and verify_outputs say the same', { timeout: 30000 }, async () => {
		for (const [name, args] of [['list_artifacts', {}], ['verify_outputs', { files: ['workspace/a.csv'] }]]) {
			const r = await callTool(h, name, args);
			assert.equal(r.isError, true, `${name}: ${show(r)}`);
			assert.ok(r.content[0].text.includes(want), r.content[0].text);
		}
	});

	test('--check prints it and exits 1; the server exits 0 at end of input', { timeout: 30000 }, async () => {
		const c = spawnSync(BIN, ['--check', '--root', root], { encoding: 'utf8', input: '', timeout: 20000 });
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.ok(c.stdout.includes(want), c.stdout);
		assert.match(c.stdout, /check: the policy cannot be used/);
		const s = spawnSync(BIN, ['--root', root], { encoding: 'utf8', input: '', timeout: 20000 });
		assert.equal(s.status, 0, s.stderr);
		assert.equal(s.stdout, '');
	});
});

describe('fs_write as a list in a fresh project', () => {
	test('the entry that can never be written is the error, not the missing workspace', { timeout: 30000 }, () => {
		const root = newProject('wlist');
		const skill = writeFile(root, REL, SKILL.replace('fs_write: workspace', 'fs_write: [workspace, /etc, ../sibling]'));
		const line = fs.readFileSync(skill, 'utf8').split('\n').findIndex((l) => l.includes('fs_write: [')) + 1;
		const c = spawnSync(BIN, ['--check', '--root', root], { encoding: 'utf8', input: '', timeout: 20000 });
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.ok(c.stdout.includes(`${skill}:${line}: permissions.fs_write[1]: "/etc" resolves to /etc, outside the project root ${root}`), c.stdout);
		assert.doesNotMatch(c.stdout, /does not exist/);
	});

	test('[workspace] works as the scalar does: the workspace is created and written', { timeout: 60000 }, async () => {
		const root = newProject('wlist-ok');
		writeFile(root, REL, SKILL.replace('fs_write: workspace', 'fs_write: [workspace]'));
		const h = await startClient(root, { structured: true });
		try {
			const r = await callTool(h, 'execute_python', { code: 'open("workspace/outputs/w.txt", "w").write("ok")' });
			assert.equal(r.structuredContent?.status, 'ok', show(r));
			assert.equal(fs.readFileSync(path.join(root, 'workspace/outputs/w.txt'), 'utf8'), 'ok');
		} finally { await h.close(); }
	});
});
