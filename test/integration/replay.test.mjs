// The replay log: after a cheap, safe cell the server takes no checkpoint
// (no fork of the session) and only logs the cell; a rollback resumes the
// last checkpoint and runs the logged cells again, comparing each one's
// output with the first run's.  Checked from outside: which cell each
// checkpoint process holds (its title in /proc), the workspace's files,
// the values the rolled-back session holds, and what the reply says.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, checkpointCells, writeFile, sleep, show } from './lib.mjs';
import { ok, timeout } from './reply_lib.mjs';

/** Waits until the session's checkpoint holds the given cell (it is taken
 *  right after the reply).  Not longer than 3 s: a session at rest for 5 s
 *  takes a checkpoint of its latest state anyway, to save it. */
async function checkpointAt(h, session, cell, ms = 3000) {
	const end = Date.now() + ms;
	let got = checkpointCells(h.pid, session);
	while (!(got.length === 1 && got[0] === cell) && Date.now() < end) {
		await sleep(50);
		got = checkpointCells(h.pid, session);
	}
	return got;
}

describe('replay log', () => {
	let h;
	before(async () => { h = await startClient(newProject('replay'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('cheap cells fork nothing; a rollback runs them again and keeps every value', { timeout: 120000 }, async () => {
		const s = 'cheap';
		await ok(h, s, 'a = 1');
		assert.deepEqual(await checkpointAt(h, s, 1), [1], 'the first call has no checkpoint to replay from: it forks');
		for (let i = 2; i <= 5; i++) await ok(h, s, `v${i} = a + ${i}\nprint(v${i})`);
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1], 'no checkpoint after the cheap cells');
		const r = await timeout(h, s);
		assert.match(r.text, /the copy taken after cell 1 was resumed and cells 2 to 5 run again \([0-9.]+ s\), with the same output as the first time/, r.text);
		const k = await ok(h, s, '(a, v2, v3, v4, v5)');
		assert.equal(k.sc.result, '(1, 3, 4, 5, 6)', show(k.sc));
		assert.equal(k.sc.state, 'kept');
	});

	test('a hundred cheap cells in a row: a rollback runs again every one logged since the last checkpoint, none lost to the replay\'s deadline', { timeout: 180000 }, async () => {
		// When each cell run again was followed by a checkpoint, a hundred
		// `a += i` cells priced by their calls alone took 1.6 s to run
		// again on a quiet machine, and beside two CPU hogs the replay ran
		// into its deadline at cell 19: the cells after it were lost.  A
		// replay now takes one checkpoint, after its last cell.  A server
		// of its own, to read its verdicts.
		const d = await startClient(newProject('replay-many'), { structured: true, args: ['--log-level', 'debug'] });
		try {
			const s = 'many';
			await ok(d, s, 'a = 0');
			for (let i = 1; i <= 100; i++) await ok(d, s, `a += ${i}`);
			const verdicts = d.stderr().split('\n').filter((l) => /session many: cell \d+ \(\d+ ms, \d+ ms to run again\): /.test(l));
			assert.ok(verdicts.length >= 101, `verdicts: ${verdicts.length}`);
			const logged = verdicts.filter((l) => /: log \(/.test(l)).length;
			assert.ok(logged >= 1, `logged: ${logged}\n${verdicts.slice(-5).join('\n')}`);
			const r = await timeout(d, s);
			// How many cells the budget logs after the last checkpoint
			// depends on what that checkpoint cost: under the sanitizers
			// on a slow VM it was one ("cell 101 run again").
			assert.match(r.text, /was resumed and (?:cell 101|cells \d+ to 101) run again \([0-9.]+ s\), with the same output as the first time/, r.text);
			const k = await ok(d, s, 'a');
			assert.equal(k.sc.result, String(100 * 101 / 2), show(k.sc));
		} finally {
			await d.close();
		}
	});

	test('a cell naming the clock or random forks: the rolled-back state has its first values', { timeout: 120000 }, async () => {
		const s = 'entropy';
		await ok(h, s, 'x = 1');
		const t = await ok(h, s, 'import time\nt = time.time()\nrepr(t)');
		assert.deepEqual(await checkpointAt(h, s, 2), [2], 'time.time() forces a checkpoint');
		const rnd = await ok(h, s, 'import random\nr = random.random()\nrepr(r)');
		assert.deepEqual(await checkpointAt(h, s, 3), [3], 'random without a seed forces a checkpoint');
		await ok(h, s, 'u = 2');
		const r = await timeout(h, s);
		assert.match(r.text, /the copy taken after cell 3 was resumed and cell 4 run again/, r.text);
		const k = await ok(h, s, 'repr(t), repr(r), u');
		assert.equal(k.sc.result, `(${t.sc.result}, ${rnd.sc.result}, 2)`, show(k.sc));
	});

	test('a cell that writes in the workspace forks: the file is not written twice', { timeout: 120000 }, async () => {
		const s = 'writer';
		await ok(h, s, 'x = 1');
		await ok(h, s, "with open('workspace/appends.txt', 'a') as f:\n    f.write('line\\n')");
		assert.deepEqual(await checkpointAt(h, s, 2), [2], 'a workspace write forces a checkpoint');
		await ok(h, s, 'y = 2');
		const r = await timeout(h, s);
		assert.match(r.text, /after cell 2 was resumed and cell 3 run again/, r.text);
		assert.equal(fs.readFileSync(path.join(h.root, 'workspace', 'appends.txt'), 'utf8'), 'line\n');
		const k = await ok(h, s, 'x, y');
		assert.equal(k.sc.result, '(1, 2)', show(k.sc));
	});

	test('a replayed cell whose output differs is reported', { timeout: 120000 }, async () => {
		const s = 'differ';
		await ok(h, s, 'import time\ndef stamp():\n    return time.time()');
		await ok(h, s, 'w = stamp()\nprint(repr(w))'); // no clock named: logged
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1]);
		const r = await timeout(h, s);
		assert.match(r.text, /cell 2 gave another output when run again \(first `[0-9.]+`, now `[0-9.]+`\): what it computed may differ from before/, r.text);
	});

	test('a replayed cell that fails: reported, and the state is the cells before it', { timeout: 120000 }, async () => {
		const s = 'fails';
		writeFile(h.root, 'workspace/data.txt', 'payload');
		// The read is hidden in a function defined by the first cell (which
		// forks anyway): a cell that names it forks (the next test).
		await ok(h, s, "x = 1\ndef get():\n    return open('workspace/data.txt').read()");
		await ok(h, s, 'y = 2');
		await ok(h, s, 'data = get()');
		await ok(h, s, 'z = 3');
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1]);
		fs.rmSync(path.join(h.root, 'workspace', 'data.txt')); // from outside: no call sees it go
		const r = await timeout(h, s);
		assert.match(r.text, /cell 3 failed when run again \(FileNotFoundError: [^)]*\), so the state is as after cell 2: what cells 3 to 4 did to variables is gone/, r.text);
		// No checkpoint is taken between two cells run again: the failure
		// took the process back to the copy after cell 1, and cell 2 ran
		// once more from there.
		assert.match(r.text, /so cell 2 ran once more to rebuild the state before cell 3/, r.text);
		const k = await ok(h, s, "x, y, 'data' in globals(), 'z' in globals()");
		assert.equal(k.sc.result, '(1, 2, False, False)', show(k.sc));
	});

	test('a cell that reads a file forks: replaced between calls, the rolled-back state keeps the first read', { timeout: 120000 }, async () => {
		const s = 'writer'; // again, new (this file uses the policy's 8 sessions)
		writeFile(h.root, 'workspace/input.csv', 'a,b\n1,2\n');
		const first = await execPy(h, 'x = 1', { session: s, reset: true });
		assert.deepEqual([first.sc.status, first.sc.execution_count], ['ok', 1], show(first.sc));
		await ok(h, s, "rows = open('workspace/input.csv').read().splitlines()");
		assert.deepEqual(await checkpointAt(h, s, 2), [2], 'a file read forces a checkpoint');
		await ok(h, s, 'n = len(rows)');
		writeFile(h.root, 'workspace/input.csv', 'a,b\n1,2\n3,4\n5,6\n'); // the user replaces it
		const r = await timeout(h, s);
		assert.match(r.text, /after cell 2 was resumed and cell 3 run again/, r.text);
		const k = await ok(h, s, 'n, len(rows)');
		assert.equal(k.sc.result, '(2, 2)', show(k.sc));
	});

	test('an import of the installed Python is logged; one of a project module forks and keeps its first read', { timeout: 120000 }, async () => {
		const s = 'differ'; // again (max_sessions), from its first cell
		writeFile(h.root, 'workspace/psm_replay_mod.py', 'v = 1\n');
		const first = await execPy(h, 'x = 1', { session: s, reset: true });
		assert.equal(first.sc.execution_count, 1, show(first.sc));
		await ok(h, s, 'import plistlib\nn = len(plistlib.__name__)');
		assert.deepEqual(await checkpointAt(h, s, 2, 1000), [1], 'an import of the installation is no file read');
		let r = await timeout(h, s);
		assert.match(r.text, /after cell 1 was resumed and cell 2 run again/, r.text);
		await ok(h, s, "import sys\nsys.path.insert(0, 'workspace')\nimport psm_replay_mod\ny = psm_replay_mod.v");
		assert.deepEqual(await checkpointAt(h, s, 4), [4], "a project module's import forces a checkpoint");
		writeFile(h.root, 'workspace/psm_replay_mod.py', 'v = 2\n'); // the agent edits it
		r = await timeout(h, s);
		assert.doesNotMatch(r.text, /run again/, r.text);
		const k = await ok(h, s, 'y, n');
		assert.equal(k.sc.result, '(1, 8)', show(k.sc));
	});

	test('a replayed cell that hangs is bounded by twice its first time plus 1 s', { timeout: 120000 }, async () => {
		const s = 'hang';
		await ok(h, s, "import os, signal\nx = 1\ndef gate():\n    if os.path.exists('workspace/go'):\n        signal.pause()");
		await ok(h, s, 'gate()\nw = 1');
		writeFile(h.root, 'workspace/go', '');
		const t0 = Date.now();
		const r = await timeout(h, s);
		const ms = Date.now() - t0;
		assert.match(r.text, /cell 2 failed when run again \(it ran past [0-9.]+ s, twice its first duration and a second\), so the state is as after cell 1/, r.text);
		assert.ok(ms < 15000, `the reply took ${ms} ms`);
		const k = await ok(h, s, "x, 'w' in globals()");
		assert.equal(k.sc.result, '(1, False)', show(k.sc));
		fs.rmSync(path.join(h.root, 'workspace', 'go'));
	});

	test('fork_from a session whose last cells were only logged copies its latest state', { timeout: 120000 }, async () => {
		const s = 'parent';
		await ok(h, s, 'x = 1');
		await ok(h, s, 'x += 1');
		await ok(h, s, 'x += 1');
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1], 'cells 2 and 3 were logged');
		const c = await execPy(h, 'x', { session: 'child', fork_from: s });
		assert.equal(c.sc.result, '3', show(c.sc));
		// The parent's own rollback still runs its log again.
		const r = await timeout(h, s);
		assert.match(r.text, /after cell 1 was resumed and cells 2 to 3 run again/, r.text);
		assert.equal((await ok(h, s, 'x')).sc.result, '3');
	});
});

