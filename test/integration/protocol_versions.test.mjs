// Replies follow the negotiated protocol version; list_artifacts and
// verify_outputs declare an outputSchema their replies meet; --images link.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';
import { SKILL, projectWith, errorLines } from './reply_lib.mjs';


const MAKE_FILES = [
	'import matplotlib.pyplot as plt, pandas as pd',
	'pd.DataFrame({"a": [1, 2, 3]}).to_csv("workspace/outputs/t.csv", index=False)',
	'plt.plot([1, 2, 3]); plt.savefig("workspace/outputs/p.png")',
].join('\n');

describe('an SDK client that asks for protocol 2024-11-05', () => {
	let h;
	before(async () => { h = await startClient(newProject('v2024'), { structured: true, protocolVersion: '2024-11-05' }); });
	after(async () => { await h?.close(); });

	test('tools/list: no outputSchema, title or annotations', () => {
		for (const t of h.tools) {
			assert.equal(t.outputSchema, undefined, `${t.name}: ${show(t)}`);
			assert.equal(t.title, undefined, t.name);
			assert.equal(t.annotations, undefined, t.name);
			assert.ok(t.inputSchema && t.description, t.name);
		}
	});

	test('execute_python: no structuredContent, no resource_link; links are lines of text, images stay', async () => {
		const r = await execPy(h, MAKE_FILES);
		assert.equal(r.head.status, 'ok', show(r.text));
		assert.equal(r.res.structuredContent, undefined, show(r.res));
		assert.deepEqual(r.blocks.map((b) => b.type), ['text', 'image'], show(r.blocks.map((b) => b.type)));
		assert.match(r.text, /\nlinks:\n- t\.csv: file:\/\/\S+\/workspace\/outputs\/t\.csv \(text\/csv, \d+ bytes\)\n/, show(r.text));
	});

	test('list_artifacts and verify_outputs: the JSON stays in the text, no structuredContent', async () => {
		const la = await callTool(h, 'list_artifacts', {});
		assert.equal(la.structuredContent, undefined);
		assert.ok(JSON.parse(jsonResult(la).text).artifacts.length >= 2);
		const vo = await callTool(h, 'verify_outputs', { files: ['workspace/outputs/t.csv'] });
		assert.equal(vo.structuredContent, undefined);
		assert.equal(JSON.parse(jsonResult(vo).text).status, 'completed');
	});
});

