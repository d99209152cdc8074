// The session's history and its export as a notebook: a realistic analysis
// with an exception, a timeout (rolled back) and a seeded random draw,
// exported by the real binary, validated against nbformat's schema and run
// in a plain Jupyter kernel (nbclient) on a copy of the project.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startClient, show, BIN, REPO } from './lib.mjs';
import { ANALYSIS, runAnalysis, analysisProject } from './analysis_lib.mjs';

const PY = '/usr/bin/python3'; // Debian's, with python3-nbformat and -nbclient
const sha = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');

function exportNb(root, args = []) {
	return spawnSync(BIN, ['export', '--root', root, ...args], { encoding: 'utf8', env: process.env });
}

describe('export', () => {
	let root, replies, h;
	before(async () => {
		root = analysisProject('export');
		h = await startClient(root, { structured: true });
		replies = await runAnalysis(h);
		await h.close();
		h = null;
	});
	after(async () => { await h?.close(); });

	test('the analysis ran as planned', () => {
		assert.deepEqual(replies.map((r) => r.sc.status), ['ok', 'ok', 'error', 'timeout', 'ok', 'ok'], show(replies.map((r) => r.sc)));
		assert.equal(replies[3].sc.state, 'rolled_back');
		assert.equal(replies[5].sc.stdout, 'False\n', 'the rolled-back cell left nothing');
	});

	test('notebook: valid nbformat 4, header, setup, the kept cells in order, the rollback as one line', () => {
		const r = exportNb(root);
		assert.equal(r.status, 0, r.stderr);
		const nb = JSON.parse(r.stdout);
		assert.equal(nb.nbformat, 4);
		const [head, setup, ...rest] = nb.cells;
		assert.equal(head.cell_type, 'markdown');
		for (const word of ['session: `default`', root, '<built-in SKILL.md>', 'seed: 0', 'Python 3.', 'numpy ', 'pandas ', 'matplotlib '])
			assert.ok(head.source.includes(word), `header lacks ${word}: ${head.source}`);
		assert.match(head.source, /sha256 `[0-9a-f]{64}`/);
		assert.equal(setup.cell_type, 'code');
		assert.match(setup.source, /random\.seed\(0\)/);
		assert.match(setup.source, /numpy\.random\.seed\(0\)/);
		assert.match(setup.source, /matplotlib\.use\("Agg"\)/);
		assert.ok(setup.source.includes(JSON.stringify(root)), setup.source);
		assert.deepEqual(rest.map((c) => c.cell_type), ['code', 'code', 'code', 'markdown', 'code', 'code']);
		const code = rest.filter((c) => c.cell_type === 'code');
		assert.deepEqual(code.map((c) => c.execution_count), [1, 2, 3, 5, 6]);
		assert.deepEqual(code.map((c) => c.source), [0, 1, 2, 4, 5].map((i) => ANALYSIS[i][0]));
		const rolled = rest[3];
		assert.match(rolled.source, /Cell 4 ended as `timeout` \(Timeout\) and was rolled back/);
		assert.ok(!rolled.source.includes('while True'), 'the rolled-back code is not in the notebook');
		// outputs: stream, execute_result, error with the user's traceback
		assert.deepEqual(code[0].outputs.map((o) => o.output_type), ['stream', 'execute_result']);
		assert.equal(code[0].outputs[0].text, '(4, 2)\n');
		assert.equal(code[0].outputs[1].data['text/plain'], replies[0].sc.result);
		assert.equal(code[0].outputs[1].execution_count, 1);
		const err = code[2].outputs.find((o) => o.output_type === 'error');
		assert.equal(err.ename, 'KeyError');
		assert.ok(err.traceback.some((l) => l.includes('df["missing"].sum()')), show(err));
		assert.deepEqual(code[2].metadata.tags, ['raises-exception']);
		assert.equal(code[0].metadata.tags, undefined);
		// files written, with the hashes of the bytes on disk
		const files = Object.fromEntries(code[3].metadata.files.map((f) => [f.path, f.sha256]));
		assert.equal(files['workspace/outputs/chart.png'], sha(path.join(root, 'workspace/outputs/chart.png')));
		assert.equal(files['workspace/outputs/summary.csv'], sha(path.join(root, 'workspace/outputs/summary.csv')));
		assert.deepEqual(code[0].metadata.files, []);
		// the chart the reply returned is in the notebook
		assert.ok(code[3].outputs.some((o) => o.output_type === 'display_data' && o.data['image/png']), show(code[3].outputs.map((o) => o.output_type)));
		const v = spawnSync(PY, ['-c', 'import nbformat,sys; nbformat.validate(nbformat.reads(sys.stdin.read(), as_version=4)); print("ok")'],
			{ input: r.stdout, encoding: 'utf8' });
		assert.equal(v.stdout.trim(), 'ok', v.stderr);
	});

	test('run in a plain kernel on a copy of the project: the same outputs and the same bytes', () => {
		const copy = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'psm-export-copy-')));
		try {
			fs.cpSync(path.join(root, 'workspace/data'), path.join(copy, 'workspace/data'), { recursive: true });
			fs.mkdirSync(path.join(copy, 'workspace/outputs'), { recursive: true });
			const nbPath = path.join(copy, 'session.ipynb');
			const e = exportNb(root, ['-o', nbPath]);
			assert.equal(e.status, 0, e.stderr);
			const run = spawnSync(PY, [path.join(REPO, 'test/integration/nbrun.py'), nbPath, copy], { encoding: 'utf8', timeout: 180000 });
			assert.equal(run.status, 0, run.stderr);
			const got = JSON.parse(run.stdout).cells.filter((c) => c.cell !== undefined && c.cell !== null);
			const kept = replies.filter((r) => r.sc.state !== 'rolled_back');
			assert.equal(got.length, kept.length);
			for (const [i, r] of kept.entries()) {
				assert.equal(got[i].cell, r.sc.execution_count);
				assert.equal(got[i].stdout, r.sc.stdout, `cell ${r.sc.execution_count} printed the same`);
				assert.equal(got[i].result, r.sc.result ?? null, `cell ${r.sc.execution_count}'s value`);
				assert.equal(got[i].ename, r.sc.status === 'error' ? r.sc.error.type : null);
			}
			for (const f of ['workspace/outputs/chart.png', 'workspace/outputs/summary.csv'])
				assert.equal(sha(path.join(copy, f)), sha(path.join(root, f)), `${f}: the same bytes`);
		} finally {
			fs.rmSync(copy, { recursive: true, force: true });
		}
	});

	test('--format py: # %% cells, the tag on the cell that raised', () => {
		const r = exportNb(root, ['--format', 'py']);
		assert.equal(r.status, 0, r.stderr);
		assert.match(r.stdout, /^# %% \[markdown\]\n# # Session `default`/);
		assert.ok(r.stdout.includes('# %% tags=["raises-exception"]\ntotal = df["missing"].sum()\n'), r.stdout);
		assert.ok(!r.stdout.includes('while True'));
		assert.equal((r.stdout.match(/^# %%$/gm) || []).length, 1 + 4, 'the setup cell and the four kept cells that did not raise');
	});

	test('a session name that is not one: exit 2 saying what a name is, nothing read', () => {
		for (const bad of ['../default', 'a/b', '', 'x'.repeat(65)]) {
			const r = exportNb(root, ['--session', bad]);
			assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
			assert.match(r.stderr, /--session must match \^\[A-Za-z0-9_-\]\{1,64\}\$/);
			assert.equal(r.stdout, '');
		}
	});

	test('an unknown session: exit 1 naming the sessions that exist', () => {
		const r = exportNb(root, ['--session', 'nope']);
		assert.equal(r.status, 1);
		assert.match(r.stderr, /session "nope" has no history/);
		assert.match(r.stderr, /sessions that have one: default/);
		assert.equal(r.stdout, '');
	});
});
