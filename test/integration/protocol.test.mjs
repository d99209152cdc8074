// The MCP protocol on raw stdio: version negotiation, the methods, the
// JSON-RPC errors, notifications, bounded lines, bad bytes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { RawServer, newProject, PROTOCOL_VERSIONS, LATEST_VERSION, MAX_LINE, TOOL_NAMES, sleep, show } from './lib.mjs';

describe('initialize: protocol version negotiation', () => {
	for (const v of PROTOCOL_VERSIONS) {
		test(`client version ${v} is echoed`, { timeout: 20000 }, async () => {
			const s = new RawServer(newProject('ver'));
			try {
				const r = await s.initialize(v);
				assert.ok(r.result, `initialize failed: ${show(r)}`);
				assert.equal(r.result.protocolVersion, v, show(r));
				assert.equal(typeof r.result.serverInfo?.name, 'string', 'serverInfo.name');
				assert.equal(typeof r.result.serverInfo?.version, 'string', 'serverInfo.version');
				assert.ok(r.result.capabilities?.tools, `capabilities.tools missing: ${show(r.result.capabilities)}`);
				assert.ok(r.result.capabilities?.resources, `capabilities.resources missing: ${show(r.result.capabilities)}`);
				assert.ok(r.result.capabilities?.logging, `capabilities.logging missing: ${show(r.result.capabilities)}`);
				assert.deepEqual((await s.stop('eof')), { code: 0, signal: null });
				assert.deepEqual(s.violations, []);
			} finally { s.kill(); }
		});
	}

	test('an unknown client version is answered with 2025-11-25', { timeout: 20000 }, async () => {
		for (const v of ['1999-01-01', '2099-12-31']) {
			const s = new RawServer(newProject('ver'));
			try {
				const r = await s.initialize(v);
				assert.ok(r.result, `initialize with ${v} failed: ${show(r)}`);
				assert.equal(r.result.protocolVersion, LATEST_VERSION, show(r));
				assert.deepEqual((await s.stop('eof')), { code: 0, signal: null });
				assert.deepEqual(s.violations, []);
			} finally { s.kill(); }
		}
	});
});

