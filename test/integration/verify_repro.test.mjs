// verify_outputs proves where a file came from (provenance), writes the
// session as a notebook, and runs the session's cells again (reproduce).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, callTool, jsonResult, show, BIN, newProject, execPy, writeFile, SKILL } from './lib.mjs';
import { ANALYSIS, runAnalysis, analysisProject } from './analysis_lib.mjs';

const sha = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const OUTS = ['workspace/outputs/chart.png', 'workspace/outputs/summary.csv'];

describe('verify_outputs: provenance, notebook', () => {
	let h, root, replies;
	before(async () => {
		root = analysisProject('verify-prov');
		h = await startClient(root, { structured: true });
		replies = await runAnalysis(h);
	});
	after(async () => { await h?.close(); });

	async function verify(args) {
		const res = await callTool(h, 'verify_outputs', args, { timeout: 300000 });
		const { sc } = jsonResult(res);
		assert.ok(sc, show(res));
		return sc;
	}

	test('each output names the cell that wrote its bytes; null for a file changed from outside; the summary carries it', async () => {
		fs.writeFileSync(path.join(root, 'workspace/outputs/by_hand.txt'), 'written by a person\n');
		const sc = await verify({ files: [...OUTS, 'workspace/outputs/by_hand.txt'], require_success: false });
		const code5 = replies[4];
		for (const p of OUTS) {
			const c = sc.checks.find((x) => x.path === p);
			assert.deepEqual(c.provenance, { session: 'default', cell: 5, code_sha256: sha256(ANALYSIS[4][0]), state: 'kept' }, show(c));
			assert.equal(c.sha256, sha(path.join(root, p)));
		}
		assert.equal(code5.sc.execution_count, 5);
		assert.equal(sc.checks[2].provenance, null, 'not written by the session');
		const summary = JSON.parse(fs.readFileSync(path.join(root, 'workspace/outputs/output_summary.json'), 'utf8'));
		assert.deepEqual(summary.checks.map((c) => c.provenance), sc.checks.map((c) => c.provenance));

		// Changed by hand after the cell wrote it: no longer the cell's bytes.
		fs.appendFileSync(path.join(root, 'workspace/outputs/summary.csv'), '9,9,18\n');
		const sc2 = await verify({ files: OUTS, require_success: false });
		assert.equal(sc2.checks[1].provenance, null, show(sc2.checks[1]));
		assert.equal(sc2.checks[0].provenance.cell, 5);
	});

	test('notebook: the export is written under the workspace and named in the summary', async () => {
		const sc = await verify({ files: [OUTS[0]], require_success: false, notebook: 'workspace/outputs/analysis.ipynb' });
		assert.equal(sc.notebook, 'workspace/outputs/analysis.ipynb', show(sc));
		const nb = JSON.parse(fs.readFileSync(path.join(root, 'workspace/outputs/analysis.ipynb'), 'utf8'));
		assert.equal(nb.nbformat, 4);
		assert.deepEqual(nb.cells.filter((c) => c.cell_type === 'code' && c.id !== 'setup').map((c) => c.execution_count), [1, 2, 3, 5, 6]);
		const summary = JSON.parse(fs.readFileSync(path.join(root, 'workspace/outputs/output_summary.json'), 'utf8'));
		assert.equal(summary.notebook, 'workspace/outputs/analysis.ipynb');
		const bad = await verify({ files: [OUTS[0]], require_success: false, notebook: 'workspace/outputs/analysis.txt' });
		assert.equal(bad.status, 'failed');
		assert.match(bad.notebook_error, /\.ipynb or \.py/);
		const none = await verify({ files: [OUTS[0]], require_success: false, session: 'nosuch', notebook: 'workspace/outputs/n.ipynb' });
		assert.equal(none.status, 'failed');
		assert.match(none.notebook_error, /session "nosuch" has no history.*default/);
	});
});

/** sha256 of every file of the project but the server's own and the summary. */
function tree(root) {
	const out = {};
	const walk = (rel) => {
		for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
			const r = rel ? `${rel}/${e.name}` : e.name;
			if (/^workspace\/\.(sessions|logs|cache)$/.test(r) || r === 'workspace/outputs/output_summary.json') continue;
			if (e.isDirectory()) walk(r);
			else out[r] = sha(path.join(root, r));
		}
	};
	walk('');
	return out;
}

