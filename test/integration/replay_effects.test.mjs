// A rollback never repeats a side effect: a cell whose effect reaches past
// the session's memory (a file written anywhere, a program started, a
// socket, a database, a file offset it shares with the checkpoint) is
// checkpointed, never logged to be run again.  Each effect is checked from
// outside: the file's lines, a loopback listener's count of requests, the
// database's rows read by the host's own Python; and a replay is held to
// max_workspace_mb like a call.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, sleep, show, reachableArgv } from './lib.mjs';
import { SKILL_REL, tmpDir } from './trust_lib.mjs';
import { projectWith, ok, timeout } from './reply_lib.mjs';

const lines = (p) => fs.readFileSync(p, 'utf8').split('\n').filter(Boolean);

// As root and as nobody, with namespaces and under Docker's default rules
// (no namespaces): without CAP_SYS_PTRACE the server cannot read the
// session's io and descriptors, and the session's own view stands in.
const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const MODES = process.getuid() === 0 ? {
	'root': {},
	'nobody': { command: 'setpriv', commandArgs: [...NOBODY, '--', ...reachableArgv()] },
	'root, no namespaces': { command: DOCKERRUN, commandArgs: [BIN] },
	'nobody, no namespaces': { command: 'setpriv', commandArgs: [...NOBODY, ...reachableArgv([DOCKERRUN])] },
} : { 'this user': {} };

