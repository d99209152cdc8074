// The 2026-07-28 era on raw stdio and through the official v2 client
// (@modelcontextprotocol/client): server/discover, the per-request _meta,
// resultType and the cache hints, -32022, progress and cancellation without
// a handshake, and both eras from one process.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import { RawServer, newProject, sleep, show, BIN, TOOL_NAMES, LATEST_VERSION } from './lib.mjs';

const MODERN = '2026-07-28';
const meta = (extra = {}) => ({
	'io.modelcontextprotocol/protocolVersion': MODERN,
	'io.modelcontextprotocol/clientCapabilities': {},
	'io.modelcontextprotocol/clientInfo': { name: 'psm-raw-modern', version: '1' },
	...extra,
});

describe('2026-07-28 on raw stdio, no handshake', () => {
	let s;
	before(() => { s = new RawServer(newProject('modern')); });
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* asserted below */ }
		s.kill();
	});

	test('server/discover names every version, the capabilities and the instructions', async () => {
		const r = await s.request('server/discover', { _meta: meta() }, { timeout: 30000 });
		assert.deepEqual(r.result?.supportedVersions, [MODERN, LATEST_VERSION, '2025-06-18', '2025-03-26', '2024-11-05'], show(r));
		assert.equal(r.result.resultType, 'complete');
		assert.ok(r.result.capabilities?.tools && r.result.capabilities.resources, show(r.result.capabilities));
		assert.equal(r.result.capabilities.logging, undefined, 'logging is deprecated in 2026-07-28: not offered');
		assert.match(r.result.instructions, /execute_python/);
		assert.equal(r.result._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'python-sandbox-mcp', show(r.result._meta));
		assert.ok(Number.isInteger(r.result.ttlMs) && r.result.cacheScope === 'private', show(r.result));
	});

	test('tools/list and a call are served with no initialize; every result says resultType', { timeout: 60000 }, async () => {
		const l = await s.request('tools/list', { _meta: meta() }, { timeout: 30000 });
		assert.deepEqual(l.result?.tools?.map((t) => t.name), TOOL_NAMES, show(l));
		assert.equal(l.result.resultType, 'complete');
		assert.ok(l.result.ttlMs > 0 && l.result.cacheScope === 'private', show({ ttlMs: l.result.ttlMs, cacheScope: l.result.cacheScope }));
		const c = await s.request('tools/call', { name: 'execute_python', arguments: { code: 'y = 6\ny * 7' }, _meta: meta() }, { timeout: 60000 });
		assert.equal(c.result?.resultType, 'complete', show(c));
		assert.match(c.result.content[0].text, /^ok · exit 0 ·[^\n]*\n[\s\S]*\nresult:\n42\n/, show(c));
		assert.equal(c.result.ttlMs, undefined, 'a tool result is not a cacheable result');
		const r = await s.request('resources/list', { _meta: meta() }, { timeout: 30000 });
		assert.equal(r.result?.ttlMs, 0, `the workspace changes with every call: ${show(r)}`);
	});

	test('an unknown version is -32022 naming the supported ones; missing capabilities are -32602', async () => {
		for (const v of ['2099-01-01', '2026-07-29', '']) {
			const r = await s.request('tools/list', { _meta: { ...meta(), 'io.modelcontextprotocol/protocolVersion': v } }, { timeout: 30000 });
			assert.equal(r.error?.code, -32022, `${v}: ${show(r)}`);
			assert.equal(r.error.data?.requested, v);
			assert.ok(r.error.data.supported.includes(MODERN) && r.error.data.supported.includes(LATEST_VERSION), show(r.error.data));
			assert.match(r.error.message, /2026-07-28 per request; .*through initialize/);
		}
		// A legacy version this server speaks, named in _meta, is followed.
		const old = await s.request('tools/list', { _meta: { 'io.modelcontextprotocol/protocolVersion': '2024-11-05' } }, { timeout: 30000 });
		assert.equal(old.result?.tools?.[0]?.annotations, undefined, `2024-11-05 has no annotations: ${show(old)}`);
		assert.equal(old.result.resultType, undefined);
		const m = { ...meta() };
		delete m['io.modelcontextprotocol/clientCapabilities'];
		const r = await s.request('tools/list', { _meta: m }, { timeout: 30000 });
		assert.equal(r.error?.code, -32602, show(r));
		assert.match(r.error.message, /clientCapabilities/);
	});

	test('what 2026-07-28 removed is method-not-found there, and says why', async () => {
		for (const method of ['ping', 'logging/setLevel', 'initialize']) {
			const r = await s.request(method, { level: 'info', protocolVersion: MODERN, _meta: meta() }, { timeout: 30000 });
			assert.equal(r.error?.code, -32601, `${method}: ${show(r)}`);
			assert.match(r.error.message, /2026-07-28/, show(r));
		}
		const nf = await s.request('resources/read', { uri: 'file:///etc/passwd', _meta: meta() }, { timeout: 30000 });
		assert.equal(nf.error?.code, -32602, `resource not found is -32602 in 2026-07-28: ${show(nf)}`);
	});

	test('progress comes before the result, none after it; a cancelled call is not answered', { timeout: 60000 }, async () => {
		const id = 'modern-progress';
		const from = s.messages.length;
		const r = await s.request('tools/call', {
			name: 'execute_python', arguments: { code: 'import time\nfor i in range(9):\n    print("tick", i, flush=True)\n    time.sleep(0.5)' },
			_meta: meta({ progressToken: 'tok-1' }),
		}, { id, timeout: 60000 });
		assert.equal(r.result?.isError, false, show(r));
		await sleep(300);
		const msgs = s.messages.slice(from);
		const at = msgs.indexOf(r);
		const progress = msgs.map((m, i) => [m, i]).filter(([m]) => m.method === 'notifications/progress' && m.params?.progressToken === 'tok-1');
		assert.ok(progress.length >= 1, `a 4.5 s call gets a progress notification: ${show(msgs.map((m) => m.method ?? m.id))}`);
		assert.ok(progress.every(([, i]) => i < at), 'no progress notification after its result');
		assert.match(progress[0][0].params.message, /^running for \d+ s: tick \d/, show(progress[0][0]));

		const cid = 'modern-cancel';
		s.sendLine({ jsonrpc: '2.0', id: cid, method: 'tools/call',
			params: { name: 'execute_python', arguments: { code: 'y = -1\ntime.sleep(30)' }, _meta: meta({ progressToken: 'tok-2' }) } });
		await sleep(800);
		const cut = s.messages.length;
		s.notify('notifications/cancelled', { requestId: cid, reason: 'the test cancels it' });
		const next = await s.request('tools/call', { name: 'execute_python', arguments: { code: 'y' }, _meta: meta() }, { timeout: 30000 });
		assert.match(next.result?.content?.[0]?.text ?? '', /\nresult:\n6\n/, `the session rolled back: ${show(next)}`);
		await sleep(300);
		assert.equal(s.messages.find((m) => m.id === cid), undefined, 'no reply to a cancelled request');
		assert.deepEqual(s.messages.slice(cut).filter((m) => m.params?.progressToken === 'tok-2'), [], 'no progress after the cancellation');
		assert.deepEqual(s.violations, []);
	});
});

