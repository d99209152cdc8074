// The product's real scenario, through the official MCP SDK client, as an
// agent would run it: telemetry in workspace/metrics.json -> p95 latency per
// endpoint, spikes beyond 2.5 standard deviations, a chart, a JSON summary ->
// verify_outputs -> a readable report and the machine-readable summary.
//
//   node demo/demo.mjs --bin build/python-sandbox-mcp --project build/demo-project
//
// Exit status 0 when every step worked and every check passed, else 1.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { generateMetrics, quantile } from './metrics.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');

function arg(name, dflt) {
	const i = process.argv.indexOf(name);
	return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}
const BIN = path.resolve(arg('--bin', path.join(REPO, 'build/python-sandbox-mcp')));
const PROJECT = path.resolve(arg('--project', path.join(REPO, 'build/demo-project')));
const SESSION = 'latency';
const OUTPUTS = ['workspace/outputs/latency_trend.png', 'workspace/outputs/p95.json'];

const tty = process.stdout.isTTY && !process.env.NO_COLOR;
const c = (code, s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const bold = (s) => c('1', s), dim = (s) => c('2', s), green = (s) => c('32', s), red = (s) => c('31', s), cyan = (s) => c('36', s);
const failures = [];
function fail(what) { failures.push(what); console.log(red(`  ✗ ${what}`)); }
function ok(what) { console.log(green(`  ✓ ${what}`)); }
function heading(s) { console.log('\n' + bold(cyan(`== ${s}`))); }
function indent(s, pre = '    ') { return s.split('\n').map((l) => pre + l).join('\n'); }
function table(rows, header) {
	const plain = (v) => String(v).replace(/\x1b\[[0-9;]*m/g, '');
	const all = [header, ...rows].map((r) => r.map(String));
	const w = header.map((_, i) => Math.max(...all.map((r) => plain(r[i]).length)));
	const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^-?[\d.,]+$/.test(plain(r[i]))));
	const pad = (v, i) => {
		const fill = ' '.repeat(w[i] - plain(v).length);
		return numeric[i] ? fill + v : v + fill;
	};
	const line = (r) => r.map(pad).join('   ').trimEnd();
	return [bold(line(all[0])), ...all.slice(1).map(line)].map((l) => '    ' + l).join('\n');
}

async function main() {
	// 1. The scratch project and its telemetry.
	heading('project');
	fs.rmSync(PROJECT, { recursive: true, force: true });
	fs.mkdirSync(path.join(PROJECT, 'workspace'), { recursive: true });
	const { doc, injected } = generateMetrics();
	fs.writeFileSync(path.join(PROJECT, 'workspace/metrics.json'), JSON.stringify(doc, null, 1));
	const endpoints = [...new Set(doc.requests.map((r) => r.endpoint))].sort();
	console.log(`    ${PROJECT}`);
	console.log(`    workspace/metrics.json: ${doc.requests.length} requests, ${endpoints.length} endpoints, ${injected.length} injected spikes (fixed seed)`);

	// 2. The server, as a client such as Claude Code starts it.
	heading('server');
	const srv = { client: null, stderr: [] };
	await connect(srv);
	const { tools } = await srv.client.listTools();
	console.log(`    tools: ${tools.map((t) => t.name).join(', ')}`);

	try {
		await run(srv, { doc, injected, endpoints });
	} finally {
		await srv.client.close();
		if (failures.length && srv.stderr.length) {
			console.log(dim('\n  server stderr (tail):'));
			console.log(dim(indent(Buffer.concat(srv.stderr).toString('utf8').slice(-3000))));
		}
	}
}

