// Saved sessions: the state of a session is saved in the background after
// each call and restored by the first call after the server restarts
// (state "restored", a note naming what came back and what did not).  What
// the server loads must be what it wrote: snapshots changed, swapped for a
// symlink or planted by sandboxed code are refused.  Checked from outside
// the sandbox: the files under workspace/.sessions, their modes, the key's.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startClient, execPy, newProject, writeFile, sleep, show } from './lib.mjs';

const handles = [];
after(async () => {
	for (const h of handles) {
		try { process.kill(h.pid, 'SIGKILL'); } catch { /* gone */ }
		try { await h.close(); } catch { /* gone */ }
	}
});

/** A key directory of its own for each test (never the user's real one). */
function stateHome(owner) {
	const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'psm-state-')));
	if (owner) fs.chownSync(d, owner.uid, owner.gid);
	return d;
}

async function start(root, xdg, { extraArgs = [], command, commandArgs } = {}) {
	const opts = { structured: true, args: ['--log-level', 'info', ...extraArgs], env: { XDG_STATE_HOME: xdg } };
	if (command) Object.assign(opts, { command, commandArgs });
	const h = await startClient(root, opts);
	handles.push(h);
	return h;
}

function snapPath(root, session = 'default') {
	return path.join(root, 'workspace', '.sessions', session, 'state.snap');
}