for (const [who, launch] of Object.entries(MODES)) describe(`replay log: effects outside memory (built-in policy, ${who})`, () => {
	let h;
	before(async () => {
		const root = newProject('rpeff');
		if (who.startsWith('nobody')) spawnSync('chown', ['-R', '65534:65534', root]);
		h = await startClient(root, { structured: true, ...launch });
	});
	after(async () => { await h?.close(); });

	// workspace/.cache is left out of the workspace's diff (the server's
	// own directories): the append was run again on the rollback.
	test("to_csv(..., mode='a') into workspace/.cache is not appended twice", { timeout: 120000 }, async () => {
		const s = 'cache';
		await ok(h, s, "import pandas as pd\ndf = pd.DataFrame({'a': [1]})");
		await ok(h, s, "df.to_csv('workspace/.cache/log.csv', mode='a', header=False, index=False)");
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.equal(lines(path.join(h.root, 'workspace', '.cache', 'log.csv')).length, 1, r.text);
		assert.equal((await ok(h, s, 'y, len(df)')).sc.result, '(2, 1)');
	});

	// No word of the cell names the write: a function defined earlier
	// writes through a descriptor opened earlier.  The kernel sees it (the
	// bytes written beyond the output, the descriptor's offset).  With
	// `between`, a cell that is only logged runs before `note()`: the view
	// before `note()` is then the one kept from that cell's freeze (the
	// session has not run since), and it still tells the write.
	const hiddenWrite = async (s, file, between) => {
		await ok(h, s, `import os\nfd = os.open('workspace/.cache/${file}', os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n`
			+ "def note():\n    os.write(fd, b'x\\n')");
		if (between) await ok(h, s, between);
		await ok(h, s, 'note()');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.equal(lines(path.join(h.root, 'workspace', '.cache', file)).length, 1, r.text);
	};
	test('a write hidden in a function, through a descriptor opened before, is not repeated', { timeout: 120000 }, async () => {
		await hiddenWrite('hidden', 'k.txt');
	});
	test('a write hidden in a function, right after a logged cell, is not repeated', { timeout: 120000 }, async () => {
		await hiddenWrite('hiddenkept', 'k2.txt', 'z = 1');
		assert.equal((await ok(h, 'hiddenkept', 'y, z')).sc.result, '(2, 1)');
	});

	// A store into a file mapped for writing by an earlier cell: no system
	// call, no byte counted as written, no offset moved; the kernel's
	// counters and the cell's words see nothing.  Run again by the
	// rollback, the byte in the file went from 1 to 2.
	test('a store through a file mapped by an earlier cell is not repeated', { timeout: 120000 }, async () => {
		const s = 'mapped';
		writeFile(h.root, 'workspace/.cache/ctr.bin', Buffer.alloc(8));
		if (who.startsWith('nobody')) spawnSync('chown', ['-R', '65534:65534', path.join(h.root, 'workspace', '.cache')]);
		await ok(h, s, "import mmap\nf = open('workspace/.cache/ctr.bin', 'r+b')\nm = mmap.mmap(f.fileno(), 8)");
		await ok(h, s, 'm[0] = m[0] + 1');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.equal(fs.readFileSync(path.join(h.root, 'workspace', '.cache', 'ctr.bin'))[0], 1, r.text);
		assert.equal((await ok(h, s, 'y, m[0]')).sc.result, '(2, 1)');
	});

	// Memory mapped shared (mmap.mmap(-1, n)) is the checkpoint's too: a
	// rollback does not put it back, and a store into it run again is made
	// twice.
	if (who === Object.keys(MODES)[0]) test('a store into shared memory mapped by an earlier cell is not repeated', { timeout: 120000 }, async () => {
		const s = 'shmem';
		await ok(h, s, 'import mmap\nbuf = mmap.mmap(-1, 4096)');
		await ok(h, s, 'buf[0] = buf[0] + 1');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.equal((await ok(h, s, 'y, buf[0]')).sc.result, '(2, 1)', r.text);
	});

	// More descriptors at the freeze than the server's view of them holds:
	// the server cannot read them, and a session told that the server reads
	// its descriptors and io itself gave no word of its own to stand in.
	// The call counts as unseen (a checkpoint): the write into a pipe that a
	// function defined earlier does is not made again by the rollback.
	test('a hidden write beside more descriptors than the view holds is not repeated', { timeout: 120000 }, async () => {
		const s = 'manyfds';
		await ok(h, s, "import os, select\nr, w = os.pipe()\n"
			+ "def note():\n    os.write(w, b'x\\n')\n    return [os.dup(w) for _ in range(300)]");
		await ok(h, s, 'kept = note()');
		await ok(h, s, 'y = 2');
		const t = await timeout(h, s);
		const k = await ok(h, s, "os.read(r, 100) if select.select([r], [], [], 0)[0] else b''");
		assert.equal(k.sc.result, "b'x\\n'", t.text);
	});

	// The descriptor's offset is shared with the checkpoint (a fork): the
	// replay of list(f) read nothing, and the note said the state was back.
	test('a read from a file opened in an earlier cell: the rolled-back state has every row', { timeout: 120000 }, async () => {
		const s = 'offset';
		writeFile(h.root, 'workspace/data.txt', Array.from({ length: 100 }, (_, i) => `row ${i}`).join('\n') + '\n');
		if (who.startsWith('nobody')) spawnSync('chown', ['-R', '65534:65534', path.join(h.root, 'workspace')]);
		await ok(h, s, 'x = 1');
		await ok(h, s, "f = open('workspace/data.txt')");
		await ok(h, s, 'rows = list(f)');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		const k = await execPy(h, "len(rows) if 'rows' in globals() else None", { session: s });
		if (k.sc.result !== '100') {
			assert.match(r.text, /not (restored|kept)|is gone/, `rows is ${k.sc.result} after the rollback; the note: ${r.text}`);
			assert.doesNotMatch(r.text, /same output/, r.text);
		}
		assert.equal(k.sc.result, '100', r.text);
	});

	// The comparison of outputs covers every byte, not a head and a tail
	// (the server's own digest: once is enough).
	if (who === Object.keys(MODES)[0]) test('a replayed cell whose output differs only in the middle is reported', { timeout: 120000 }, async () => {
		const s = 'middle';
		await ok(h, s, "import time\ndef mid():\n    return 'a' * 20000 + '%020.6f' % time.time() + 'b' * 20000");
		await ok(h, s, 'print(mid())');
		const r = await timeout(h, s);
		assert.doesNotMatch(r.text, /same output/, r.text);
		assert.match(r.text, /cell 2 gave another output when run again/, r.text);
	});
});

