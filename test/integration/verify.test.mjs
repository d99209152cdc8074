// verify_outputs, the quality gate.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, callTool, jsonResult, writeFile, makePng, show } from './lib.mjs';

const SUMMARY = 'workspace/outputs/output_summary.json';

describe('verify_outputs', () => {
	let h, root;
	before(async () => {
		root = newProject('verify');
		writeFile(root, 'workspace/outputs/good.png', makePng(7, 5));
		writeFile(root, 'workspace/outputs/good.csv', 'a,b,c\n1,2,3\n4,5,6\n');
		writeFile(root, 'workspace/outputs/good.json', JSON.stringify({ p95: { '/api': 12.5 }, count: 3 }));
		writeFile(root, 'workspace/outputs/notes.txt', 'some text\n');
		writeFile(root, 'workspace/outputs/empty.txt', '');
		writeFile(root, 'workspace/outputs/broken.json', '{"p95": [1, 2,');
		writeFile(root, 'workspace/outputs/ragged.csv', 'a,b,c\n1,2,3\n4,5\n');
		writeFile(root, 'workspace/outputs/truncated.png', makePng(7, 5).subarray(0, 40));
		writeFile(root, 'workspace/outputs/fake.png', 'not a png at all');
		writeFile(root, 'workspace/outputs/pic.svg', '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="5" height="5"/></svg>\n');
		writeFile(root, 'outside.json', '{"a": 1}');
		fs.symlinkSync('/etc/passwd', path.join(root, 'workspace/outputs/link.txt'));
		h = await startClient(root, { structured: true });
	});
	after(async () => { await h?.close(); });

	async function verify(args) {
		const res = await callTool(h, 'verify_outputs', args);
		const { sc, fromText } = jsonResult(res);
		assert.ok(sc, `structuredContent is always returned by verify_outputs: ${show(res)}`);
		assert.deepEqual(fromText, sc, 'the text block carries the same JSON');
		return { res, sc };
	}

	function check(sc, p) {
		const c = sc.checks.find((x) => x.path === p);
		assert.ok(c, `no check for ${p}: ${show(sc.checks)}`);
		return c;
	}

	test('good png, csv, json, txt, svg: completed, one ok check each, kind from the extension', async () => {
		await execPy(h, 'ok_run = 1');
		const files = ['workspace/outputs/good.png', 'workspace/outputs/good.csv', 'workspace/outputs/good.json', 'workspace/outputs/notes.txt', 'workspace/outputs/pic.svg'];
		const { res, sc } = await verify({ files });
		assert.equal(res.isError ?? false, false);
		assert.equal(sc.status, 'completed', show(sc));
		assert.equal(sc.exit_code, 0);
		assert.equal(sc.failed, 0);
		assert.equal(sc.summary_path, SUMMARY);
		assert.deepEqual(sc.checks.map((c) => c.path), files, 'one check per file, in the given order');
		const kinds = { png: 'png', csv: 'csv', json: 'json', txt: 'text', svg: 'svg' };
		for (const c of sc.checks) {
			assert.equal(c.ok, true, show(c));
			assert.equal(c.kind, kinds[c.path.split('.').pop()], show(c));
			assert.equal(c.bytes, fs.statSync(path.join(root, c.path)).size, show(c));
			assert.equal(typeof c.detail, 'string');
		}
		assert.match(check(sc, 'workspace/outputs/good.png').detail, /7\s*[x×]\s*5/, 'the PNG check reports width x height');
	});

	test('output_summary.json holds the same JSON as the result', async () => {
		const { sc } = await verify({ files: ['workspace/outputs/good.csv'] });
		const onDisk = JSON.parse(fs.readFileSync(path.join(root, SUMMARY), 'utf8'));
		assert.deepEqual(onDisk, sc);
	});

	test('write_summary: false writes nothing and gives summary_path null', async () => {
		fs.rmSync(path.join(root, SUMMARY), { force: true });
		const { sc } = await verify({ files: ['workspace/outputs/good.csv'], write_summary: false });
		assert.equal(sc.summary_path, null);
		assert.equal(fs.existsSync(path.join(root, SUMMARY)), false);
	});

	test('a missing file, an empty file and a broken JSON fail; the result is not an error', async () => {
		const files = ['workspace/outputs/good.png', 'workspace/outputs/missing.png', 'workspace/outputs/empty.txt', 'workspace/outputs/broken.json'];
		const { res, sc } = await verify({ files });
		assert.equal(res.isError ?? false, false, 'a failed verification is a normal result');
		assert.equal(sc.status, 'failed', show(sc));
		assert.equal(sc.failed, 3);
		assert.equal(check(sc, 'workspace/outputs/good.png').ok, true);
		for (const p of files.slice(1)) {
			const c = check(sc, p);
			assert.equal(c.ok, false, show(c));
			assert.ok(c.detail.length > 5, `${p}: the detail says what is wrong: ${show(c)}`);
		}
		assert.match(check(sc, 'workspace/outputs/missing.png').detail, /not (found|exist)|missing|no such/i);
		const onDisk = JSON.parse(fs.readFileSync(path.join(root, SUMMARY), 'utf8'));
		assert.deepEqual(onDisk, sc, 'a failed verification is written to the summary too');
	});

	test('a ragged CSV, a truncated PNG and a fake PNG fail', async () => {
		const { sc } = await verify({ files: ['workspace/outputs/ragged.csv', 'workspace/outputs/truncated.png', 'workspace/outputs/fake.png'] });
		assert.equal(sc.failed, 3, show(sc));
		for (const c of sc.checks) assert.equal(c.ok, false, show(c));
	});

	test('required_keys (json) and min_rows (csv)', async () => {
		const { sc } = await verify({
			files: [
				{ path: 'workspace/outputs/good.json', required_keys: ['p95', 'count'] },
				{ path: 'workspace/outputs/good.json', required_keys: ['p95', 'missing_key'] },
				{ path: 'workspace/outputs/good.csv', min_rows: 2 },
				{ path: 'workspace/outputs/good.csv', min_rows: 3 },
			],
		});
		assert.equal(sc.checks.length, 4);
		assert.deepEqual(sc.checks.map((c) => c.ok), [true, false, true, false], show(sc.checks));
		assert.match(sc.checks[1].detail, /missing_key/, show(sc.checks[1]));
		assert.match(sc.checks[3].detail, /2|3/, show(sc.checks[3]));
		assert.equal(sc.failed, 2);
		assert.equal(sc.status, 'failed');
	});

	test('kind and min_bytes given explicitly', async () => {
		const { sc } = await verify({
			files: [
				{ path: 'workspace/outputs/notes.txt', kind: 'text', min_bytes: 5 },
				{ path: 'workspace/outputs/notes.txt', kind: 'any', min_bytes: 1000 },
				{ path: 'workspace/outputs/notes.txt', kind: 'json' },
				{ path: 'workspace/outputs/good.png', kind: 'jpeg' },
				{ path: 'workspace/outputs/good.json', kind: 'any' },
			],
		});
		assert.deepEqual(sc.checks.map((c) => c.ok), [true, false, false, false, true], show(sc.checks));
		assert.deepEqual(sc.checks.map((c) => c.kind), ['text', 'any', 'json', 'jpeg', 'any']);
	});

	test('paths outside the workspace and symlinks leading out are refused', async () => {
		for (const p of ['../outside.json', 'outside.json', '/etc/passwd', 'workspace/../outside.json', 'workspace/outputs/link.txt']) {
			const res = await callTool(h, 'verify_outputs', { files: [p] });
			const text = res.content.find((b) => b.type === 'text')?.text || '';
			assert.ok(!text.includes('root:x:0:0'), 'no content leaked');
			if (res.isError) {
				assert.match(text, /workspace/i, `${p}: the message must say where paths must lie: ${text}`);
			} else {
				const sc = res.structuredContent;
				assert.equal(sc.status, 'failed', `${p}: ${show(sc)}`);
				assert.equal(sc.checks[0].ok, false, `${p}: ${show(sc)}`);
			}
		}
	});

	test('invalid arguments are input errors', async () => {
		for (const args of [{}, { files: 'workspace/outputs/good.png' }, { files: [42] }, { files: [{ kind: 'png' }] },
			{ files: [{ path: 'workspace/outputs/good.png', kind: 'gif' }] }, { files: ['workspace/outputs/good.png'], session: 'bad name' }]) {
			const res = await callTool(h, 'verify_outputs', args);
			assert.equal(res.isError, true, `${show(args)}: ${show(res)}`);
		}
	});

	test('require_success: a session whose last execution failed gives status failed', async () => {
		const e = await execPy(h, '1 / 0', { session: 'failing' });
		assert.equal(e.sc.exit_code, 1);
		const { sc } = await verify({ files: ['workspace/outputs/good.png'], session: 'failing' });
		assert.equal(sc.status, 'failed', show(sc));
		assert.equal(sc.exit_code, 1);
		assert.equal(sc.checks.find((c) => c.path === 'workspace/outputs/good.png')?.ok, true, 'the file itself is fine');
		const { sc: lax } = await verify({ files: ['workspace/outputs/good.png'], session: 'failing', require_success: false });
		assert.equal(lax.status, 'completed', show(lax));
		assert.equal(lax.exit_code, 1);
		await execPy(h, '2', { session: 'failing' });
		const { sc: fixed } = await verify({ files: ['workspace/outputs/good.png'], session: 'failing' });
		assert.equal(fixed.status, 'completed', show(fixed));
		assert.equal(fixed.exit_code, 0);
	});

	test('a session that never ran gives exit_code null', async () => {
		const { sc } = await verify({ files: ['workspace/outputs/good.png'], session: 'never_ran', require_success: false });
		assert.equal(sc.exit_code, null, show(sc));
		assert.equal(sc.status, 'completed');
	});

	test('a file made by execute_python verifies end to end (matplotlib PNG, pandas CSV)', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'import pandas as pd, matplotlib.pyplot as plt\npd.DataFrame({"a": range(5), "b": range(5)}).to_csv("workspace/outputs/made.csv", index=False)\nplt.plot([1, 2])\nplt.savefig("workspace/outputs/made.png")\nplt.close("all")', { session: 'maker' });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const { sc } = await verify({ files: ['workspace/outputs/made.png', { path: 'workspace/outputs/made.csv', min_rows: 5 }], session: 'maker' });
		assert.equal(sc.status, 'completed', show(sc));
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});