/** Waits until the server has logged `n` completed saves. */
async function waitSaved(h, n = 1, ms = 60000) {
	const t0 = Date.now();
	for (;;) {
		const got = (h.stderr().match(/state saved \(/g) || []).length;
		if (got >= n) return;
		if (Date.now() - t0 > ms) throw new Error(`no save after ${ms} ms; stderr tail: ${h.stderr().slice(-2000)}`);
		await sleep(100);
	}
}

async function end(h, how) {
	if (how === 'eof') {
		await h.close();
		return;
	}
	process.kill(h.pid, how);
	for (let i = 0; i < 100; i++) {
		try { process.kill(h.pid, 0); } catch { break; }
		await sleep(50);
	}
	await h.close();
}

const BUILD = `
import numpy as np
import pandas as pd
import threading
df = pd.DataFrame({"n": np.arange(1000) * 1.5, "s": [f"row{i}" for i in range(1000)],
                   "t": pd.date_range("2024-01-01", periods=1000, freq="h")})
arr = np.random.default_rng(7).standard_normal((300, 200))
d = {"a": [1, 2, {"b": (3, 4)}], "c": "texte é", "big": 2**80}

def scale(x, k=3):
    return x * k

class Account:
    rate = 0.5
    def __init__(self, owner, cents):
        self.owner, self.cents = owner, cents
    def interest(self):
        return self.cents * self.rate

acct = Account("ada", 1234)
fh = open("workspace/note.txt", "w")
gen = (i for i in range(5))
lock = threading.Lock()
`;

// Prints every object's value as JSON, the same cell before and after.
const DIGEST = `
import json, hashlib
print(json.dumps({
    "df": [hashlib.sha256(df.to_json().encode()).hexdigest(), list(df.shape), df["s"].iloc[-1], str(df["t"].iloc[-1])],
    "dtypes": [str(t) for t in df.dtypes],
    "arr": [hashlib.sha256(arr.tobytes()).hexdigest(), list(arr.shape), str(arr.dtype), arr.flags.writeable],
    "d": repr(d),
    "scale": [scale(2), scale(2, 5)],
    "acct": [type(acct).__name__, acct.owner, acct.interest(), isinstance(acct, Account)],
    "new": Account("bob", 10).interest(),
    "np": np.__name__, "pd": pd.__name__,
}, sort_keys=True))
`;

describe('saved sessions survive a restart of the server', () => {
	for (const how of ['eof', 'SIGTERM', 'SIGKILL']) {
		test(`every object comes back after ${how}; what cannot be saved is named`, { timeout: 180000 }, async () => {
			const root = newProject('persist');
			const xdg = stateHome();
			let h = await start(root, xdg);
			let r = await execPy(h, BUILD);
			assert.equal(r.sc.status, 'ok', show(r.text));
			await waitSaved(h, 1);
			r = await execPy(h, DIGEST);
			assert.equal(r.sc.status, 'ok', show(r.text));
			const before = r.sc.stdout;
			await waitSaved(h, 2);
			await end(h, how);

			// From outside: the snapshot and the key are private files.
			const st = fs.lstatSync(snapPath(root));
			assert.ok(st.isFile(), 'state.snap is a regular file');
			assert.equal(st.mode & 0o777, 0o600);
			assert.equal(fs.statSync(path.dirname(snapPath(root))).mode & 0o777, 0o700);
			const key = path.join(xdg, 'python-sandbox-mcp', 'key');
			assert.equal(fs.lstatSync(key).mode & 0o777, 0o600);
			assert.equal(fs.statSync(path.dirname(key)).mode & 0o777, 0o700);
			assert.equal(fs.statSync(key).size, 32);

			h = await start(root, xdg);
			r = await execPy(h, DIGEST);
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.equal(r.sc.state, 'restored', show(r.text));
			assert.match(r.head.rest, /state restored/);
			assert.equal(r.sc.stdout, before, 'every value equal after the restart');
			assert.equal(r.sc.execution_count, 3, 'the execution counter goes on');
			assert.match(r.text, /note:\n.*restored from its state saved \d+ s ago \(after cell 2\)/);
			for (const name of ['df', 'arr', 'd', 'scale', 'Account', 'acct', 'np', 'pd'])
				assert.match(r.text, new RegExp(`Restored: [^\\n]*\\b${name}\\b`), `${name} named as restored`);
			for (const name of ['fh', 'gen', 'lock'])
				assert.match(r.text, new RegExp(`Could not be saved[^\\n]*\\b${name} \\(`), `${name} named as not saved`);
			// The next call is an ordinary one.
			r = await execPy(h, 'scale(acct.cents)');
			assert.equal(r.sc.state, 'kept');
			assert.equal(r.sc.result, '3702');
			// A restored function's traceback shows its cell's line.
			r = await execPy(h, 'scale(None)');
			assert.match(r.sc.error.traceback, /<cell 1>/);
			assert.match(r.sc.error.traceback, /return x \* k/);
			await h.close();
		});
	}

	test('reset: true discards the saved state too', { timeout: 180000 }, async () => {
		const root = newProject('persist-reset');
		const xdg = stateHome();
		let h = await start(root, xdg);
		await execPy(h, 'secret = 41');
		await waitSaved(h, 1);
		let r = await execPy(h, 'fresh = 1', { reset: true });
		assert.equal(r.sc.state, 'new');
		await waitSaved(h, 2);
		await h.close();
		h = await start(root, xdg);
		r = await execPy(h, 'print(fresh)\nprint("secret" in globals())');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.stdout, '1\nFalse\n');
		// reset on the first call after a restart: nothing comes back.
		await h.close();
		h = await start(root, xdg);
		r = await execPy(h, '"fresh" in globals()', { reset: true });
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.result, 'False');
		await h.close();
	});

	test('persist: false writes nothing and restores nothing', { timeout: 120000 }, async () => {
		const root = newProject('persist-off');
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: no saving\nlimits:\n  persist: false\n---\n');
		const xdg = stateHome();
		let h = await start(root, xdg);
		let r = await execPy(h, 'x = 5');
		assert.equal(r.sc.status, 'ok');
		await execPy(h, 'y = 6');
		await sleep(1500);
		await h.close();
		assert.equal(fs.existsSync(path.join(root, 'workspace', '.sessions')), false, 'no .sessions directory');
		assert.equal(fs.existsSync(path.join(xdg, 'python-sandbox-mcp')), false, 'no key made');
		h = await start(root, xdg);
		r = await execPy(h, '"x" in globals()');
		assert.equal(r.sc.state, 'new');
		assert.equal(r.sc.result, 'False');
		await h.close();
	});

	test('over limits.persist_mb the state is not saved, and the reply says so once', { timeout: 120000 }, async () => {
		const root = newProject('persist-cap');
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: small cap\nlimits:\n  persist_mb: 1\n---\n');
		const xdg = stateHome();
		const h = await start(root, xdg);
		await execPy(h, 'small = 1');
		await waitSaved(h, 1);
		assert.ok(fs.existsSync(snapPath(root)));
		let r = await execPy(h, 'import numpy as np\nbig = np.ones(600_000)');
		assert.equal(r.sc.status, 'ok');
		for (let i = 0; i < 200 && !/state not saved/.test(h.stderr()); i++) await sleep(100);
		r = await execPy(h, '1');
		assert.match(r.text, /note:\n.*\(5 MB\) is over limits\.persist_mb \(1 MB\): it is not saved/, show(r.text));
		assert.equal(fs.existsSync(snapPath(root)), false, 'the older snapshot is removed, not restored later as the last state');
		for (let i = 0; i < 200 && (h.stderr().match(/state not saved/g) || []).length < 2; i++) await sleep(100);
		r = await execPy(h, '2');
		assert.doesNotMatch(r.text, /persist_mb/, 'said once');
		await h.close();
	});
});