// Its own server: the suite above uses every session the policy allows.
describe('replay log: outputs kept in log files', () => {
	let h;
	before(async () => { h = await startClient(newProject('replaylog'), { structured: true }); });
	after(async () => { await h?.close(); });

	// A long output and a binary one are cut in the reply, the whole kept in
	// a log file whose name the reply shows; the run again writes a log of
	// its own (the first one stays), so its text names another file.  The
	// outputs are the same: a note that says they differ tells the model its
	// state may be wrong when it is not (and quotes other calls' output).
	test('a replayed cell with a long or a binary output has the same output', { timeout: 120000 }, async () => {
		const s = 'longout';
		await ok(h, s, 'a = 1');
		assert.deepEqual(await checkpointAt(h, s, 1), [1]);
		const long = await ok(h, s, "print('first')\nprint('y' * 30000)\nprint('last')");
		assert.match(long.text, /characters omitted .*full output in .*\.logs\/longout-2\.stdout\.log/, long.text);
		const bin = await ok(h, s, "import os\nos.write(1, bytes(range(256)))\nprint('\\nafter the bytes')");
		assert.match(bin.text, /bytes of binary output .*\.logs\/longout-3\.stdout\.log/, bin.text);
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1], 'both cells are logged, not forked');
		const r = await timeout(h, s);
		assert.match(r.text, /the copy taken after cell 1 was resumed and cells 2 to 3 run again \([0-9.]+ s\), with the same output as the first time/, r.text);
		assert.doesNotMatch(r.text, /another output/, r.text);
	});
});