// Both jail modes: namespaces, and Landlock + seccomp where a container's
// default rules refuse namespaces (build/helpers/dockerrun applies them; the
// child server of the run again inherits them).
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
for (const mode of ['namespaces', 'no namespaces']) describe(`verify_outputs: reproduce (${mode})`, () => {
	let h, root;
	before(async () => {
		root = analysisProject('verify-repro');
		const launch = mode === 'namespaces' ? {} : { command: DOCKERRUN, commandArgs: [BIN] };
		h = await startClient(root, { structured: true, ...launch });
		await runAnalysis(h);
		assert.equal(/jail mode: Landlock \+ seccomp/.test(h.stderr()), mode !== 'namespaces', h.stderr());
	});
	after(async () => { await h?.close(); });

	async function verify(args) {
		const res = await callTool(h, 'verify_outputs', args, { timeout: 700000 });
		const { sc } = jsonResult(res);
		assert.ok(sc, show(res));
		return sc;
	}

	test('the untouched project: true for each output, the originals untouched', async () => {
		const before = tree(root);
		const sc = await verify({ files: OUTS, reproduce: true });
		assert.equal(sc.reproduce.ran, true, show(sc));
		assert.equal(sc.reproduce.cells, 5, 'the five kept cells ran again (not the rolled-back one)');
		assert.equal(sc.reproduce.first_difference, null, show(sc.reproduce));
		assert.equal(typeof sc.reproduce.ms, 'number');
		assert.deepEqual(sc.checks.map((c) => c.reproduced), [true, true], show(sc.checks));
		assert.equal(sc.status, 'completed', show(sc));
		assert.deepEqual(tree(root), before, 'the run again wrote nothing of the project');
		const summary = JSON.parse(fs.readFileSync(path.join(root, 'workspace/outputs/output_summary.json'), 'utf8'));
		assert.deepEqual(summary.checks.map((c) => c.reproduced), [true, true]);
	});

	test('an input file changed since: false, naming the first cell that differed; the originals untouched', async () => {
		fs.writeFileSync(path.join(root, 'workspace/data/input.csv'), 'a,b\n1,10\n2,20\n3,36\n4,41\n');
		const before = tree(root);
		const sc = await verify({ files: OUTS, reproduce: true });
		assert.equal(sc.status, 'failed', show(sc));
		assert.equal(sc.reproduce.first_cell, 1, show(sc.reproduce));
		assert.match(sc.reproduce.first_difference, /^cell 1 /);
		for (const c of sc.checks) {
			assert.equal(c.reproduced, false, show(c));
			assert.equal(c.ok, false);
			assert.match(c.detail, /not reproduced: run again, cell 1 /, show(c));
		}
		assert.deepEqual(tree(root), before, 'the run again wrote nothing of the project');
	});
});

// A project whose approved policy has the network: the session used it;
// the run again has none (no approval applies in the copy), names the cell
// that needed it, and leaves that file unchecked (null), never a second
// connection.
describe('verify_outputs: reproduce never reaches the network', () => {
	test('the cell that needed it is named; its file is not checked; the listener heard one connection', { timeout: 170000 }, async () => {
		const { LOOSE, SKILL_REL, listener, tmpDir } = await import('./trust_lib.mjs');
		const { spawnSync } = await import('node:child_process');
		const root = newProject('rerun-net');
		const cfg = tmpDir('repro-net-cfg'), home = tmpDir('repro-net-home');
		const lis = await listener();
		const env = { XDG_CONFIG_HOME: cfg, HOME: home };
		let hh;
		try {
			writeFile(root, SKILL_REL, LOOSE);
			const t = spawnSync(BIN, ['--trust', '--yes', '--root', root], { encoding: 'utf8', input: '', env: { PATH: process.env.PATH, ...env } });
			assert.equal(t.status, 0, t.stdout + t.stderr);
			hh = await startClient(root, { structured: true, env });
			const code = `import socket\ns = socket.create_connection(("127.0.0.1", ${lis.port}), timeout=5)\ns.sendall(b"ONCE")\ns.close()\n`
				+ 'open("workspace/outputs/net.txt", "w").write("fetched\\n")';
			const r = await execPy(hh, code);
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const res = await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/net.txt'], reproduce: true }, { timeout: 300000 });
			const sc = res.structuredContent;
			assert.equal(sc.reproduce.ran, true, show(sc));
			assert.equal(sc.reproduce.first_cell, 1);
			assert.match(sc.reproduce.first_difference, /cell 1 it needed the network/);
			assert.equal(sc.checks[0].reproduced, null, show(sc.checks[0]));
			assert.match(sc.checks[0].detail, /could not be checked: run again, cell 1 it needed the network/);
			assert.deepEqual(sc.checks[0].provenance?.cell, 1);
			await new Promise((res2) => setTimeout(res2, 300));
			assert.deepEqual(lis.heard.map((x) => x.data), ['ONCE'], 'the run again made no connection');
		} finally {
			await hh?.close();
			await lis.close();
			for (const d of [cfg, home]) fs.rmSync(d, { recursive: true, force: true });
		}
	});
});

