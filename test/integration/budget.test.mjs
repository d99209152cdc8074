// The server's own work on files the sandbox wrote is budgeted and runs off
// the event loop: a workspace of huge sparse files (4 KiB on disk, hundreds
// of MiB to read) must not delay a ping or another session's timeout.
// Everything is measured from outside: the client's clock, the reply.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, callTool, jsonResult, writeFile, show, sleep, projectWith } from './lib.mjs';

const MiB = 1024 * 1024;

/** Pings every 50 ms until stop() and returns the latencies (ms). */
function pinger(h) {
	const lat = [];
	let running = true;
	const done = (async () => {
		while (running) {
			const t = performance.now();
			await h.client.ping({ timeout: 300000 });
			lat.push(performance.now() - t);
			await sleep(50);
		}
	})();
	return { lat, async stop() { running = false; await done; return lat; } };
}

describe('budgets of the server\'s own work', () => {
	let h, root;
	before(async () => {
		root = newProject('budget');
		h = await startClient(root, { structured: true });
		await Promise.all([execPy(h, 'x = 1'), execPy(h, 'import time', { session: 'other' })]);
	});
	after(async () => { await h?.close(); });

	test('list_artifacts over 20 sparse files of 512 MiB: pings stay fast, another session times out on time, hashes are skipped with a reason', { timeout: 120000 }, async (t) => {
		const dir = path.join(root, 'workspace', 'sparse');
		fs.mkdirSync(dir, { recursive: true });
		for (let i = 0; i < 20; i++) fs.closeSync(fs.openSync(path.join(dir, `f${String(i).padStart(2, "0")}.bin`), "w"));
		for (let i = 0; i < 20; i++) fs.truncateSync(path.join(dir, `f${String(i).padStart(2, '0')}.bin`), 512 * MiB);
		assert.ok(fs.statSync(path.join(dir, 'f00.bin')).blocks <= 16, 'the files are sparse');

		const p = pinger(h);
		const t0 = performance.now();
		const listing = callTool(h, 'list_artifacts', { path: 'workspace/sparse' }, { timeout: 300000 }).then((r) => ({ r, ms: performance.now() - t0 }));
		await sleep(100);
		const tt = performance.now();
		const spin = await execPy(h, 'while True:\n    pass', { session: 'other', timeout_s: 3 }, { timeout: 300000 });
		const spinMs = performance.now() - tt;
		const { r, ms } = await listing;
		const lat = await p.stop();

		assert.equal(spin.sc.status, 'timeout', show(spin.sc));
		// 3 s of timeout plus the roll-back; on the old single thread it took
		// as long as the hashing (25 s and more).
		assert.ok(spinMs < 10000, `the other session's 3 s timeout took ${spinMs.toFixed(0)} ms`);
		const worst = Math.max(...lat);
		t.diagnostic(`list_artifacts ${ms.toFixed(0)} ms; worst ping ${worst.toFixed(1)} ms of ${lat.length}; 3 s timeout answered in ${spinMs.toFixed(0)} ms`);
		assert.ok(lat.length >= 3, `pings answered during the listing: ${lat.length}`);
		assert.ok(worst < 1000, `a ping waited ${worst.toFixed(0)} ms during list_artifacts (all: ${lat.map((x) => x.toFixed(0)).join(', ')})`);

		const j = jsonResult(r).sc;
		assert.equal(j.count, 20, show(j));
		assert.equal(j.truncated, true, 'a budget ended the hashing: truncated');
		const hashed = j.artifacts.filter((a) => a.sha256);
		const skipped = j.artifacts.filter((a) => a.sha256 === null);
		assert.equal(hashed.length, 0, 'no 512 MiB file fits the 256 MiB budget');
		assert.equal(skipped.length, 20);
		for (const a of skipped) assert.match(a.sha256_skipped, /not hashed: list_artifacts hashes at most 256 MiB per call/);
		assert.ok(ms < 60000, `list_artifacts took ${ms.toFixed(0)} ms`);
	});

	test('list_artifacts hashes what fits in its budget and skips the rest', { timeout: 120000 }, async () => {
		const dir = path.join(root, 'workspace', 'mixed');
		fs.mkdirSync(dir, { recursive: true });
		fs.writeFileSync(path.join(dir, 'a.txt'), 'abc');
		for (const n of ['b.bin', 'c.bin']) {
			fs.closeSync(fs.openSync(path.join(dir, n), 'w'));
			fs.truncateSync(path.join(dir, n), 200 * MiB);
		}
		const j = jsonResult(await callTool(h, "list_artifacts", { path: "workspace/mixed" }, { timeout: 120000 })).sc;
		const by = Object.fromEntries(j.artifacts.map((a) => [a.path.split('/').pop(), a]));
		assert.equal(by['a.txt'].sha256, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
		// 200 MiB of zeros fits once, not twice.
		assert.match(by['b.bin'].sha256 ?? '', /^[0-9a-f]{64}$/, show(by['b.bin']));
		assert.equal(by['c.bin'].sha256, null, show(by['c.bin']));
		assert.ok(by['c.bin'].sha256_skipped);
		assert.equal(j.truncated, true);
	});

	test('verify_outputs reads at most 256 MiB per call: a file past the budget is not passed, the detail says why; pings stay fast', { timeout: 120000 }, async () => {
		const dir = path.join(root, 'workspace', 'outputs');
		const files = [];
		for (let i = 0; i < 4; i++) {
			const f = path.join(dir, `v${i}.txt`);
			fs.writeFileSync(f, 'x');
			fs.truncateSync(f, 200 * MiB);
			files.push({ path: `workspace/outputs/v${i}.txt`, kind: "any" });
		}
		const p = pinger(h);
		const r = await callTool(h, 'verify_outputs', { files, require_success: false, write_summary: false }, { timeout: 120000 });
		const lat = await p.stop();
		const j = jsonResult(r).sc;
		assert.equal(j.checks[0].ok, true, show(j.checks[0]));
		for (const c of j.checks.slice(1)) {
			assert.equal(c.ok, false, show(c));
			assert.match(c.detail, /not checked: verify_outputs reads at most 256 MiB per call/);
		}
		assert.equal(j.status, 'failed');
		assert.equal(j.truncated, true);
		const worst = Math.max(...lat);
		assert.ok(worst < 1000, `a ping waited ${worst.toFixed(0)} ms during verify_outputs (all: ${lat.map((x) => x.toFixed(0)).join(', ')})`);
		for (const f of files) fs.unlinkSync(path.join(root, f.path));
	});
});


describe('the server\'s own logs on disk', () => {
	test('printing 40 MiB with max_file_mb 4: the log file stays within 4 MiB, keeps head and tail, and says what it left out', { timeout: 120000 }, async () => {
		const [root, skill] = projectWith('logcap', [['max_file_mb: 512', 'max_file_mb: 4']]);
		const h = await startClient(root, { structured: true, args: ['--skill', skill] });
		try {
			const code = 'import sys\nprint("HEAD-START")\nblock = ("y" * 1023 + "\\n") * 1024\nfor _ in range(40):\n    sys.stdout.write(block)\nprint("THE-END")';
			const r = await execPy(h, code, { timeout_s: 120 }, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.ok(r.sc.full_output, show(r.sc));
			const log = path.join(root, r.sc.full_output);
			const st = fs.statSync(log);
			assert.ok(st.size <= 4 * MiB, `the log holds ${st.size} bytes, over max_file_mb 4`);
			assert.ok(st.size > 2 * MiB, `the log keeps its head: ${st.size} bytes`);
			const text = fs.readFileSync(log, 'utf8');
			assert.ok(text.startsWith('HEAD-START\n'), text.slice(0, 40));
			assert.ok(text.endsWith('THE-END\n'), JSON.stringify(text.slice(-40)));
			const m = text.match(/\n\[\.\.\. (\d+) bytes left out: this log keeps the first (\d+) and the last (\d+) bytes \(limits\.max_file_mb caps the server's logs too\) \.\.\.\]\n/);
			assert.ok(m, 'a marker says what was left out');
			const total = 11 + 40 * MiB + 8;
			assert.equal(Number(m[1]) + Number(m[2]) + Number(m[3]), total, 'left out + head + tail = all that was printed');
			// The reply still shows its own head and tail.
			assert.ok(r.sc.stdout.includes('THE-END'));
		} finally {
			await h.close();
		}
	});
});

/** Bytes the directory takes on disk (allocated blocks), seen from the host. */
function diskUse(dir) {
	let total = 0;
	for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
		const p = path.join(dir, e.name);
		const st = fs.lstatSync(p);
		total += st.blocks * 512;
		if (e.isDirectory()) total += diskUse(p);
	}
	return total;
}

describe('limits.max_workspace_mb', () => {
	let h, root;
	before(async () => {
		let skill;
		[root, skill] = projectWith('wslimit', [['max_workspace_mb: 4096', 'max_workspace_mb: 50']]);
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	test('--check shows the limit', async () => {
		const { execFileSync } = await import('node:child_process');
		const out = execFileSync(process.env.PSM_BIN, ['--check', '--root', root, '--skill', path.join(root, 'policy/SKILL.md')], { encoding: 'utf8' });
		assert.match(out, /max_workspace_mb: 50\b/);
	});

	test('a call that writes past it is stopped: status limits, exit 153, rolled back, the reply names the limit; its files stay', { timeout: 120000 }, async () => {
		const first = await execPy(h, 'kept = 7\nimport os, time');
		assert.equal(first.sc.status, 'ok', show(first.sc));
		const code = 'lost = 1\nfor i in range(100):\n    with open(f"workspace/fill{i:03d}.bin", "wb") as f:\n        f.write(os.urandom(10 << 20))\n    time.sleep(0.02)\n"not reached"';
		const r = await execPy(h, code, { timeout_s: 120 }, { timeout: 150000 });
		assert.equal(r.sc.status, 'limits', show(r.sc));
		assert.equal(r.sc.exit_code, 153);
		assert.equal(r.sc.state, 'rolled_back');
		assert.equal(r.sc.error?.denied_by, 'limits', show(r.sc.error));
		assert.match(r.sc.error.message, /past limits\.max_workspace_mb \(50 MB\)/);
		assert.match(r.text, /^limits · exit 153/);
		// Stopped within a bounded overshoot (checked about four times a second).
		const ws = path.join(root, 'workspace');
		const files = fs.readdirSync(ws).filter((n) => n.startsWith('fill'));
		assert.ok(files.length >= 5, `files written before the stop stay on disk: ${files.length}`);
		assert.ok(files.length < 100, 'the call did not run to its end');
		const used = diskUse(ws);
		assert.ok(used < 600 * MiB, `the workspace takes ${used} bytes: the stop came late`);
		// The session is back at its state before the call.
		const after = await execPy(h, '(kept, "lost" in globals())');
		assert.equal(after.sc.result, '(7, False)', show(after.sc));
		for (const f of files) fs.unlinkSync(path.join(ws, f));
	});

	test('what the workspace held before the call is its baseline: a call that does not grow it runs, even over the limit', { timeout: 120000 }, async () => {
		const big = path.join(root, 'workspace', 'dataset.bin');
		fs.writeFileSync(big, Buffer.alloc(60 * MiB, 1));
		const r = await execPy(h, 'import time\ntime.sleep(1.5)\nlen(open("workspace/dataset.bin", "rb").read(10))');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, '10');
		// Growing it further while over the limit is stopped.
		const g = await execPy(h, 'import time\nfor i in range(40):\n    open(f"workspace/more{i}.bin", "wb").write(b"y" * (1 << 20))\n    time.sleep(0.05)', { timeout_s: 60 });
		assert.equal(g.sc.status, 'limits', show(g.sc));
		assert.ok(fs.existsSync(big), 'the server deletes nothing');
		fs.unlinkSync(big);
		for (const n of fs.readdirSync(path.join(root, 'workspace')).filter((x) => x.startsWith('more'))) fs.unlinkSync(path.join(root, 'workspace', n));
	});
});

describe('the per-call workspace diff', () => {
	test('100000 entries in the workspace: the snapshots before and after a call run off the loop (pings stay fast) and the reply says when its list may be incomplete', { timeout: 300000 }, async (t) => {
		const root = newProject('manyfiles');
		const many = path.join(root, 'workspace', 'many');
		for (let d = 0; d < 100; d++) {
			fs.mkdirSync(path.join(many, `d${d}`), { recursive: true });
			for (let i = 0; i < 1000; i++) fs.closeSync(fs.openSync(path.join(many, `d${d}`, `f${i}`), 'w'));
		}
		const h = await startClient(root, { structured: true });
		try {
			await execPy(h, 'x = 1', {}, { timeout: 120000 });
			const p = pinger(h);
			const t0 = performance.now();
			const r = await execPy(h, 'open("workspace/outputs/new.txt", "w").write("x")', {}, { timeout: 120000 });
			const ms = performance.now() - t0;
			const lat = await p.stop();
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const worst = Math.max(...lat);
			t.diagnostic(`call ${ms.toFixed(0)} ms; worst ping ${worst.toFixed(1)} ms of ${lat.length}`);
			assert.ok(worst < 1000, `a ping waited ${worst.toFixed(0)} ms during the call's snapshots (all: ${lat.map((x) => x.toFixed(0)).join(', ')})`);
			// The walk stops at its entry budget: either the new file is
			// found, or the reply says the list may be incomplete.
			const found = r.sc.artifacts.some((a) => a.path === 'workspace/outputs/new.txt');
			assert.ok(found || r.sc.artifacts_truncated === true, show(r.sc));
			if (r.sc.artifacts_truncated) assert.match(r.sections.artifacts ?? '', /may be incomplete/);
		} finally {
			await h.close();
			fs.rmSync(many, { recursive: true, force: true });
		}
	});
	// A small workspace's snapshots are taken on the loop, under a budget
	// of 256 entries and 1 ms (mcp/exec.c).  Attack: code in such a
	// workspace makes 100000 entries in one call, so that the snapshot
	// after it, and the one before the next call, would walk them all on
	// the loop, holding up every ping and every other session meanwhile.
	test('a small workspace that a call fills with 100000 entries: the snapshots after it and before the next go back off the loop (pings stay fast), and the new file is listed or the list says it may be incomplete', { timeout: 300000 }, async (t) => {
		const root = newProject('fillsup');
		const h = await startClient(root, { structured: true });
		try {
			// Small: the second call on is snapshotted on the loop.
			for (let i = 0; i < 3; i++) assert.equal((await execPy(h, `x = ${i}`, {}, { timeout: 120000 })).sc.status, 'ok');
			const p = pinger(h);
			const fill = 'import os\nfor d in range(100):\n    os.makedirs(f"workspace/many/d{d}")\n'
				+ '    for i in range(1000):\n        open(f"workspace/many/d{d}/f{i}", "w").close()\n'
				+ 'open("workspace/outputs/new.txt", "w").write("x")';
			const r = await execPy(h, fill, { timeout_s: 240 }, { timeout: 280000 });
			const next = await execPy(h, 'x + 1', {}, { timeout: 120000 });
			const lat = await p.stop();
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.equal(next.sc.result, '3', show(next.sc));
			const worst = Math.max(...lat);
			t.diagnostic(`worst ping ${worst.toFixed(1)} ms of ${lat.length}`);
			// Measured on the 2-core VM: 6 ms at worst; 336 ms with a
			// build whose loop walked them all, without the budget.
			assert.ok(worst < 250, `a ping waited ${worst.toFixed(0)} ms during the snapshots (all: ${lat.map((x) => x.toFixed(0)).join(', ')})`);
			const found = r.sc.artifacts.some((a) => a.path === 'workspace/outputs/new.txt');
			assert.ok(found || r.sc.artifacts_truncated === true, show(r.sc));
		} finally {
			await h.close();
			fs.rmSync(path.join(root, 'workspace', 'many'), { recursive: true, force: true });
		}
	});
});

describe('downscaling images for the reply', () => {
	// The session downscales large images after the call's result, in an
	// interpreter the code may have changed: that wait has its own timer.
	test('code that replaced PIL.Image.open with a sleep cannot hold the reply forever; the session serves the next call', { timeout: 240000 }, async (t) => {
		const h = await startClient(newProject('thumbhang'), { structured: true });
		try {
			const code = 'import numpy as np, time\nfrom PIL import Image\nImage.fromarray((np.random.rand(800, 800, 3) * 255).astype("uint8")).save("workspace/outputs/noise.png")\nImage.open = lambda *a, **k: time.sleep(3600)\nmarker = 41';
			const t0 = performance.now();
			const r = await execPy(h, code, { timeout_s: 2 }, { timeout: 200000 });
			const ms = performance.now() - t0;
			t.diagnostic(`answered in ${ms.toFixed(0)} ms, status ${r.sc.status}`);
			assert.ok(['ok', 'timeout'].includes(r.sc.status), show(r.sc));
			assert.equal(r.images.length, 0, 'the image could not be downscaled: not returned');
			const next = await execPy(h, '6 * 7', {}, { timeout: 60000 });
			assert.equal(next.sc.result, '42', show(next.sc));
		} finally {
			await h.close();
		}
	});
});