// A checkpoint shares every page with the session, so the next call that
// rewrites a large array copies all of it (the kernel's copy-on-write): on a
// VM whose fault costs 17 us, `a += 1` on 1 GiB took 4.1 s after a
// checkpoint against 51 ms without.  Priced with that copy, such a call was
// always over the replay budget, so it was checkpointed, and the next call
// copied the GiB again: every call, 98 times the time without checkpoints.
// Its own server, to read its verdicts (debug log).
describe('replay log: a call that copies what the checkpoint shared', () => {
	let h;
	before(async () => { h = await startClient(newProject('replaycopy'), { structured: true, args: ['--log-level', 'debug'] }); });
	after(async () => { await h?.close(); });

	test('is logged, not checkpointed: its copying is left out of its price, and a rollback runs it again with the cells after it, with no checkpoint between them', { timeout: 180000 }, async () => {
		const s = 'copy';
		// 32 MB, every page written (np.zeros would leave them unmapped:
		// the next cell's faults would be fresh pages, not copies);
		// a[::512] += 1 writes one float in every 4 kB page: 8,192 copies
		// after a checkpoint, next to nothing without one.  The price
		// leaves out the copying's share of the call's CPU time: by its
		// duration alone (at most 40 us a fault), the full suite's load
		// made a 256 MB copy a 4.6 s call with 2 s left in its price, and
		// beside three CPU hogs 8,192 faults took 1.6 s of the call.
		await ok(h, s, 'import numpy as np\na = np.ones(2**22)');
		assert.deepEqual(await checkpointAt(h, s, 1), [1]);
		await ok(h, s, 'a[::512] += 1');
		await ok(h, s, 'a[::512] += 1');
		await sleep(300);
		const verdict = (cell) => h.stderr().split('\n').find((l) => new RegExp(`session copy: cell ${cell} \\(`).test(l)) || '';
		const v2 = verdict(2);
		const m = /cell 2 \((\d+) ms, (\d+) ms to run again\): log \(.*; (\d+) ms left out as copying for the checkpoint\)/.exec(v2);
		assert.ok(m, `cell 2's verdict: ${v2}`);
		assert.ok(Number(m[3]) > 0 && Number(m[2]) <= Number(m[1]) - Number(m[3]) + 1000, v2);
		assert.match(verdict(3), /: log \(/, verdict(3));
		assert.deepEqual(checkpointCells(h.pid, s), [1], 'no checkpoint after the copying call');
		const before = h.stderr().length;
		const r = await timeout(h, s);
		assert.match(r.text, /the copy taken after cell 1 was resumed and cells 2 to 3 run again \([0-9.]+ s\), with the same output as the first time/, r.text);
		const k = await ok(h, s, 'float(a[0]), float(a[512]), float(a[1])');
		assert.equal(k.sc.result, '(3.0, 3.0, 1.0)', show(k.sc));
		// The replay's checkpoints: the resumed copy's own (cell 1) and
		// the one after its last cell (3), none after cell 2 (the next
		// cell would have copied every page again).
		const taken = h.stderr().slice(before).split('\n').filter((l) => /session copy: a checkpoint holds the state after cell/.test(l));
		assert.ok(taken.some((l) => /after cell 3$/.test(l)), taken.join('\n'));
		assert.ok(!taken.some((l) => /after cell 2\b/.test(l)), taken.join('\n'));
	});
});

describe('replay log: a cell that fails when run again, twice', () => {
	let h;
	before(async () => { h = await startClient(newProject('replaytwice'), { structured: true }); });
	after(async () => { await h?.close(); });

	// The failure takes the process back to the copy the replay started
	// from, and the cells before the failed one run once more; a cell that
	// fails in that second pass too leaves the copy's state, and the note
	// names both.
	test('a cell of the second pass that fails too: the state is the copy\'s, and the note says so', { timeout: 120000 }, async () => {
		const s = 'twice';
		writeFile(h.root, 'workspace/data.txt', 'payload');
		await ok(h, s, "import os\nx = 1\ndef g():\n    if os.path.exists('workspace/flag'):\n        raise RuntimeError('second pass')\n    return 1\n"
			+ "def get():\n    try:\n        return open('workspace/data.txt').read()\n    except FileNotFoundError:\n"
			+ "        open('workspace/flag', 'w').close()\n        raise");
		await ok(h, s, 'y = g()');
		await ok(h, s, 'data = get()');
		await ok(h, s, 'z = 3');
		await sleep(300);
		assert.deepEqual(checkpointCells(h.pid, s), [1]);
		fs.rmSync(path.join(h.root, 'workspace', 'data.txt'));
		const r = await timeout(h, s);
		assert.match(r.text, /but cell 3 failed when run again \(FileNotFoundError: [^)]*\), and cell 2 failed when run once more to rebuild the state before it \(RuntimeError: second pass\), so the state is as after cell 1: what cells 2 to 4 did to variables is gone/, r.text);
		const k = await ok(h, s, "x, 'y' in globals(), 'data' in globals(), 'z' in globals()");
		assert.equal(k.sc.result, '(1, False, False, False)', show(k.sc));
	});
});