// An agent that works in a named session only: the gate looks at the
// session that ran (not at a "default" it never used), names the sessions
// that ran when the one asked for did not, and after a restart says why it
// cannot vouch for a call made before it.
describe('verify_outputs after work in a named session', () => {
	const files = ['workspace/outputs/made.csv'];
	const make = 'open("workspace/outputs/made.csv", "w").write("a,b\\n1,2\\n")';
	async function verify(h, args) {
		const { sc } = jsonResult(await callTool(h, 'verify_outputs', args));
		assert.ok(sc);
		return sc;
	}

	test('without a session, the session that ran is checked and named; default, asked for, names the ones that ran', { timeout: 60000 }, async () => {
		const root = newProject('verify-named');
		const h = await startClient(root, { structured: true });
		try {
			const r = await execPy(h, make, { session: 'co2' });
			assert.equal(r.sc.status, 'ok', show(r.text));
			let sc = await verify(h, { files });
			assert.equal(sc.status, 'completed', show(sc));
			assert.equal(sc.session, 'co2');
			assert.equal(sc.exit_code, 0);
			sc = await verify(h, { files, session: 'default' });
			assert.equal(sc.status, 'failed', show(sc));
			assert.equal(sc.session, 'default');
			assert.match(sc.reason, /session "default" has not run any code since the server started; the sessions that did: co2 \(last exit 0\)/, show(sc));
			// A later call that failed, in another session: the gate looks
			// at the last execution, and says whose.
			await execPy(h, '1 / 0', { session: 'scratch' });
			sc = await verify(h, { files });
			assert.equal(sc.status, 'failed', show(sc));
			assert.equal(sc.session, 'scratch');
			assert.match(sc.reason, /the last execution of session "scratch" exited with 1/);
			// default, once it ran, is the one looked at.
			await execPy(h, '1');
			sc = await verify(h, { files });
			assert.equal(sc.status, 'completed', show(sc));
			assert.equal(sc.session, 'default');
		} finally {
			await h.close();
		}
	});

	test('right after a restart: the reason says why no exit code is known, and the files alone can pass', { timeout: 60000 }, async () => {
		const root = newProject('verify-restart');
		let h = await startClient(root, { structured: true });
		await execPy(h, make, { session: 'co2' });
		await h.close();
		h = await startClient(root, { structured: true });
		try {
			let sc = await verify(h, { files });
			assert.equal(sc.status, 'failed', show(sc));
			assert.equal(sc.exit_code, null);
			assert.match(sc.reason, /no session has run any code since the server started \(a restart does not keep the exit code/, show(sc));
			sc = await verify(h, { files, require_success: false });
			assert.equal(sc.status, 'completed', show(sc));
		} finally {
			await h.close();
		}
	});
});