// The server's exit does not wait for a run again (it holds a worker
// thread, joined at exit): the child is ended and the copy removed.
describe('verify_outputs: reproduce and the server\'s exit', () => {
	test('end of input during a run again: the server exits at once, no copy left behind', { timeout: 120000 }, async () => {
		const procTable = () => fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map((n) => {
			try { return { pid: Number(n), cmd: fs.readFileSync(`/proc/${n}/cmdline`, 'utf8').replace(/\0/g, ' ') }; } catch { return null; }
		}).filter(Boolean);
		const root = newProject('rerun-exit');
		const hh = await startClient(root, { structured: true });
		// Fast in the session, a minute long in the run again (its working
		// directory is the copy's).
		const r = await execPy(hh, 'import os, time\nif "psm-repro-" in os.getcwd():\n    time.sleep(60)\nos.getcwd()', { timeout_s: 90 });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const pending = callTool(hh, 'verify_outputs', { files: ['workspace/outputs/none.txt'], reproduce: true, require_success: false }, { timeout: 120000 }).catch((e) => e);
		let copies = [];
		for (let i = 0; i < 100 && copies.length === 0; i++) {
			await new Promise((res) => setTimeout(res, 100));
			copies = procTable().filter((p) => p.cmd.includes('--root /tmp/psm-repro-'));
		}
		assert.ok(copies.length > 0, 'the run again started');
		const t0 = Date.now();
		await hh.close();
		await pending;
		const waited = Date.now() - t0;
		assert.ok(waited < 30000, `the server took ${waited} ms to exit`);
		for (let i = 0; i < 50 && procTable().some((p) => copies.some((c) => c.pid === p.pid)); i++) await new Promise((res) => setTimeout(res, 100));
		assert.deepEqual(procTable().filter((p) => copies.some((c) => c.pid === p.pid)).map((p) => p.cmd), [], 'the child server is gone');
		const dir = copies[0].cmd.match(/(\/\S*psm-repro-[A-Za-z0-9]+)/)[1];
		assert.equal(fs.existsSync(dir), false, `${dir} was removed`);
	});
});

// An output written by a call that was then rolled back looked, to the gate,
// like one the session's state stands behind.
describe('verify_outputs: an output of a rolled-back call', () => {
	test('provenance names the rolled-back call; the run again does not make it: reproduced false', { timeout: 120000 }, async () => {
		const root = newProject('rolled-out');
		const hh = await startClient(root, { structured: true });
		try {
			await execPy(hh, 'open("workspace/outputs/kept.txt", "w").write("kept\\n")');
			const r = await execPy(hh, 'open("workspace/outputs/ghost.txt", "w").write("ghost\\n")\nimport time\nwhile True:\n    time.sleep(0.05)', { timeout_s: 1 });
			assert.equal(r.sc.state, 'rolled_back', show(r.sc));
			await execPy(hh, 'print("done")');
			const res = await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/kept.txt', 'workspace/outputs/ghost.txt'], reproduce: true }, { timeout: 300000 });
			const sc = res.structuredContent;
			const [kept, ghost] = sc.checks;
			assert.equal(kept.provenance.state, 'new');
			assert.equal(kept.reproduced, true, show(kept));
			assert.deepEqual([ghost.provenance.cell, ghost.provenance.state], [2, 'rolled_back'], show(ghost));
			assert.equal(ghost.reproduced, false, show(ghost));
			assert.match(ghost.detail, /not reproduced: run again, the cells gave the same outputs but this file was not written/);
			assert.equal(sc.status, 'failed');
			assert.equal(fs.readFileSync(path.join(root, 'workspace/outputs/ghost.txt'), 'utf8'), 'ghost\n', 'the original stays');
		} finally {
			await hh.close();
		}
	});
});