describe('raw JSON-RPC over stdio', () => {
	let s;
	before(() => { s = new RawServer(newProject('raw')); });
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* asserted elsewhere */ }
		s.kill();
	});

	test('server/discover before initialize is answered (a client probing for the 2026-07-28 era)', async () => {
		const r = await s.request('server/discover', {}, { id: 1 });
		assert.equal(r.id, 1);
		assert.ok(r.result?.supportedVersions?.includes('2026-07-28'), show(r));
		assert.ok(r.result.supportedVersions.includes(LATEST_VERSION), show(r));
	});

	test('malformed JSON gets -32700 with id null, and the server keeps serving', async () => {
		const from = s.messages.length;
		s.sendLine('{"jsonrpc":"2.0","id":2,"method":"ping"');
		const r = await s.waitFor((m) => m.error?.code === -32700, { from, what: 'a -32700 error' });
		assert.equal(r.id, null, `id must be null: ${show(r)}`);
		assert.ok('id' in r, 'the id member must be present (null)');
		s.sendLine('this is not json at all');
		const r2 = await s.waitFor((m, i) => m.error?.code === -32700 && m !== r, { from, what: 'a second -32700 error' });
		assert.equal(r2.id, null);
		const p = await s.request('ping', undefined, { id: 3 });
		assert.deepEqual(p.result, {}, show(p));
	});

	test('initialize, then notifications/initialized gets no reply', async () => {
		const r = await s.request('initialize', {
			protocolVersion: LATEST_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' },
		}, { id: 4 });
		assert.equal(r.result?.protocolVersion, LATEST_VERSION, show(r));
		const from = s.messages.length;
		s.notify('notifications/initialized');
		s.notify('notifications/some_unknown_notification', { x: 1 });
		s.notify('ping'); // a request method sent as a notification (no id): still no reply
		s.notify('tools/list');
		s.notify('no/such/method');
		const p = await s.request('ping', undefined, { id: 5 });
		assert.deepEqual(p.result, {});
		await sleep(300);
		const replies = s.messages.slice(from).filter((m) => m.id !== 5 && ('result' in m || 'error' in m));
		assert.deepEqual(replies, [], `notifications must never get a reply: ${show(replies)}`);
	});

	test('ping answers with an empty result', async () => {
		const r = await s.request('ping', undefined, { id: 'ping-string-id' });
		assert.equal(r.id, 'ping-string-id');
		assert.deepEqual(r.result, {});
	});

	test('an unknown method after initialize gets -32601', async () => {
		for (const [id, method] of [[7, 'no/such/method'], [8, 'prompts/list'], [9, 'tools/lisst']]) {
			const r = await s.request(method, {}, { id });
			assert.equal(r.error?.code, -32601, `${method}: ${show(r)}`);
		}
	});

	test('tools/call of an unknown tool gets -32602', async () => {
		const r = await s.callTool('no_such_tool', {}, { id: 10 });
		assert.equal(r.error?.code, -32602, show(r));
		assert.match(r.error.message, /no_such_tool|unknown tool|tool/i);
	});

	test('tools/list has exactly the three tools', async () => {
		const r = await s.request('tools/list', {}, { id: 11 });
		assert.deepEqual(r.result.tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort(), show(r));
	});

	test('logging/setLevel is accepted', async () => {
		for (const level of ['debug', 'info', 'warning', 'error']) {
			const r = await s.request('logging/setLevel', { level });
			assert.deepEqual(r.result, {}, `${level}: ${show(r)}`);
		}
	});

	test('a batch (JSON array) gets an error and is not executed; the server keeps serving', async () => {
		const from = s.messages.length;
		s.sendLine('[{"jsonrpc":"2.0","id":12,"method":"ping"},{"jsonrpc":"2.0","id":13,"method":"ping"}]');
		const r = await s.waitFor((m) => Array.isArray(m) || m.id === null || m.id === 12 || m.id === 13, { from, what: 'an error for the batch' });
		assert.ok(!Array.isArray(r) && 'error' in r, `a batch gets one error, not a batch of results: ${show(r)}`);
		assert.equal(typeof r.error.code, 'number', show(r));
		assert.ok([-32600, -32700].includes(r.error.code), `batch: expected -32600 (or -32700), got ${show(r)}`);
		s.sendLine('[]');
		await s.waitFor((m) => 'error' in m && m !== r && m.id === null, { from, what: 'an error for []' });
		const p = await s.request('ping', undefined, { id: 14 });
		assert.deepEqual(p.result, {});
	});

	test('non-object messages (number, string, null, true) get -32600 with id null', async () => {
		for (const line of ['42', '"hello"', 'null', 'true']) {
			const from = s.messages.length;
			s.sendLine(line);
			const r = await s.waitFor((m) => 'error' in m || 'result' in m, { from, what: `an error for ${line}` });
			assert.equal(r.id, null, `${line}: ${show(r)}`);
			assert.ok([-32600, -32700].includes(r.error.code), `${line}: expected -32600, got ${show(r)}`);
		}
		const p = await s.request('ping', undefined, { id: 15 });
		assert.deepEqual(p.result, {});
	});

	test('requests without jsonrpc "2.0" or with a non-string method get -32600', async () => {
		const cases = [
			{ line: '{"id":16,"method":"ping"}', id: 16 },
			{ line: '{"jsonrpc":"1.0","id":17,"method":"ping"}', id: 17 },
			{ line: '{"jsonrpc":"2.0","id":18,"method":42}', id: 18 },
		];
		for (const c of cases) {
			const from = s.messages.length;
			s.sendLine(c.line);
			const r = await s.waitFor((m) => m.id === c.id || m.id === null, { from, what: `an error for ${c.line}` });
			assert.equal(r.error.code, -32600, `${c.line}: ${show(r)}`);
		}
	});

	test('invalid UTF-8 bytes in a line get a clear error or are carried safely; the server keeps serving', async () => {
		const bad = Buffer.concat([
			Buffer.from('{"jsonrpc":"2.0","id":19,"method":"ping","params":{"x":"'),
			Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
			Buffer.from('"}}'),
		]);
		const from = s.messages.length;
		s.sendLine(bad);
		const r = await s.waitFor((m) => m.id === 19 || ('error' in m && m.id === null), { from, what: 'a reply to the invalid-UTF-8 line' });
		if ('error' in r) assert.ok([-32700, -32600, -32602].includes(r.error.code), show(r));
		else assert.deepEqual(r.result, {});
		// Raw garbage bytes on a line of their own.
		s.sendLine(Buffer.from([0x80, 0x81, 0xfe, 0xff, 0x00, 0x01]));
		await s.waitFor((m) => 'error' in m && m.id === null && m !== r, { from, what: 'an error for a garbage line' });
		const p = await s.request('ping', undefined, { id: 20 });
		assert.deepEqual(p.result, {});
	});

	test('an over-long line (> 8 MiB) is answered -32600 with its own id, naming the limit; the next line is served', { timeout: 60000 }, async () => {
		const pad = 'x'.repeat(MAX_LINE + 1024);
		const from = s.messages.length;
		// The over-long line and a ping in a single write: the server must resynchronise at the newline.
		s.writeRaw(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":"${pad}"}}}\n{"jsonrpc":"2.0","id":22,"method":"ping"}\n`);
		const r = await s.response(21, { timeout: 30000 });
		assert.equal(r.error?.code, -32600, show(r));
		assert.match(r.error.message, /8 MiB/, `the message must say the limit: ${show(r)}`);
		assert.match(r.error.message, /put large data in a file/, show(r));
		const p = await s.response(22, { timeout: 30000 });
		assert.deepEqual(p.result, {}, show(p));
		assert.equal(s.messages.slice(from).filter((m) => m.id === 21).length, 1, 'one answer, the error: the request is not executed');
		// A string id, after other members; and an id only after the
		// padding, which cannot be read from the line's start: id null.
		s.writeRaw(`{"jsonrpc":"2.0","method":"ping","id":"big \\"one\\"","params":{"pad":"${pad}"}}\n`);
		const q = await s.response('big "one"', { timeout: 30000 });
		assert.equal(q.error?.code, -32600, show(q));
		const from2 = s.messages.length;
		s.writeRaw(`{"jsonrpc":"2.0","method":"ping","params":{"pad":"${pad}"},"id":29}\n`);
		const z = await s.waitFor((m) => 'error' in m && m.id === null, { from: from2, timeout: 30000, what: 'the over-long line error' });
		assert.equal(z.error.code, -32600, show(z));
	});

	test('a line just under 8 MiB is accepted', { timeout: 60000 }, async () => {
		const head = '{"jsonrpc":"2.0","id":23,"method":"ping","params":{"pad":"';
		const tail = '"}}';
		const pad = 'y'.repeat(MAX_LINE - 4096 - head.length - tail.length);
		s.writeRaw(head + pad + tail + '\n');
		const r = await s.response(23, { timeout: 30000 });
		assert.deepEqual(r.result, {}, show(r));
	});

	test('a request with params of the wrong shape gets an error, not a crash', async () => {
		const r1 = await s.request('tools/call', { arguments: {} }, { id: 24 }); // no name
		assert.ok(r1.error || r1.result?.isError, show(r1));
		if (r1.error) assert.equal(r1.error.code, -32602, show(r1));
		const r2 = await s.request('tools/call', 'not an object', { id: 25 });
		assert.ok(r2.error, show(r2));
		assert.ok([-32600, -32602].includes(r2.error.code), `params that are not structured: ${show(r2)}`);
		const r3 = await s.request('resources/read', {}, { id: 26 });
		assert.equal(r3.error?.code, -32602, show(r3));
		const p = await s.request('ping', undefined, { id: 27 });
		assert.deepEqual(p.result, {});
	});

	test('every stdout line so far was one JSON-RPC 2.0 object', () => {
		assert.deepEqual(s.violations, []);
		assert.ok(s.messages.length > 20);
	});

	test('end of input: exit status 0', { timeout: 20000 }, async () => {
		const e = await s.stop('eof');
		assert.deepEqual(e, { code: 0, signal: null }, s.stderr().slice(-2000));
	});
});