describe('both eras from one process', () => {
	let s;
	before(() => { s = new RawServer(newProject('dual')); });
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* ignore */ }
		s.kill();
	});

	test('a legacy session and modern requests interleave, each answered in its own era', async () => {
		const init = await s.initialize('2024-11-05');
		assert.equal(init.result?.protocolVersion, '2024-11-05', show(init));
		const legacy = await s.request('tools/list', {}, { timeout: 30000 });
		assert.equal(legacy.result.resultType, undefined);
		assert.equal(legacy.result.tools[0].annotations, undefined, '2024-11-05 has no tool annotations');
		const modern = await s.request('tools/list', { _meta: meta() }, { timeout: 30000 });
		assert.equal(modern.result.resultType, 'complete');
		assert.equal(modern.result.tools[0].annotations?.readOnlyHint, false, '2026-07-28 gets everything');
		const again = await s.request('tools/list', {}, { timeout: 30000 });
		assert.equal(again.result.tools[0].annotations, undefined, 'the legacy session keeps its version');
		const ping = await s.request('ping', undefined, { timeout: 30000 });
		assert.deepEqual(ping.result, {});
	});
});

describe('the official v2 client', () => {
	const connect = async (mode) => {
		const transport = new StdioClientTransport({ command: BIN, args: ['--root', newProject('v2')], stderr: 'ignore' });
		const client = new Client({ name: 'psm-integration-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
		const errors = [];
		client.onerror = (e) => errors.push(String(e));
		await client.connect(transport);
		return { client, errors };
	};

	test('versionNegotiation auto settles on 2026-07-28 and works statelessly', { timeout: 60000 }, async () => {
		const { client, errors } = await connect('auto');
		try {
			assert.equal(client.getProtocolEra(), 'modern');
			assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
			assert.equal(client.getServerVersion()?.name, 'python-sandbox-mcp');
			const { tools } = await client.listTools();
			assert.deepEqual(tools.map((t) => t.name), TOOL_NAMES);
			await client.callTool({ name: 'execute_python', arguments: { code: 'k = 5' } });
			const r = await client.callTool({ name: 'execute_python', arguments: { code: 'k * 2' } });
			assert.match(r.content[0].text, /\nresult:\n10\n/, show(r));
			assert.deepEqual(errors, []);
		} finally { await client.close(); }
	});

	test('its default (legacy) mode settles on 2025-11-25', { timeout: 60000 }, async () => {
		const { client, errors } = await connect('legacy');
		try {
			assert.equal(client.getProtocolEra(), 'legacy');
			assert.equal(client.getNegotiatedProtocolVersion(), LATEST_VERSION);
			assert.equal((await client.listTools()).tools.length, 3);
			assert.deepEqual(errors, []);
		} finally { await client.close(); }
	});
});