describe('a snapshot the server did not write is refused', () => {
	async function savedProject(tag) {
		const root = newProject(tag);
		const xdg = stateHome();
		const h = await start(root, xdg);
		const r = await execPy(h, 'value = 123');
		assert.equal(r.sc.status, 'ok');
		await waitSaved(h, 1);
		await h.close();
		return { root, xdg };
	}

	async function expectRefused(root, xdg, why, session = 'default') {
		const h = await start(root, xdg);
		const r = await execPy(h, '"value" in globals()', { session });
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.status, 'ok');
		assert.equal(r.sc.result, 'False');
		assert.match(r.text, new RegExp(`note:\\n.*saved state of session ${session} was refused: [^\\n]*${why}[^\\n]*this call runs in a fresh session`), show(r.text));
		assert.equal(fs.existsSync(snapPath(root, session)), false, 'the refused file is removed');
		await h.close();
	}

	test('one byte changed', { timeout: 120000 }, async () => {
		const { root, xdg } = await savedProject('tamper-bytes');
		const p = snapPath(root);
		const buf = fs.readFileSync(p);
		buf[Math.floor(buf.length / 3)] ^= 0x01;
		fs.writeFileSync(p, buf);
		await expectRefused(root, xdg, 'do not match the tag');
	});

	test('replaced by a symlink', { timeout: 120000 }, async () => {
		const { root, xdg } = await savedProject('tamper-link');
		const p = snapPath(root);
		fs.renameSync(p, path.join(root, 'elsewhere.snap'));
		fs.symlinkSync(path.join(root, 'elsewhere.snap'), p);
		await expectRefused(root, xdg, 'symlink');
		assert.ok(fs.existsSync(path.join(root, 'elsewhere.snap')), 'the symlink target is left alone');
	});

	test('a pickle planted by a cell, and a valid snapshot copied to another session', { timeout: 180000 }, async () => {
		const root = newProject('tamper-plant');
		const xdg = stateHome();
		let h = await start(root, xdg);
		// The cell plants, for session "victim", a pickle that would create
		// a file when loaded, with a trailer of the right shape; and copies
		// its own (valid) snapshot for session "copied".
		const r = await execPy(h, `
import os, pickle, struct, shutil
value = 123
class Boom:
    def __reduce__(self):
        return (open, ("workspace/pwned", "w"))
data = pickle.dumps(Boom())
body = b"PSMSAVE1" + struct.pack("<Q", len(data)) + data
os.makedirs("workspace/.sessions/victim", exist_ok=True)
with open("workspace/.sessions/victim/state.snap", "wb") as f:
    f.write(body + b"PSMSNAP1" + struct.pack("<QQQ", len(body), 0, 1) + b"\\0" * 32)
print("planted")
`);
		assert.equal(r.sc.stdout, 'planted\n', show(r.text));
		await waitSaved(h, 1);
		await execPy(h, `
import shutil, os
os.makedirs("workspace/.sessions/copied", exist_ok=True)
shutil.copy("workspace/.sessions/default/state.snap", "workspace/.sessions/copied/state.snap")
`);
		await waitSaved(h, 2);
		await h.close();
		await expectRefused(root, xdg, 'do not match the tag', 'victim');
		await expectRefused(root, xdg, 'do not match the tag', 'copied');
		assert.equal(fs.existsSync(path.join(root, 'workspace', 'pwned')), false, 'the planted pickle never ran');
	});

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

	test('a new call abandons a running save (never waits for it)', { timeout: 180000 }, async () => {
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