describe('what each protocol version gets, on raw stdio', () => {
	for (const [v, annotations, structured] of [['2024-11-05', false, false], ['2025-03-26', true, false], ['2025-06-18', true, true], ['2025-11-25', true, true]]) {
		test(`${v}: annotations ${annotations}, outputSchema/title/structuredContent/resource_link ${structured}`, async () => {
			const srv = new RawServer(newProject('raw' + v), { structured: true });
			try {
				const init = await srv.initialize(v);
				assert.equal(init.result.protocolVersion, v);
				assert.equal('title' in init.result.serverInfo, structured, show(init.result.serverInfo));
				const tl = await srv.request('tools/list', {});
				for (const t of tl.result.tools) {
					assert.equal('annotations' in t, annotations, t.name);
					assert.equal('title' in t, structured, t.name);
					assert.equal('outputSchema' in t, structured, t.name);
				}
				const ex = await srv.callTool('execute_python', { code: 'open("workspace/outputs/n.txt", "w").write("x")' }, { timeout: 120000 });
				assert.equal('structuredContent' in ex.result, structured, show(ex.result));
				assert.equal(ex.result.content.some((b) => b.type === 'resource_link'), structured, show(ex.result.content));
				assert.equal(/\nlinks:\n- n\.txt: file:\/\//.test(ex.result.content[0].text), !structured, show(ex.result.content[0].text));
				const la = await srv.callTool('list_artifacts', {}, { timeout: 60000 });
				assert.equal('structuredContent' in la.result, structured);
				assert.equal(JSON.parse(la.result.content[0].text).count, 1);
				assert.deepEqual(srv.violations, []);
			} finally {
				srv.kill();
			}
		});
	}
});

describe('list_artifacts and verify_outputs declare an outputSchema that their replies meet', () => {
	let h;
	before(async () => { h = await startClient(newProject('oschema'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('real replies validate against the declared schemas (ajv); the text is the same JSON, compact', async () => {
		const ajv = new Ajv({ strict: false, allErrors: true });
		const schemas = Object.fromEntries(h.tools.map((t) => [t.name, t.outputSchema]));
		for (const name of ['list_artifacts', 'verify_outputs']) assert.equal(schemas[name]?.type, 'object', `${name} declares an outputSchema`);
		const r = await execPy(h, MAKE_FILES + '\nimport json\njson.dump({"k": 1}, open("workspace/outputs/s.json", "w"))');
		assert.equal(r.head.status, 'ok', show(r.text));
		// The sandbox cannot make a symlink (the jail refuses it); one
		// planted from the host still has to fit the schemas.
		fs.symlinkSync('/etc/passwd', path.join(h.root, 'workspace', 'link'));
		const calls = [
			['list_artifacts', {}],
			['list_artifacts', { include_hidden: true, pattern: '*.png' }],
			['verify_outputs', { files: ['workspace/outputs/p.png', { path: 'workspace/outputs/s.json', required_keys: ['k'] }] }],
			['verify_outputs', { files: ['workspace/outputs/missing.csv', 'workspace/link'], write_summary: false }],
			['verify_outputs', { files: ['workspace/outputs/t.csv'], session: 'never-ran' }],
		];
		for (const [name, args] of calls) {
			const res = await callTool(h, name, args);
			assert.equal(res.isError, false, show(res));
			const { sc, fromText, text } = jsonResult(res);
			const validate = ajv.compile(schemas[name]);
			assert.ok(validate(sc), `${name} ${JSON.stringify(args)}: ${show(validate.errors)}\n${show(sc)}`);
			assert.deepEqual(fromText, sc, 'the text carries the same JSON');
			assert.equal(text, JSON.stringify(sc), 'the text is compact JSON');
		}
	});

	test('the schemas are strict enough to fail on a wrong reply', () => {
		const ajv = new Ajv({ strict: false });
		const la = ajv.compile(h.tools.find((t) => t.name === 'list_artifacts').outputSchema);
		assert.equal(la({ artifacts: [{ path: 'x' }], count: 1, total_bytes: 1, truncated: false }), false);
		const vo = ajv.compile(h.tools.find((t) => t.name === 'verify_outputs').outputSchema);
		assert.equal(vo({ status: 'done', exit_code: 0, checks: [], failed: 0, summary_path: null }), false);
	});
});

describe('--images link', () => {
	let h;
	before(async () => { h = await startClient(newProject('imglink'), { structured: true, args: ['--images', 'link'] }); });
	after(async () => { await h?.close(); });

	test('a chart is announced in the text and as a resource_link, never as an image block', async () => {
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nplt.plot([3, 2]); plt.savefig("workspace/outputs/b.jpg")');
		assert.equal(r.head.status, 'ok', show(r.text));
		assert.equal(r.images.length, 0, show(r.blocks.map((b) => b.type)));
		const pngs = r.sc.artifacts.filter((a) => a.mime === 'image/png');
		assert.equal(pngs.length, 1, show(r.sc.artifacts));
		for (const a of r.sc.artifacts) {
			assert.ok(r.sections.artifacts.includes(a.path), `the text names ${a.path}`);
			assert.ok(r.links.some((l) => l.uri.endsWith('/' + a.path) && l.mimeType === a.mime), `a resource_link for ${a.path}: ${show(r.links)}`);
		}
		assert.ok(h.tools.find((t) => t.name === 'execute_python').description.includes('links'), 'the tool says how figures come back');
	});

	test('the same call without the flag returns the image inline', async () => {
		const h2 = await startClient(newProject('imginline'), { structured: true, args: ['--images', 'inline'] });
		try {
			const r = await execPy(h2, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()');
			assert.equal(r.images.length, 1, show(r.blocks.map((b) => b.type)));
			assert.equal(r.links.length, 0);
		} finally { await h2.close(); }
	});

	test('any other value is a usage error (exit 2) naming the two values', () => {
		const p = spawnSync(BIN, ['--root', newProject('imgbad'), '--images', 'none'], { input: '', encoding: 'utf8', timeout: 20000 });
		assert.equal(p.status, 2, show(p));
		assert.match(p.stderr, /--images must be inline or link, not 'none'/);
		assert.equal(p.stdout, '');
	});
});
