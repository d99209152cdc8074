// Saved sessions: two servers on one project (two agent windows on one
// repository).  A session's saved state is one server's at a time: the
// second server to use a session name runs it unsaved, says so in its
// first reply, and neither restores nor replaces the first one's snapshot,
// so no window's work is lost to the other's.  The lock lives outside what
// the sandbox sees: a cell that locks every file it can reach under
// workspace/.sessions keeps no server from its sessions.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end } from './persist_lib.mjs';

const digest = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const IN_USE = /session co2 is in use by another python-sandbox-mcp server on this project \(pid (\d+)\)[^\n]*runs session co2 without it/;

describe('two servers on one project', () => {
	test('the second server runs the session unsaved and says so; the first one\'s work is kept', { timeout: 180000 }, async () => {
		const root = newProject('persist-two');
		const xdg = stateHome();
		const a = await start(root, xdg);
		let r = await execPy(a, 'x = 1', { session: 'co2' });
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(a, 1);
		const snap = snapPath(root, 'co2');
		const before = digest(snap);

		const b = await start(root, xdg);
		r = await execPy(b, '"x" in globals()', { session: 'co2' });
		assert.equal(r.sc.status, 'ok', show(r.text));
		// Not restored from the other server's snapshot, and told why.
		assert.equal(r.sc.result, 'False', show(r.text));
		assert.equal(r.sc.state, 'new', show(r.text));
		const m = IN_USE.exec(r.text);
		assert.ok(m, show(r.text));
		assert.equal(Number(m[1]), a.pid, 'the holder is named');
		assert.match(r.text, /neither restored nor replaced here/);
		// Said once: the next reply is an ordinary one.
		r = await execPy(b, 'y = 2', { session: 'co2' });
		assert.doesNotMatch(r.text, /in use by another/, show(r.text));
		// A session the other server does not use is saved as usual.
		r = await execPy(b, 'z = 3', { session: 'mine' });
		assert.doesNotMatch(r.text, /in use by another/, show(r.text));
		await waitSaved(b, 1);
		assert.ok(fs.existsSync(snapPath(root, 'mine')));
		// reset: true in the second server discards nothing of the first's.
		r = await execPy(b, 'w = 4', { session: 'co2', reset: true });
		assert.equal(r.sc.status, 'ok', show(r.text));
		await b.close();
		assert.doesNotMatch(b.stderr(), /session co2: state saved/, 'the second server never saved co2');
		assert.equal(digest(snap), before, 'the first server\'s snapshot is untouched');

		// The first server goes on, saves, and its state comes back.
		r = await execPy(a, 'x = 5', { session: 'co2' });
		await waitSaved(a, 2);
		await a.close();
		const c = await start(root, xdg);
		r = await execPy(c, 'x', { session: 'co2' });
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '5');
		assert.doesNotMatch(r.text, /in use by another/, 'the lock ended with the first server');
		await c.close();
	});

	test('a killed server\'s lock ends with it; sandboxed code cannot hold a session\'s lock: it cannot reach it, and what it locks under .sessions changes nothing', { timeout: 180000 }, async () => {
		const root = newProject('persist-lock-dos');
		const xdg = stateHome();
		let a = await start(root, xdg);
		await execPy(a, 'v = 7', { session: 'victim' });
		await waitSaved(a, 1);
		// Killed: the kernel drops its lock (the next server restores).
		await end(a, 'SIGKILL');
		a = await start(root, xdg);
		// The attack: lock every file and directory the cell can open under
		// workspace/.sessions (flock and fcntl locks), and the lock
		// directory, were it reachable; the session stays alive (frozen)
		// with its locks held while another server starts.
		const locks = path.join(xdg, 'python-sandbox-mcp', 'locks');
		let r = await execPy(a, `
import fcntl, os
held, refused = [], []
for d, dirs, files in os.walk("workspace/.sessions"):
    for p in [d] + [os.path.join(d, f) for f in files]:
        try:
            fd = os.open(p, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(fd)
        except OSError as e:
            refused.append(p)
        try:
            fd = os.open(p, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(fd)
        except OSError:
            pass
try:
    os.listdir(${JSON.stringify(locks)})
    reach = "reached"
except OSError as e:
    reach = type(e).__name__
print(len(held), reach)
`, { session: 'attacker' });
		assert.equal(r.sc.status, 'ok', show(r.text));
		const [n, reach] = r.sc.stdout.trim().split(' ');
		assert.ok(Number(n) > 0, `the cell locked files under .sessions: ${r.sc.stdout}`);
		assert.notEqual(reach, 'reached', 'the lock directory is out of the sandbox\'s reach');
		const b = await start(root, xdg);
		r = await execPy(b, 'v', { session: 'victim' });
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.result, '7');
		assert.doesNotMatch(r.text, /in use by another|cannot take the lock/, show(r.text));
		await b.close();
		await a.close();
	});
});
