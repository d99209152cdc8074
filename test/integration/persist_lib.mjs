// Helpers of the saved-session tests (persist_*.test.mjs).
//
// Saved sessions: the state of a session is saved in the background after
// each call and restored by the first call after the server restarts
// (state "restored", a note naming what came back and what did not).  What
// the server loads must be what it wrote: snapshots changed, swapped for a
// symlink or planted by sandboxed code are refused.  Checked from outside
// the sandbox: the files under workspace/.sessions, their modes, the key's.
import { after } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startClient, sleep } from './lib.mjs';

const handles = [];
/** Registers the clean-up in each test file that imports this module. */
after(async () => {
	for (const h of handles) {
		try { process.kill(h.pid, 'SIGKILL'); } catch { /* gone */ }
		try { await h.close(); } catch { /* gone */ }
	}
});

/** A key directory of its own for each test (never the user's real one). */
export function stateHome(owner) {
	const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'psm-state-')));
	if (owner) fs.chownSync(d, owner.uid, owner.gid);
	return d;
}

export async function start(root, xdg, { extraArgs = [], command, commandArgs, env = {} } = {}) {
	const opts = { structured: true, args: ['--log-level', 'info', ...extraArgs], env: { XDG_STATE_HOME: xdg, ...env } };
	if (command) Object.assign(opts, { command, commandArgs });
	const h = await startClient(root, opts);
	handles.push(h);
	return h;
}

export function snapPath(root, session = 'default') {
	return path.join(root, 'workspace', '.sessions', session, 'state.snap');
}

/** Waits until the server has logged `n` completed saves. */
export async function waitSaved(h, n = 1, ms = 60000) {
	const t0 = Date.now();
	for (;;) {
		const got = (h.stderr().match(/state saved \(/g) || []).length;
		if (got >= n) return;
		if (Date.now() - t0 > ms) throw new Error(`no save after ${ms} ms; stderr tail: ${h.stderr().slice(-2000)}`);
		await sleep(100);
	}
}

/** Waits until the server's log (`log()`, its stderr so far) matches `re`
 *  `count` times.  The bound is only for a server that never says it: the
 *  wait ends as soon as it does, so load stretches it but cannot break it. */
export async function waitLog(log, re, { count = 1, ms = 120000, what = String(re) } = {}) {
	const g = new RegExp(re.source, re.flags.includes('g') ? re.flags : re.flags + 'g');
	const t0 = Date.now();
	while ((log().match(g) || []).length < count) {
		if (Date.now() - t0 > ms) throw new Error(`${what}: not in the log after ${ms} ms; its tail: ${log().slice(-2000)}`);
		await sleep(100);
	}
}

export async function end(h, how) {
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

export const BUILD = `
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
export const DIGEST = `
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

