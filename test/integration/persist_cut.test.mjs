// Saved sessions: a save cut short leaves the previous snapshot; a new call
// abandons a save; a key others can write is refused; the same as nobody.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, writeFile, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end, BUILD, DIGEST } from './persist_lib.mjs';
describe('the key', () => {
	test('a key that others can write is refused: nothing is saved', { timeout: 120000 }, async () => {
		const root = newProject('persist-badkey');
		const xdg = stateHome();
		fs.mkdirSync(path.join(xdg, 'python-sandbox-mcp'), { mode: 0o700 });
		fs.writeFileSync(path.join(xdg, 'python-sandbox-mcp', 'key'), Buffer.alloc(32, 7), { mode: 0o666 });
		fs.chmodSync(path.join(xdg, 'python-sandbox-mcp', 'key'), 0o666);
		const h = await start(root, xdg);
		const r = await execPy(h, 'x = 1');
		assert.equal(r.sc.status, 'ok');
		await sleep(1500);
		assert.match(h.stderr(), /sessions will not be saved: the key is refused: .*key is writable by other users/);
		assert.equal(fs.existsSync(snapPath(root)), false);
		await h.close();
	});
});

describe('a save cut short leaves the previous snapshot', () => {
	test('SIGKILL of the server in the middle of a save', { timeout: 180000 }, async () => {
		const root = newProject('persist-kill');
		const xdg = stateHome();
		let h = await start(root, xdg);
		await execPy(h, 'kept = "first"');
		await waitSaved(h, 1);
		const first = fs.readFileSync(snapPath(root));
		// Pickling this object signals, then sleeps: the save is running.
		await execPy(h, `
class Slow:
    def __reduce__(self):
        open("workspace/saving", "w").close()
        import time
        time.sleep(60)
        return (int, (1,))
slow = Slow()
kept = "second"
`);
		const flag = path.join(root, 'workspace', 'saving');
		for (let i = 0; i < 600 && !fs.existsSync(flag); i++) await sleep(100);
		assert.ok(fs.existsSync(flag), 'the save started');
		process.kill(h.pid, 'SIGKILL');
		await sleep(300);
		await h.close();
		assert.deepEqual(fs.readFileSync(snapPath(root)), first, 'the previous snapshot is untouched');
		h = await start(root, xdg);
		const r = await execPy(h, 'kept');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, "'first'");
		await h.close();
	});

	test('a new call never waits for a running save', { timeout: 180000 }, async () => {
		const root = newProject('persist-abandon');
		const xdg = stateHome();
		const h = await start(root, xdg);
		await execPy(h, `
class Slow:
    def __reduce__(self):
        open("workspace/saving", "w").close()
        import time
        time.sleep(60)
        return (int, (1,))
slow = Slow()
`);
		const flag = path.join(root, 'workspace', 'saving');
		for (let i = 0; i < 600 && !fs.existsSync(flag); i++) await sleep(100);
		assert.ok(fs.existsSync(flag), 'the save started');
		const t0 = Date.now();
		const r = await execPy(h, '1 + 1');
		assert.equal(r.sc.result, '2');
		assert.ok(Date.now() - t0 < 30000, 'the call did not wait for the save');
		await h.close();
	});
});

describe('as nobody', () => {
	test('a session saved and restored by a server running as nobody', { timeout: 180000 }, async () => {
		const nobody = { uid: 65534, gid: 65534 };
		const root = newProject('persist-nobody');
		fs.chownSync(root, nobody.uid, nobody.gid);
		const xdg = stateHome(nobody);
		const wrap = { command: 'setpriv', commandArgs: ['--reuid=65534', '--regid=65534', '--clear-groups', '--'] };
		const BIN = process.env.PSM_BIN;
		wrap.commandArgs.push(BIN);
		let h = await start(root, xdg, wrap);
		let r = await execPy(h, 'import numpy as np\nv = np.arange(5) ** 2\ndef f(a):\n    return a + 1');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1);
		await h.close();
		assert.equal(fs.statSync(snapPath(root)).uid, nobody.uid);
		h = await start(root, xdg, wrap);
		r = await execPy(h, 'f(int(v.sum()))');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '31');
		await h.close();
	});
});
