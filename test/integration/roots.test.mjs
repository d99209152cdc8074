// ROOT from the client's roots: with neither --root nor CLAUDE_PROJECT_DIR,
// a client that declares the roots capability names the project with the
// first file:// root of roots/list (editors that cannot expand
// ${workspaceFolder} in their settings start the server elsewhere).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { BIN, newProject, writeFile, show } from './lib.mjs';

/** A client started in `cwd` with no --root; `roots` is what it answers. */
async function clientIn(cwd, roots, { declare = true } = {}) {
	const env = {};
	for (const k of ['HOME', 'PATH', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k];
	const transport = new StdioClientTransport({ command: BIN, args: ['--structured-content'], cwd, env, stderr: 'pipe' });
	const err = [];
	transport.stderr?.on('data', (c) => err.push(c));
	let asked = 0;
	const client = new Client({ name: 'psm-roots-test', version: '1.0.0' }, { capabilities: declare ? { roots: { listChanged: false } } : {} });
	if (declare) client.setRequestHandler(ListRootsRequestSchema, async () => { asked++; return { roots }; });
	await client.connect(transport);
	const pid = transport.pid;
	const tools = (await client.listTools()).tools; // held while the roots are asked
	return { client, pid, tools, asked: () => asked, stderr: () => Buffer.concat(err).toString('utf8') };
}

async function cwdOf(h) {
	const r = await h.client.callTool({ name: 'execute_python', arguments: { code: 'import os\nopen("workspace/outputs/here.txt", "w").write("x")\nos.getcwd()' } });
	return r;
}

describe('ROOT from the client\'s roots', () => {
	test('the first file:// root is the project: same process, calls held until it is known', { timeout: 90000 }, async () => {
		const elsewhere = newProject('roots-cwd');
		const proj = newProject('roots-proj');
		writeFile(proj, 'data.csv', 'a\n1\n');
		const h = await clientIn(elsewhere, [{ uri: 'https://example.invalid/x' }, { uri: pathToFileURL(proj).href, name: 'project' }]);
		try {
			assert.equal(h.tools.length, 3, 'tools/list answered after the restart');
			const r = await cwdOf(h);
			assert.equal(r.isError, false, show(r));
			assert.equal(r.structuredContent.result, `'${fs.realpathSync(proj)}'`, show(r));
			assert.ok(fs.existsSync(`${proj}/workspace/outputs/here.txt`), 'written in the client\'s root');
			assert.ok(!fs.existsSync(`${elsewhere}/workspace/outputs/here.txt`));
			assert.equal(h.asked(), 1);
			assert.match(h.stderr(), /first root is .*starting again with --root/);
			// The agent is told once, in the first reply, where the project is.
			const real = fs.realpathSync(proj);
			assert.ok(r.structuredContent.note?.includes(`the project is ${real}, the client's first root`), show(r));
			assert.ok(r.structuredContent.note.includes(fs.realpathSync(elsewhere)), show(r));
			assert.match(r.content[0].text, /\nnote:\n[^]*the client's first root/, show(r));
			const r2 = await cwdOf(h);
			assert.equal(r2.structuredContent.note, undefined, `said once: ${show(r2)}`);
			assert.equal(fs.readFileSync(`/proc/${h.pid}/cmdline`, 'utf8').length > 0, true, 'the same process still serves');
		} finally { await h.client.close(); }
	});

	test('a root that is the current directory, or no file root, keeps the current directory', { timeout: 90000 }, async () => {
		const here = newProject('roots-same');
		const h = await clientIn(here, [{ uri: pathToFileURL(here).href }]);
		try {
			const r = await cwdOf(h);
			assert.equal(r.structuredContent.result, `'${fs.realpathSync(here)}'`, show(r));
			assert.equal(r.structuredContent.note, undefined, `nothing to say: ${show(r)}`);
		} finally { await h.client.close(); }
		const h2 = await clientIn(here, [{ uri: 'file:///no/such/dir-psm' }]);
		try {
			const r = await cwdOf(h2);
			assert.equal(r.structuredContent.result, `'${fs.realpathSync(here)}'`, show(r));
			assert.match(h2.stderr(), /not an existing directory/);
		} finally { await h2.client.close(); }
	});

	test('2026-07-28 has no roots: a modern client that declares them is never asked, ROOT is the current directory', { timeout: 60000 }, async () => {
		const here = newProject('roots-modern');
		const env = {};
		for (const k of ['HOME', 'PATH', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k];
		const p = spawn(BIN, [], { cwd: here, env, stdio: ['pipe', 'pipe', 'ignore'] });
		const seen = [];
		let buf = '';
		p.stdout.on('data', (c) => {
			buf += c;
			for (let nl; (nl = buf.indexOf('\n')) >= 0; buf = buf.slice(nl + 1)) seen.push(JSON.parse(buf.slice(0, nl)));
		});
		const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { roots: { listChanged: false } } };
		const ask = (id, method, params) => p.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }) + '\n');
		const answer = async (id) => { for (let t = 0; t < 600 && !seen.some((m) => m.id === id); t++) await new Promise((r) => setTimeout(r, 100)); return seen.find((m) => m.id === id); };
		try {
			ask(1, 'tools/list', {});
			p.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
			assert.equal((await answer(1))?.result?.tools?.length, 3);
			ask(2, 'tools/call', { name: 'execute_python', arguments: { code: 'import os\nos.getcwd()' } });
			const r = await answer(2);
			assert.match(r?.result?.content?.[0]?.text ?? '', new RegExp(`\nresult:\n'${fs.realpathSync(here)}'\n`), show(r));
			assert.deepEqual(seen.filter((m) => m.method === 'roots/list'), [], 'no roots/list asked of a modern client');
		} finally { p.kill('SIGTERM'); }
	});

	test('a client without roots is not asked', { timeout: 60000 }, async () => {
		const here = newProject('roots-none');
		const h = await clientIn(here, [], { declare: false });
		try {
			const r = await cwdOf(h);
			assert.equal(r.structuredContent.result, `'${fs.realpathSync(here)}'`, show(r));
		} finally { await h.client.close(); }
	});
});