// A long output is cut in the reply around a marker that names its log by
// session and cell number; the run again numbers its cells from 1 (the
// rolled-back call is not run again), so only the text around it counts.
describe('verify_outputs: reproduce and a long output', () => {
	test('a cut output after a rollback comes again: true', { timeout: 120000 }, async () => {
		const root = newProject('long-out');
		const hh = await startClient(root, { structured: true });
		try {
			const t = await execPy(hh, 'import time\nwhile True:\n    time.sleep(0.05)', { timeout_s: 1 });
			// The session's first call: its state says new, and it was undone.
			assert.deepEqual([t.sc.status, t.sc.state], ['timeout', 'new']);
			await execPy(hh, 'x = 0');
			const t2 = await execPy(hh, 'import time\nwhile True:\n    time.sleep(0.05)', { timeout_s: 1 });
			assert.equal(t2.sc.state, 'rolled_back');
			const r = await execPy(hh, 'for i in range(20000):\n    print("line", i)\nopen("workspace/outputs/long.txt", "w").write("n=20000\\n")');
			assert.equal(r.sc.output_truncated, true, show(r.sc));
			const sc = (await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/long.txt'], reproduce: true }, { timeout: 300000 })).structuredContent;
			assert.equal(sc.reproduce.first_difference, null, show(sc.reproduce));
			assert.equal(sc.checks[0].reproduced, true, show(sc.checks[0]));
			assert.equal(sc.reproduce.cells, 2, 'the timed-out calls are not run again');
		} finally {
			await hh.close();
		}
	});
});

// What lies in a project is read by the server for the copy: a FIFO (the
// sandbox cannot make one, another process can; a blocking open would hang
// the worker, and the server's exit, for ever) is not opened, and a hard
// link (the one way a name the code writes can reach an inode outside) is
// not copied for the run again to read.
describe('verify_outputs: reproduce, a FIFO and a hard link in the project', () => {
	test('neither is copied; the gate answers and names the cell that read the link', { timeout: 120000 }, async () => {
		const { spawnSync } = await import('node:child_process');
		const root = newProject('fifo-link');
		writeFile(root, 'workspace/data/x.csv', 'a\n1\n');
		fs.linkSync(path.join(root, 'workspace/data/x.csv'), path.join(root, 'workspace/data/linked.csv'));
		assert.equal(spawnSync('mkfifo', [path.join(root, 'workspace/data/pipe')]).status, 0);
		const hh = await startClient(root, { structured: true });
		try {
			const r = await execPy(hh, 'import os\nprint(sorted(n for n in os.listdir("workspace/data") if n.endswith(".csv")))\nopen("workspace/outputs/n.txt", "w").write("1")');
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.equal(r.sc.stdout, "['linked.csv', 'x.csv']\n");
			const sc = (await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/n.txt'], reproduce: true }, { timeout: 100000 })).structuredContent;
			assert.equal(sc.reproduce.ran, true, show(sc));
			assert.equal(sc.reproduce.first_cell, 1, show(sc.reproduce));
			assert.match(sc.reproduce.first_difference, /cell 1 it printed something else/);
			assert.equal(sc.checks[0].reproduced, true, 'the file itself came again');
		} finally {
			await hh.close();
		}
	});
});

// Without `session`, verify_outputs looks at the session that ran ("default"
// when it ran code, else the one whose call ended last) and names it in
// the result: its provenance, notebook and reproduce are that session's
// too, or an agent that worked in a named session only (as the skill's
// example call, which gives no session, has it do) would be told that no
// recorded cell wrote its files and that its notebook cannot be written.
describe('verify_outputs without session, after work in a named session', () => {
	test('provenance, notebook and reproduce follow the session the result names', { timeout: 120000 }, async () => {
		const root = newProject('named-only');
		const hh = await startClient(root, { structured: true });
		try {
			const code = 'open("workspace/outputs/p.txt", "w").write("p\\n")';
			const r = await execPy(hh, code, { session: 'latency' });
			assert.equal(r.sc.status, 'ok', show(r.sc));
			// Written by another session first (its call ended before
			// latency's, so the result still names latency).
			const other = 'open("workspace/outputs/q.txt", "w").write("q\\n")';
			assert.equal((await execPy(hh, other, { session: 'other' })).sc.status, 'ok');
			await execPy(hh, '1', { session: 'latency' });
			const sc = (await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/p.txt', 'workspace/outputs/q.txt'],
				notebook: 'workspace/outputs/a.ipynb', reproduce: true }, { timeout: 100000 })).structuredContent;
			assert.equal(sc.session, 'latency', show(sc));
			assert.deepEqual(sc.checks[0].provenance, { session: 'latency', cell: 1, code_sha256: sha256(code), state: 'new' }, show(sc.checks[0]));
			assert.equal(sc.notebook, 'workspace/outputs/a.ipynb', show(sc));
			const nb = JSON.parse(fs.readFileSync(path.join(root, 'workspace/outputs/a.ipynb'), 'utf8'));
			assert.equal(nb.metadata.psm.session, 'latency');
			// The file another session wrote names that session's call; the
			// run again of latency's cells does not judge it.
			assert.deepEqual(sc.checks[1].provenance, { session: 'other', cell: 1, code_sha256: sha256(other), state: 'new' }, show(sc.checks[1]));
			assert.equal(sc.checks[1].reproduced, null, show(sc.checks[1]));
			assert.match(sc.checks[1].detail, /written by session "other"/, show(sc.checks[1]));
			assert.equal(sc.reproduce.cells, 2, show(sc.reproduce));
			assert.equal(sc.checks[0].reproduced, true, show(sc.checks[0]));
			assert.equal(sc.status, 'completed', show(sc));
		} finally {
			await hh.close();
		}
	});
});