async function connect(srv) {
	const transport = new StdioClientTransport({
		command: BIN, args: ['--root', PROJECT], stderr: 'pipe',
		env: { PATH: process.env.PATH || '/usr/bin:/bin', HOME: process.env.HOME || '/', LANG: process.env.LANG || 'C.UTF-8' },
	});
	transport.stderr?.on('data', (d) => srv.stderr.push(d));
	srv.client = new Client({ name: 'python-sandbox-mcp-demo', version: '1.0.0' }, { capabilities: {} });
	const t0 = performance.now();
	await srv.client.connect(transport);
	const info = srv.client.getServerVersion();
	console.log(`    ${BIN} --root ${PROJECT}`);
	console.log(`    ${info?.name} ${info?.version}: initialized in ${(performance.now() - t0).toFixed(0)} ms`);
}

/* Halfway through, the server is ended and started again, as a client does
 * on a reconnect or a new conversation: the session's state is saved in the
 * background after each call and restored by the next call. */
async function restart(srv) {
	heading('restart: the server ends (end of input) and a new one starts');
	const snap = path.join(PROJECT, 'workspace/.sessions', SESSION, 'state.snap');
	const since = Date.now() - 1000;
	for (let i = 0; i < 300; i++) {
		try { if (fs.statSync(snap).mtimeMs >= since) break; } catch { /* not yet */ }
		await new Promise((r) => setTimeout(r, 100));
	}
	try {
		console.log(`    saved: ${path.relative(PROJECT, snap)} (${fs.statSync(snap).size} bytes)`);
	} catch {
		fail('the session was not saved before the restart');
	}
	await srv.client.close();
	await connect(srv);
}

function statusLine(res) {
	const text = res.content?.find((b) => b.type === 'text')?.text || '';
	return { text, first: text.split('\n')[0] };
}

