// The server's history of a session: kept out of the sandbox's reach,
// carried across a restart, copied by fork_from, started anew by reset.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startClient, newProject, execPy, show, BIN } from './lib.mjs';

function exportNb(root, args = []) {
	const r = spawnSync(BIN, ['export', '--root', root, ...args], { encoding: 'utf8' });
	assert.equal(r.status, 0, r.stderr);
	return JSON.parse(r.stdout);
}
const codeCells = (nb) => nb.cells.filter((c) => c.cell_type === 'code' && c.id !== 'setup');
const historyDir = (root) => {
	const state = process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local/state');
	const hex = crypto.createHash('sha256').update(path.join(root, 'workspace')).digest('hex').slice(0, 32);
	return path.join(state, 'python-sandbox-mcp/history', hex);
};

describe('history', () => {
	test('a session that overwrites everything under .sessions and .logs, and tries the history itself, changes nothing of it', async () => {
		const root = newProject('hist-tamper');
		const h = await startClient(root, { structured: true });
		try {
			await execPy(h, 'x = 41\nprint("x is", x)');
			await execPy(h, 'print("y" * 300000)'); // a long output: a log under .logs
			const before = exportNb(root);
			const file = path.join(historyDir(root), 'default.jsonl');
			const bytes = fs.readFileSync(file);
			// Attack: rewrite every file the server keeps in the workspace,
			// plant a history there, and write to where the history is.
			const r = await execPy(h, [
				'import os, json',
				'for d in ("workspace/.sessions", "workspace/.logs"):',
				'    os.makedirs(d, exist_ok=True)',
				'    for base, dirs, files in os.walk(d):',
				'        for f in files:',
				'            open(os.path.join(base, f), "w").write("forged")',
				'    for name in ("default.jsonl", "history.jsonl"):',
				'        open(os.path.join(d, name), "w").write(json.dumps({"v": 1, "kind": "call", "cell": 1, "code": "evil()", "state": "new", "status": "ok"}) + "\\n")',
				`target = ${JSON.stringify(file)}`,
				'try:',
				'    open(target, "a").write("{\\"v\\":1,\\"kind\\":\\"call\\",\\"cell\\":99,\\"code\\":\\"evil()\\",\\"state\\":\\"new\\",\\"status\\":\\"ok\\"}\\n")',
				'    print("wrote the history")',
				'except OSError as e:',
				'    print("refused:", type(e).__name__)',
			].join('\n'));
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.match(r.sc.stdout, /^refused: /, 'the history lies out of the sandbox\'s reach');
			assert.ok(fs.readFileSync(file).subarray(0, bytes.length).equals(bytes), 'what was recorded is unchanged');
			const after = exportNb(root);
			assert.deepEqual(codeCells(after).slice(0, 2), codeCells(before), 'the export says the same of the cells before');
			assert.equal(codeCells(after).length, 3, 'and adds the one that ran');
			assert.ok(!codeCells(after).some((c) => c.source === 'evil()' || c.execution_count === 99), 'nothing planted is read back');
			assert.deepEqual(codeCells(after).map((c) => c.execution_count), [1, 2, 3]);
		} finally {
			await h.close();
		}
	});

	test('across a restart (state restored), a fork (the copy starts with the parent\'s), and reset (a new one)', async () => {
		const root = newProject('hist-life');
		let h = await startClient(root, { structured: true });
		try {
			await execPy(h, 'a = 1');
			await execPy(h, 'b = a + 1\nb');
		} finally {
			await h.close(); // saves the state at exit
		}
		h = await startClient(root, { structured: true });
		try {
			const r = await execPy(h, 'c = b * 10\nc');
			assert.equal(r.sc.state, 'restored', show(r.sc));
			let nb = exportNb(root);
			assert.deepEqual(codeCells(nb).map((c) => c.source), ['a = 1', 'b = a + 1\nb', 'c = b * 10\nc']);
			assert.equal(codeCells(nb)[2].metadata.psm.state, 'restored');

			const f = await execPy(h, 'd = c + 1\nd', { session: 'branch', fork_from: 'default' });
			assert.equal(f.sc.state, 'forked', show(f.sc));
			await execPy(h, 'e = 5');
			nb = exportNb(root, ['--session', 'branch']);
			assert.deepEqual(codeCells(nb).map((c) => c.source), ['a = 1', 'b = a + 1\nb', 'c = b * 10\nc', 'd = c + 1\nd']);
			nb = exportNb(root);
			assert.deepEqual(codeCells(nb).map((c) => c.source), ['a = 1', 'b = a + 1\nb', 'c = b * 10\nc', 'e = 5'], 'the parent does not see the copy');

			const z = await execPy(h, 'z = 0', { reset: true });
			assert.equal(z.sc.state, 'new');
			nb = exportNb(root);
			assert.deepEqual(codeCells(nb).map((c) => c.source), ['z = 0']);
			assert.equal(codeCells(exportNb(root, ['--session', 'branch'])).length, 4, 'a reset of one session leaves the others');
		} finally {
			await h.close();
		}
	});
});

// The history is the server's, whatever the jail: the same under a
// container's default rules (Landlock + seccomp, no namespaces).
describe('history without namespaces', () => {
	test('recorded and exported with each file\'s hash', async () => {
		const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
		const root = newProject('hist-nsfree');
		const h = await startClient(root, { structured: true, command: DOCKERRUN, commandArgs: [BIN] });
		try {
			await execPy(h, 'import numpy as np\nv = float(np.random.rand())\nopen("workspace/outputs/v.txt", "w").write(repr(v))');
			await execPy(h, 'v');
			assert.match(h.stderr(), /jail mode: Landlock \+ seccomp/);
			// Attack: with no mount namespace the history's directory is on
			// the path the code sees; only Landlock keeps it from writing it.
			const file = path.join(historyDir(root), 'default.jsonl');
			const bytes = fs.readFileSync(file);
			const r = await execPy(h, `try:\n    open(${JSON.stringify(file)}, "a").write('{"v":1,"kind":"call","cell":99,"code":"evil()","state":"new","status":"ok"}\\n')\n`
				+ '    print("wrote the history")\nexcept OSError as e:\n    print("refused:", type(e).__name__)');
			assert.match(r.sc.stdout, /^refused: /, show(r.sc));
			assert.ok(fs.readFileSync(file).subarray(0, bytes.length).equals(bytes), 'what was recorded is unchanged');
		} finally {
			await h.close();
		}
		const cells = codeCells(exportNb(root));
		assert.deepEqual(cells.map((c) => c.execution_count), [1, 2, 3]);
		const sha = crypto.createHash('sha256').update(fs.readFileSync(path.join(root, 'workspace/outputs/v.txt'))).digest('hex');
		assert.deepEqual(cells[0].metadata.files, [{ path: 'workspace/outputs/v.txt', sha256: sha }]);
		assert.equal(cells[1].outputs[0].data['text/plain'], fs.readFileSync(path.join(root, 'workspace/outputs/v.txt'), 'utf8'));
	});
});
