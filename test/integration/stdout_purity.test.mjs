// The promise "stdout carries MCP messages only, whatever the Python
// code does".  One server on raw stdio goes through every kind of request and
// every kind of output; every stdout line must be one JSON-RPC 2.0 object, each
// request answered exactly once, and nothing else but known notifications.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { RawServer, newProject, writeFile, fileUri, makePng, sleep, show } from './lib.mjs';

describe('stdout carries only JSON-RPC', () => {
	let s, root;
	const sent = [];
	const req = (method, params, opts = {}) => {
		const id = opts.id ?? s.nextId++;
		sent.push(id);
		return s.request(method, params, { ...opts, id });
	};
	const exec = (code, extra = {}, opts = {}) => req('tools/call', { name: 'execute_python', arguments: { code, ...extra } }, { timeout: 60000, ...opts });

	before(async () => {
		root = newProject('pure');
		writeFile(root, 'workspace/in.png', makePng(2, 2));
		s = new RawServer(root, { structured: true });
	});
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* reported below */ }
		s.kill();
	});

	test('a tour of every method and every kind of output', { timeout: 120000 }, async () => {
		await req('server/discover', {});
		await req('ping');
		const init = await req('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pure', version: '1' } });
		assert.equal(init.result?.protocolVersion, '2025-06-18');
		s.notify('notifications/initialized');
		await req('tools/list', {});
		await req('resources/list', {});
		await req('logging/setLevel', { level: 'debug' });
		await req('resources/read', { uri: fileUri(`${root}/workspace/in.png`) });
		await req('resources/read', { uri: 'file:///etc/passwd' });

		const nasty = [
			'print("plain")',
			'import sys, os\nsys.stdout.buffer.write(b"\\xff\\xfe\\x00\\x1b[2J\\x1b]0;title\\x07\\r\\n")\nsys.stdout.flush()\nos.write(1, b"\\n\\n\\n{\\"jsonrpc\\":\\"2.0\\",\\"id\\":1,\\"result\\":{}}\\n")',
			'import os\nos.write(1, b"no newline at the end")',
			'import os\nos.write(1, b"\\r\\n" * 1000)',
			'import ctypes\nlibc = ctypes.CDLL(None)\nlibc.printf(b"%s\\n", b"{\\"jsonrpc\\":\\"2.0\\",\\"method\\":\\"notifications/progress\\"}")\n_ = libc.fflush(None)',
			'import sys\nsys.__stdout__.write("\\u2028\\u2029\\ufeff\\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace"))',
			'print("x" * 100000)',
			'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()',
			'open("workspace/outputs/t.csv", "w").write("a,b\\n1,2\\n")',
			'raise ValueError("\\x1b[31m\\xff bad \\n{\\"jsonrpc\\":\\"2.0\\"}")',
			'import threading, os, time\ndef spam():\n    for _ in range(50):\n        os.write(1, b"{\\"jsonrpc\\":\\"2.0\\",\\"id\\":9}\\n")\n        time.sleep(0.001)\nt = threading.Thread(target=spam)\nt.start(); t.join()',
			'import time\ntime.sleep(30)',
		];
		for (const code of nasty) {
			const extra = code.includes('sleep(30)') ? { timeout_s: 1 } : {};
			const r = await exec(code, extra, { id: s.nextId++ });
			assert.ok(r.result, `${code}: ${show(r)}`);
		}
		// A request with a progressToken: notifications/progress, if any, carry the token.
		await exec('import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.5)', {}, { id: 'with-progress' })
			.catch(() => null);
		s.sendLine({ jsonrpc: '2.0', id: 'with-progress-2', method: 'tools/call', params: { name: 'execute_python', arguments: { code: 'import time\ntime.sleep(1)' }, _meta: { progressToken: 'tok-1' } } });
		sent.push('with-progress-2');
		await s.response('with-progress-2', { timeout: 60000 });

		await req('tools/call', { name: 'list_artifacts', arguments: { include_hidden: true } });
		await req('tools/call', { name: 'verify_outputs', arguments: { files: ['workspace/outputs/t.csv', 'workspace/missing.png'] } });
		await req('tools/call', { name: 'nope', arguments: {} });
		s.sendLine('{not json');
		s.sendLine('[1,2,3]');
		s.sendLine(Buffer.from([0xc3, 0x28, 0x0a, 0xff]));
		await req('ping');
		await sleep(300);
	});

	test('every stdout line was one JSON-RPC 2.0 object', () => {
		assert.deepEqual(s.violations, [], show(s.violations));
	});

	test('every request got exactly one response; no response to anything not sent', () => {
		const responses = s.messages.filter((m) => 'result' in m || 'error' in m);
		const byId = new Map();
		for (const m of responses) {
			if (m.id === null) continue; // errors for unparseable lines
			const k = JSON.stringify(m.id);
			byId.set(k, (byId.get(k) || 0) + 1);
		}
		for (const id of sent) assert.equal(byId.get(JSON.stringify(id)), 1, `responses to ${JSON.stringify(id)}`);
		const sentKeys = new Set(sent.map((x) => JSON.stringify(x)));
		const extra = [...byId.keys()].filter((k) => !sentKeys.has(k));
		assert.deepEqual(extra, [], 'responses with ids that were never sent (Python output leaking?)');
		for (const m of responses) {
			assert.ok(!('result' in m && 'error' in m), `result and error together: ${show(m)}`);
		}
	});

	test('the only other messages are known notifications', () => {
		const known = new Set(['notifications/message', 'notifications/progress', 'notifications/resources/list_changed', 'notifications/tools/list_changed', 'notifications/resources/updated']);
		const notes = s.messages.filter((m) => !('result' in m || 'error' in m));
		for (const n of notes) {
			assert.ok(typeof n.method === 'string' && known.has(n.method), `unexpected message: ${show(n)}`);
			assert.ok(!('id' in n), `a server notification has no id: ${show(n)}`);
			if (n.method === 'notifications/progress') assert.equal(n.params?.progressToken, 'tok-1', show(n));
			if (n.method === 'notifications/message') assert.ok(n.params?.level && 'data' in n.params, show(n));
		}
	});

	test('exit status 0 at end of input', { timeout: 20000 }, async () => {
		assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
	});
});