async function run(srv, { doc, injected, endpoints }) {
	// 3. The analysis, cell by cell, in one session.
	const src = fs.readFileSync(path.join(REPO, 'fixtures/demo/latency_analysis.py'), 'utf8');
	const cells = src.split(/^# %% (.*)$/m).slice(1);
	let images = [];
	const half = 2 * Math.floor(cells.length / 4);
	for (let i = 0; i < cells.length; i += 2) {
		if (i === half && i > 0) await restart(srv);
		const client = srv.client;
		const name = cells[i].trim(), code = cells[i + 1].trim() + '\n';
		heading(`execute_python · cell "${name}"`);
		console.log(dim(indent(code.split('\n').filter((l) => l && !l.startsWith('#')).slice(0, 6).join('\n') + (code.split('\n').length > 8 ? '\n...' : ''), '    │ ')));
		const res = await client.callTool({ name: 'execute_python', arguments: { code, session: SESSION, timeout_s: 120 } }, undefined, { timeout: 180000 });
		const { text, first } = statusLine(res);
		console.log(indent(text));
		const blocks = (res.content || []).filter((b) => b.type !== 'text');
		for (const b of blocks) {
			if (b.type === 'image') console.log(`    [image block: ${b.mimeType}, ${Math.round(Buffer.from(b.data, 'base64').length / 1024)} KiB]`);
			else if (b.type === 'resource_link') console.log(`    [resource_link: ${b.uri}]`);
		}
		images = images.concat(blocks.filter((b) => b.type === 'image'));
		if (res.isError || !/^ok · exit 0 · /.test(first)) { fail(`cell "${name}" did not succeed: ${first}`); return; }
		if (i === half && i > 0) {
			if (/· state restored/.test(first)) ok('the first call after the restart found the session restored');
			else fail(`the first call after the restart did not restore the session: ${first}`);
		}
	}
	const client = srv.client;
	if (images.length < 1) fail('the chart was not returned as an image block');

	// 4. The quality gate.
	heading('verify_outputs');
	const vres = await client.callTool({
		name: 'verify_outputs',
		arguments: { files: [OUTPUTS[0], { path: OUTPUTS[1], kind: 'json', required_keys: ['p95_ms', 'spikes'] }], session: SESSION },
	});
	const verdict = vres.structuredContent ?? JSON.parse(vres.content.find((b) => b.type === 'text').text);
	console.log(table(verdict.checks.map((k) => [k.ok ? green('ok') : red('FAILED'), k.path, k.kind, k.bytes ?? '-', k.detail]), ['check', 'path', 'kind', 'bytes', 'detail']));
	console.log(`    status: ${verdict.status}, exit_code: ${verdict.exit_code}, failed: ${verdict.failed}, summary: ${verdict.summary_path}`);
	if (verdict.status !== 'completed') fail(`verify_outputs: ${verdict.status}`);

	// 5. The numbers, read back through resources/read, checked against the fixture.
	heading('p95 latency per endpoint');
	const p95uri = 'file://' + path.join(fs.realpathSync(PROJECT), OUTPUTS[1]);
	const { contents } = await client.readResource({ uri: p95uri });
	const summary = JSON.parse(contents[0].text ?? Buffer.from(contents[0].blob, 'base64').toString('utf8'));
	const rows = [];
	let p95ok = true;
	for (const ep of endpoints) {
		const xs = doc.requests.filter((r) => r.endpoint === ep).map((r) => r.latency_ms);
		const want = Math.round(quantile(xs, 0.95) * 10) / 10;
		const got = summary.p95_ms?.[ep];
		const same = typeof got === 'number' && Math.abs(got - want) < 0.051;
		p95ok &&= same;
		rows.push([ep, summary.requests_per_endpoint?.[ep] ?? '-', got?.toFixed?.(1) ?? '-', same ? green('✓') : red(`✗ (expected ${want})`)]);
	}
	console.log(table(rows, ['endpoint', 'requests', 'p95 ms', 'checked']));
	if (p95ok) ok('p95 values match an independent computation in the client');
	else fail('p95 values differ from the independent computation');

	heading(`spikes beyond ${summary.spike_threshold_sd} standard deviations (per endpoint)`);
	const spikes = summary.spikes || [];
	console.log(table(spikes.map((s) => [s.id, s.ts.slice(11, 19), s.endpoint, s.latency_ms.toFixed(1), s.z.toFixed(2)]), ['request', 'time', 'endpoint', 'latency ms', 'z']));
	const found = spikes.map((s) => s.id).sort();
	if (JSON.stringify(found) === JSON.stringify(injected)) ok(`found exactly the ${injected.length} injected spikes`);
	else fail(`spikes found ${JSON.stringify(found)} differ from those injected ${JSON.stringify(injected)}`);

	// 6. The artifacts.
	heading('artifacts');
	const lres = await client.callTool({ name: 'list_artifacts', arguments: { path: 'workspace/outputs' } });
	const listing = lres.structuredContent ?? JSON.parse(lres.content.find((b) => b.type === 'text').text);
	console.log(table(listing.artifacts.map((a) => [a.path, a.bytes, a.mime, a.sha256.slice(0, 12)]), ['path', 'bytes', 'mime', 'sha256']));
	for (const p of OUTPUTS) {
		if (!listing.artifacts.some((a) => a.path === p)) fail(`${p} is not listed`);
	}
	const png = path.join(PROJECT, OUTPUTS[0]);
	console.log(`    chart: ${png}`);

	// 7. The machine-readable summary, as SKILL.md asks an agent to end.
	heading('summary');
	if (verdict.exit_code !== 0) fail(`the last execution's exit_code is ${verdict.exit_code}`);
	const status = failures.length === 0 && verdict.status === 'completed' ? 'completed' : 'failed';
	const outputs = [...OUTPUTS, verdict.summary_path].filter(Boolean);
	console.log(bold(`status: ${status}`));
	console.log(bold(`exit_code: ${verdict.exit_code}`));
	console.log(bold(`outputs: ${outputs.join(', ')}`));
}

main().then(() => {
	if (failures.length) {
		console.log(red(`\ndemo FAILED: ${failures.length} problem(s)`));
		process.exit(1);
	}
	console.log(green('\ndemo passed'));
}, (e) => {
	console.log(red(`\ndemo FAILED: ${e?.stack || e}`));
	process.exit(1);
});
