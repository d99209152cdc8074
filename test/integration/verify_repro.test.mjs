// verify_outputs proves where a file came from (provenance), writes the
// session as a notebook, and runs the session's cells again (reproduce).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, callTool, jsonResult, show } from './lib.mjs';
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

describe('verify_outputs: reproduce', () => {
	let h, root;
	before(async () => {
		root = analysisProject('verify-repro');
		h = await startClient(root, { structured: true });
		await runAnalysis(h);
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