describe('replay log: a replayed cell is held to max_workspace_mb', () => {
	let h, root;
	before(async () => {
		let skill;
		[root, skill] = projectWith('rpws', [['max_workspace_mb: 4096', 'max_workspace_mb: 20']]);
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	test('a 300 MB sparse file written only on the second run stops the replay', { timeout: 120000 }, async () => {
		const s = 'sparse';
		await ok(h, s, "import os\ndef grow():\n    if os.path.exists('workspace/go'):\n        os.truncate(os.open('workspace/big.bin', os.O_CREAT | os.O_WRONLY), 300 << 20)");
		await ok(h, s, 'grow()\nw = 1');
		writeFile(root, 'workspace/go', '');
		const r = await timeout(h, s);
		assert.ok(fs.existsSync(path.join(root, 'workspace', 'big.bin')), 'the replay ran the cell');
		assert.doesNotMatch(r.text, /same output/, r.text);
		assert.match(r.text, /cell 2 failed when run again \([^)]*max_workspace_mb/, r.text);
		const k = await ok(h, s, "'w' in globals(), 'grow' in globals()");
		assert.equal(k.sc.result, '(False, True)', show(k.sc));
		fs.rmSync(path.join(root, 'workspace', 'big.bin'));
	});
});

describe('replay log: effects outside memory (approved policy: network, programs, results/)', () => {
	let h, root, cfg, server, hits = 0;
	before(async () => {
		root = newProject('rpapp');
		cfg = tmpDir('rpappcfg');
		writeFile(root, SKILL_REL, `---
name: effects
description: network, programs and a second writable directory
permissions:
  fs_read: true
  fs_write: [workspace, results]
  shell_exec: true
  net_access: true
---
Body.
`);
		fs.mkdirSync(path.join(root, 'results'));
		const t = spawnSync(BIN, ['--trust', '--yes', '--root', root], { encoding: 'utf8', env: { PATH: process.env.PATH, XDG_CONFIG_HOME: cfg } });
		assert.equal(t.status, 0, t.stdout + t.stderr);
		server = http.createServer((req, res) => { hits++; req.resume(); req.on('end', () => res.end('paid')); });
		await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
		h = await startClient(root, { structured: true, env: { XDG_CONFIG_HOME: cfg } });
	});
	after(async () => {
		await h?.close();
		await new Promise((r) => server?.close(r));
		fs.rmSync(cfg, { recursive: true, force: true });
	});

	test('an HTTP POST reaches the listener once', { timeout: 120000 }, async () => {
		const s = 'post';
		await ok(h, s, 'from urllib.request import urlopen, Request');
		await ok(h, s, `urlopen(Request('http://127.0.0.1:${server.address().port}/pay', data=b'amount=100')).status`);
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		await sleep(300);
		assert.equal(hits, 1, r.text);
	});

	// No word of the cell names it, and the socket is opened and closed
	// within the cell: the session's audit hook saw the connection.
	test('an HTTP POST hidden in a function defined earlier reaches the listener once', { timeout: 120000 }, async () => {
		const s = 'hidden';
		const n0 = hits;
		await ok(h, s, `from urllib.request import urlopen, Request\ndef pay():\n    return urlopen(Request('http://127.0.0.1:${server.address().port}/pay', data=b'amount=5')).status`);
		await ok(h, s, 'code = pay()');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		await sleep(300);
		assert.equal(hits - n0, 1, r.text);
		assert.equal((await ok(h, s, 'code, y')).sc.result, '(200, 2)');
	});

	test('a program started by a cell runs once', { timeout: 120000 }, async () => {
		const s = 'prog';
		await ok(h, s, 'import subprocess');
		await ok(h, s, "subprocess.run(['sh', '-c', 'echo ran >> results/sh.txt'])");
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.deepEqual(lines(path.join(root, 'results', 'sh.txt')), ['ran'], r.text);
	});

	test("to_csv(..., mode='a') into results/ is not appended twice", { timeout: 120000 }, async () => {
		const s = 'csv';
		await ok(h, s, "import pandas as pd\ndf = pd.DataFrame({'a': [1]})");
		await ok(h, s, "df.to_csv('results/log.csv', mode='a', header=False, index=False)");
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.equal(lines(path.join(root, 'results', 'log.csv')).length, 1, r.text);
	});

	// The CREATE TABLE, logged, failed when run again, and the replay
	// dropped what every later cell did; the insert, logged, made 2 rows.
	test('an sqlite table and insert: one row, and the later cells keep their state', { timeout: 120000 }, async () => {
		const s = 'db';
		await ok(h, s, 'x = 1');
		await ok(h, s, "import sqlite3\ncon = sqlite3.connect('results/t.db')\ncon.execute('CREATE TABLE t (a)')");
		await ok(h, s, "con.execute('INSERT INTO t VALUES (1)')\ncon.commit()");
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		const n = spawnSync('python3', ['-c', `import sqlite3; print(sqlite3.connect(${JSON.stringify(path.join(root, 'results', 't.db'))}).execute('SELECT COUNT(*) FROM t').fetchone()[0])`], { encoding: 'utf8' });
		assert.equal(n.stdout.trim(), '1', n.stderr + r.text);
		const k = await ok(h, s, 'x, y');
		assert.equal(k.sc.result, '(1, 2)', r.text);
	});
});
