// What clients act on in the server's answers, through the SDK client:
// the read-only annotations (Claude Code runs read-only tools in parallel
// and in plan mode, VS Code and Codex ask before the others), a reply within
// the clients' caps (Codex: about 10,000 bytes or 256 lines) and how to
// raise it, a text line beside every resource_link (clients that drop
// links), images beside structuredContent, and instructions and tool
// descriptions that say what this server really holds and allows.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

import { startClient, newProject, execPy, projectWith, RawServer, lineCount, show } from './lib.mjs';

function byName(tools) { return Object.fromEntries(tools.map((t) => [t.name, t])); }

// Files of three kinds and a chart: links for the files, an image for the chart.
const MAKE_FILES = [
	'import json, matplotlib.pyplot as plt',
	'open("workspace/outputs/table.csv", "w").write("a,b\\n1,2\\n")',
	'json.dump({"k": 1}, open("workspace/outputs/facts.json", "w"))',
	'open("workspace/outputs/notes.txt", "w").write("hello\\n")',
	'plt.plot([1, 2, 3]); plt.show()',
].join('\n');

describe('annotations, links and images (--structured-content)', () => {
	let h;
	before(async () => { h = await startClient(newProject('act'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('list_artifacts is read-only; execute_python and verify_outputs are not', () => {
		const t = byName(h.tools);
		assert.equal(t.list_artifacts.annotations?.readOnlyHint, true, show(t.list_artifacts.annotations));
		assert.equal(t.execute_python.annotations?.readOnlyHint, false, show(t.execute_python.annotations));
		assert.equal(t.verify_outputs.annotations?.readOnlyHint, false, 'verify_outputs writes output_summary.json');
		assert.equal(t.execute_python.annotations?.destructiveHint, false);
		assert.equal(t.execute_python.annotations?.openWorldHint, false, 'no network under the built-in policy');
	});

	test('every resource_link has its line in the text; the chart comes back as an image beside structuredContent', { timeout: 60000 }, async () => {
		const r = await execPy(h, MAKE_FILES);
		assert.equal(r.sc?.status, 'ok', show(r.sc));
		assert.equal(r.links.length, 3, `a link for each file that is not an image: ${show(r.blocks.map((b) => b.type))}`);
		for (const l of r.links) {
			const line = r.sections.artifacts.split('\n').find((x) => x.startsWith(`- workspace/outputs/${l.name} (`));
			assert.ok(line, `the text names ${l.name} for clients that drop links: ${r.sections.artifacts}`);
			assert.ok(line.includes(l.mimeType), line);
		}
		assert.equal(r.images.length, 1, 'the image is a block of its own, not only a path in structuredContent');
		assert.equal(r.images[0].mimeType, 'image/png');
		assert.ok(r.sc.artifacts.some((a) => a.mime === 'image/png'), show(r.sc.artifacts));
	});

	test('a reply names 25 files and says how many more list_artifacts lists', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'for i in range(30):\n    open(f"workspace/outputs/f{i:02d}.txt", "w").write("x")');
		assert.equal(r.sc?.status, 'ok', show(r.sc));
		assert.equal(r.sc.artifacts.length, 25, show(r.sc.artifacts.length));
		assert.equal(r.sc.artifacts_omitted, 5, show(r.sc));
		assert.equal(r.links.length, 25);
		assert.match(r.sections.artifacts, /\n- \.\.\. and 5 more \(list_artifacts lists them all\)\n?$/, r.sections.artifacts);
		for (const l of r.links) assert.ok(r.sections.artifacts.includes(`/${l.name} (`), l.name);
	});
});

describe('--resource-links text (clients that reject a result holding a resource_link)', () => {
	let h;
	before(async () => { h = await startClient(newProject('links'), { args: ['--resource-links', 'text'] }); });
	after(async () => { await h?.close(); });

	test('no resource_link block; each link is a line of the text', { timeout: 60000 }, async () => {
		const r = await execPy(h, MAKE_FILES);
		assert.equal(r.head?.status, 'ok', r.text);
		assert.deepEqual(r.links, [], show(r.blocks.map((b) => b.type)));
		assert.equal(r.images.length, 1, 'images are not links: they stay');
		for (const name of ['table.csv', 'facts.json', 'notes.txt'])
			assert.match(r.text, new RegExp(`\\nlinks:\\n(- .*\\n)*- ${name.replace('.', '\\.')}: file://[^ ]+/workspace/outputs/${name.replace('.', '\\.')} \\(`), r.text);
	});
});

describe('the reply budget', () => {
	const BIG = 'import sys\nfor i in range(3000): print("line", i)\nsys.stderr.write("E" * 20000)';

	test('by default a reply takes at most 9 KiB and 225 lines; --max-reply-kb raises it', { timeout: 90000 }, async () => {
		const small = await startClient(newProject('budget'));
		let r;
		try { r = await execPy(small, BIG); } finally { await small.close(); }
		assert.ok(Buffer.byteLength(r.text) <= 9 * 1024 && lineCount(r.text) <= 225,
			`${Buffer.byteLength(r.text)} bytes, ${lineCount(r.text)} lines`);
		assert.match(r.text, /the whole output is in workspace\/\.logs\//);
		assert.match(small.tools.find((t) => t.name === 'execute_python').description, /a reply shows at most 9 KiB of output/);

		const big = await startClient(newProject('budget'), { args: ['--max-reply-kb', '64'] });
		try { r = await execPy(big, BIG); } finally { await big.close(); }
		// 64 KiB: only max_output_chars (8000 per stream) cuts.
		assert.ok(r.sections.stdout.length > 7000 && r.sections.stderr.length > 7000, `${r.sections.stdout.length}, ${r.sections.stderr.length}`);
		assert.match(big.tools.find((t) => t.name === 'execute_python').description, /at most 64 KiB/);
	});

	test('--max-reply-kb takes a whole number of KiB from 2 to 4096', () => {
		for (const bad of ['0', '1', '1.5', 'x', '5000']) {
			const p = spawnSync(process.env.PSM_BIN, ['--max-reply-kb', bad, '--version'], { encoding: 'utf8' });
			assert.equal(p.status, 2, `--max-reply-kb ${bad}: ${p.stderr}`);
			assert.match(p.stderr, /--max-reply-kb/);
		}
	});
});

describe('instructions and descriptions say what this server holds and allows', () => {
	// What the embedded interpreter (Debian's python3) finds of the usual
	// data stack, asked of that interpreter.
	const probe = spawnSync('/usr/bin/python3', ['-c',
		'import importlib.util as u\nprint(" ".join(m for m in ("scipy", "sklearn", "statsmodels", "seaborn") if u.find_spec(m)))'], { encoding: 'utf8' });
	const installed = (probe.stdout || '').trim().split(' ').filter(Boolean);
	let root, ws, skill;
	before(() => {
		[root, skill] = projectWith('say', [['timeout_s: 30', 'timeout_s: 7'], ['memory_mb: 2048', 'memory_mb: 900'], ['persist: true', 'persist: false']]);
		ws = fs.realpathSync(fs.mkdtempSync(path.join(path.dirname(root), 'psm-ws-')));
	});

	for (const era of ['legacy', 'modern']) {
		test(`--workspace, the policy's limits and the installed stack (${era})`, { timeout: 30000 }, async () => {
			const s = new RawServer(root, { args: ['--skill', skill, '--workspace', ws] });
			try {
				const meta = era === 'modern' ? { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } : {};
				const intro = era === 'modern' ? await s.request('server/discover', meta, { timeout: 30000 }) : await s.initialize();
				const instructions = intro.result?.instructions ?? '';
				const tools = byName((await s.request('tools/list', meta, { timeout: 30000 })).result.tools);
				const exec = tools.execute_python.description;
				for (const [what, text] of [['instructions', instructions], ['execute_python', exec]]) {
					assert.ok(text.includes(`${ws}/outputs/`), `${what} names the workspace given: ${text}`);
					assert.ok(!/(^|[\s(])workspace\/outputs\//.test(text), `${what} does not name the default workspace: ${text}`);
					for (const m of ['numpy', 'pandas', 'matplotlib', ...installed]) assert.ok(text.includes(m), `${what} names ${m}: ${text}`);
					assert.match(text, /no network/);
				}
				assert.match(exec, /7 s per call by default \(timeout_s up to 600\), 900 MB of memory/, exec);
				const sess = tools.execute_python.inputSchema.properties.session.description;
				assert.match(sess, /lives until reset: true or until the server exits \(not saved: limits\.persist is off\)/, sess);
				assert.match(sess, /At most 8 sessions/, sess);
				const verify = tools.verify_outputs.description;
				assert.ok(!/even rows/.test(verify), verify);
				assert.match(verify, /CSV: a header row, then rows with as many fields as the header, at least min_rows of them/, verify);
				assert.ok(verify.includes(`${ws}/outputs/output_summary.json`), verify);
				assert.deepEqual(s.violations, []);
			} finally {
				try { await s.stop('eof'); } catch { /* ignore */ }
				s.kill();
			}
		});
	}

	test('with the built-in policy the session says it is saved and restored', async () => {
		const h = await startClient(newProject('say'));
		try {
			const sess = byName(h.tools).execute_python.inputSchema.properties.session.description;
			assert.match(sess, /saved after each successful call and restored after the server restarts/, sess);
		} finally { await h.close(); }
	});
});