// The budget is priced by what a checkpoint of the session costs: its fork
// and the copies it makes the calls after it do.  With a fixed second, the
// agent loop at 4M rows back to back forked 47 of 140 calls (37 for the
// budget), each fork costing the next calls about 250 ms of copies.  A
// session whose checkpoint makes the next call copy 256 MB gets a budget of
// thirty times that (at most 10 s); a small one keeps a lower one (a second on
// the plain build).  Its own
// server, to read the verdicts (debug log).
describe('replay log: the budget priced by what a checkpoint costs', () => {
	let h;
	before(async () => { h = await startClient(newProject('replaybudget'), { structured: true, args: ['--log-level', 'debug'] }); });
	after(async () => { await h?.close(); });

	const SPIN = 'import time\nn = 0\ndef spin(ms):\n    t = time.perf_counter()\n    while time.perf_counter() - t < ms / 1000:\n        pass\n';
	const verdict = (s, cell) => h.stderr().split('\n').find((l) => new RegExp(`session ${s}: cell ${cell} \\(`).test(l)) || '';
	const parse = (line) => {
		const m = /\((\d+) ms, (\d+) ms to run again\): ([^(]*)\((\d+) logged, (\d+) ms of a budget of (\d+) ms for a checkpoint costing (\d+) ms;/.exec(line);
		assert.ok(m, line);
		return { price: Number(m[2]), verdict: m[3].trim(), logged: Number(m[4]), logMs: Number(m[5]), budget: Number(m[6]), cost: Number(m[7]) };
	};
	const priced = (cost) => Math.min(Math.max(30 * cost, 1000), 10000);
	let dearBudget = 0;

	test('a checkpoint that makes the next call copy 256 MB raises the budget: cells past a second are logged, and a rollback runs them all again', { timeout: 240000 }, async () => {
		const s = 'dear';
		// Every page written, so that a[::512] += 1 after the checkpoint
		// copies each 4 kB page of it (a huge page shared copy-on-write is
		// split and copied 4 kB at a time): 65,536 copies.
		await ok(h, s, `${SPIN}import numpy as np\na = np.ones(2**25)`);
		assert.deepEqual(await checkpointAt(h, s, 1), [1]);
		await ok(h, s, 'a[::512] += 1');
		for (let i = 0; i < 4; i++) await ok(h, s, 'spin(300)\nn += 1');
		await sleep(300);
		const v = [2, 3, 4, 5, 6].map((c) => parse(verdict(s, c)));
		for (const x of v) assert.equal(x.verdict, 'log', JSON.stringify(v));
		const last = v[4];
		// What a fixed second would have forked: the logged cells and the
		// last one's price come to more than it.
		assert.ok(last.logMs + last.price >= 1000, JSON.stringify(last));
		assert.ok(last.budget > last.logMs + last.price, JSON.stringify(last));
		assert.ok(Math.abs(last.budget - priced(last.cost)) <= 30, JSON.stringify(last));
		dearBudget = last.budget;
		assert.deepEqual(checkpointCells(h.pid, s), [1], 'no checkpoint after cells 2 to 6');
		const r = await timeout(h, s);
		assert.match(r.text, /the copy taken after cell 1 was resumed and cells 2 to 6 run again \([0-9.]+ s\), with the same output as the first time/, r.text);
		const k = await ok(h, s, 'n, float(a[0]), float(a[1])');
		assert.equal(k.sc.result, '(4, 2.0, 1.0)', show(k.sc));
	});

	test('a small session\'s budget is lower: cells past it take a checkpoint', { timeout: 180000 }, async () => {
		// Its checkpoint costs a few milliseconds on the plain build (a
		// budget of a second), tens under the sanitizers on a loaded
		// machine: enough cells of 300 ms to spend whatever it is, and
		// three more.
		const s = 'cheap';
		await ok(h, s, SPIN);
		assert.deepEqual(await checkpointAt(h, s, 1), [1]);
		await ok(h, s, 'spin(300)\nn += 1');
		const first = parse(verdict(s, 2));
		assert.equal(first.verdict, 'log', JSON.stringify(first));
		assert.ok(dearBudget > 0 && first.budget < dearBudget, `${first.budget} against ${dearBudget}`);
		const cells = Math.ceil(first.budget / 300) + 3;
		for (let i = 1; i < cells; i++) await ok(h, s, 'spin(300)\nn += 1');
		const v = Array.from({ length: cells }, (_, i) => parse(verdict(s, i + 2)));
		const forked = v.filter((x) => x.verdict === 'fork: the budget is spent');
		assert.ok(forked.length >= 1, JSON.stringify(v));
		for (const x of forked) assert.ok(x.logMs + x.price >= x.budget, JSON.stringify(x));
		for (const x of v) assert.ok(Math.abs(x.budget - priced(x.cost)) <= 30, JSON.stringify(x));
		const k = await ok(h, s, 'n');
		assert.equal(k.sc.result, String(cells), show(k.sc));
	});
});

// The kernel's view of the session before a cell (its descriptors, its
// bytes written, its children: what tells an effect past its memory) is
// the one read at the last freeze when the session has not run since: about
// 15 system calls of a warm call's 73.  Only then: a session that ran in
// between (here to fork a copy for fork_from) is read again, and an effect
// in a cell right after a logged one is still seen (replay_effects).  Its
// own server, to read the debug log.
describe('replay log: the view before a cell, kept from the last freeze', () => {
	let h;
	before(async () => { h = await startClient(newProject('replaykept'), { structured: true, args: ['--log-level', 'debug'] }); });
	after(async () => { await h?.close(); });

	const view = (s, cell) => h.stderr().split('\n').find((l) => new RegExp(`session ${s}: the kernel's view before cell ${cell}: `).test(l)) || '';
	const verdict = (s, cell) => h.stderr().split('\n').find((l) => new RegExp(`session ${s}: cell ${cell} \\(`).test(l)) || '';

	test('stands after a logged cell, and is read again once the session ran (a fork_from copy)', { timeout: 120000 }, async () => {
		const s = 'kept';
		await ok(h, s, 'x = 1');
		await ok(h, s, 'x += 1');
		await ok(h, s, 'x += 1');
		await sleep(200);
		assert.match(verdict(s, 2), /: log \(/, verdict(s, 2));
		assert.match(view(s, 3), /the one read at the last freeze \(the session has not run since\)$/, view(s, 3));
		const f = await execPy(h, 'x', { session: 'branch', fork_from: s });
		assert.equal(f.sc.status, 'ok', show(f.sc));
		assert.equal((await ok(h, s, 'x += 1\nx')).sc.result, '4');
		await sleep(200);
		assert.match(view(s, 4), /: read now$/, view(s, 4));
		// The rollback runs the logged cells again on the copy: the
		// views kept decided nothing wrong.
		const r = await timeout(h, s);
		assert.match(r.text, /run again/, r.text);
		const k = await ok(h, s, 'x');
		assert.equal(k.sc.result, '4');
		// Another process now (the resumed copy): its view is read.
		await sleep(200);
		const cell = k.sc.execution_count;
		assert.match(view(s, cell), /: read now$/, `cell ${cell}: ${view(s, cell)}`);
	});
});