// A cell that wrote the project by its absolute path: run again, that path
// is the original's, outside the copy, and the write is refused (the
// original is never touched); the cell is named as the reason its file
// could not be checked, which is not a difference (null, not false).
for (const mode of ['namespaces', 'no namespaces']) describe(`verify_outputs: reproduce and a write outside the copy (${mode})`, () => {
	test('refused in the run again: the cell named, the file null, the original untouched', { timeout: 120000 }, async () => {
		const root = newProject('abs-write');
		const launch = mode === 'namespaces' ? {} : { command: DOCKERRUN, commandArgs: [BIN] };
		const hh = await startClient(root, { structured: true, ...launch });
		try {
			const file = path.join(root, 'workspace/outputs/abs.txt');
			const r = await execPy(hh, `open(${JSON.stringify(file)}, "w").write("a\\n")`);
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const sc = (await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/abs.txt'], reproduce: true }, { timeout: 100000 })).structuredContent;
			assert.equal(sc.reproduce.first_cell, 1, show(sc.reproduce));
			assert.match(sc.reproduce.first_difference, /cell 1 it needed a write the run again does not allow/);
			assert.equal(sc.checks[0].reproduced, null, show(sc.checks[0]));
			assert.match(sc.checks[0].detail, /could not be checked: run again, cell 1 it needed a write/, show(sc.checks[0]));
			assert.equal(fs.readFileSync(file, 'utf8'), 'a\n', 'the original stays');
		} finally {
			await hh.close();
		}
	});
});

// The run again has the policy the session had: one given with --skill
// (here inside the project, where no default path finds it) sets the seed,
// and a seeded draw must come again.
describe('verify_outputs: reproduce with the policy given by --skill', () => {
	test('the same seed: a seeded draw comes again', { timeout: 120000 }, async () => {
		const root = newProject('skill-seed');
		assert.match(SKILL, /\n {2}seed: 0\n/);
		const skill = writeFile(root, 'policy/SKILL.md', SKILL.replace(/\n {2}seed: 0\n/, '\n  seed: 7\n'));
		const hh = await startClient(root, { structured: true, args: ['--skill', skill, '--timeout', '20'] });
		try {
			const r = await execPy(hh, 'v = repr(float(np.random.rand()))\nopen("workspace/outputs/v.txt", "w").write(v)\nv');
			assert.equal(r.sc.status, 'ok', show(r.sc));
			const sc = (await callTool(hh, 'verify_outputs', { files: ['workspace/outputs/v.txt'], reproduce: true }, { timeout: 100000 })).structuredContent;
			assert.equal(sc.reproduce.first_difference, null, show(sc.reproduce));
			assert.equal(sc.checks[0].reproduced, true, show(sc.checks[0]));
		} finally {
			await hh.close();
		}
	});
});
