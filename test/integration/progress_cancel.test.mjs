// notifications/progress during an execution whose request
// had a progressToken; notifications/cancelled interrupts a running execution.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { RawServer, startClient, newProject, execPy, sleep, show } from './lib.mjs';

describe('progress through the SDK client', () => {
	let h;
	before(async () => { h = await startClient(newProject('prog'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('a 6 s execution with a progressToken gets progress notifications carrying the latest output line', { timeout: 60000 }, async () => {
		const seen = [];
		const code = 'import time\nfor i in range(12):\n    print(f"step {i}", flush=True)\n    time.sleep(0.5)';
		const r = await execPy(h, code, {}, { onprogress: (p) => seen.push(p) });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.ok(seen.length >= 1, 'at least one progress notification within 6 s (one every 5 s at least)');
		for (const p of seen) assert.equal(typeof p.progress, 'number', show(p));
		assert.ok(seen.some((p) => /step \d+/.test(p.message || '')), `the message carries the latest output line: ${show(seen)}`);
		for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress increases');
	});
});

describe('cancellation on raw stdio', () => {
	let s;
	before(async () => {
		s = new RawServer(newProject('cancel'), { structured: true });
		await s.initialize();
	});
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* ignore */ }
		s.kill();
	});

	test('notifications/cancelled stops a running execution and rolls its session back', { timeout: 60000 }, async () => {
		const first = await s.callTool('execute_python', { code: 'import time\nkept_value = 11', session: 'c1' }, { timeout: 30000 });
		assert.equal(first.result?.structuredContent?.status, 'ok', show(first));
		const id = 'to-cancel';
		const from = s.messages.length;
		s.sendLine({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_python', arguments: { code: 'kept_value = -1\ntime.sleep(30)', session: 'c1' } } });
		await sleep(800);
		const t0 = performance.now();
		s.notify('notifications/cancelled', { requestId: id, reason: 'test' });
		// The session is free again soon: the next call does not wait for the 30 s sleep.
		const next = await s.callTool('execute_python', { code: 'kept_value', session: 'c1' }, { timeout: 20000 });
		const took = performance.now() - t0;
		assert.ok(took < 10000, `the cancelled execution kept the session busy for ${took.toFixed(0)} ms`);
		assert.equal(next.result?.structuredContent?.result, '11', `state rolled back to before the cancelled call: ${show(next)}`);
		const resp = s.messages.slice(from).find((m) => m.id === id);
		if (resp) {
			// A response to a cancelled request is optional (MCP); when sent, it says cancelled.
			assert.equal(resp.result?.structuredContent?.status, 'cancelled', show(resp));
			assert.equal(resp.result.structuredContent.exit_code, 130);
			assert.equal(resp.result.isError, true);
		}
		assert.deepEqual(s.violations, []);
	});

	test('cancelling an unknown or finished request is ignored', async () => {
		const from = s.messages.length;
		s.notify('notifications/cancelled', { requestId: 'never-sent' });
		s.notify('notifications/cancelled', { requestId: 1000 });
		s.notify('notifications/cancelled', {});
		const p = await s.request('ping');
		assert.deepEqual(p.result, {});
		await sleep(200);
		assert.deepEqual(s.messages.slice(from).filter((m) => m.id !== p.id), [], 'no reply to a notification');
	});
});

describe('cancellation before the interpreter is up', () => {
	// Attack (and a client's ordinary impatience): a call cancelled while
	// it waited for the zygote left its session marked to be started with
	// no call in it; once the zygote was ready the server sent that
	// missing call to the new process and died of SIGSEGV.
	test('a call cancelled before the zygote is ready: the server lives and the next call runs', { timeout: 60000 }, async () => {
		const s = new RawServer(newProject('cancel-early'), { structured: true });
		try {
			await s.initialize();
			// Sent at once after initialize: the zygote takes hundreds of ms to
			// come up, so the call waits for it, and is cancelled there.
			s.sendLine({ jsonrpc: '2.0', id: 'early', method: 'tools/call', params: { name: 'execute_python', arguments: { code: '1', session: 'e' } } });
			s.notify('notifications/cancelled', { requestId: 'early', reason: 'test' });
			assert.doesNotMatch(s.stderr(), /interpreter ready/, 'the call was cancelled before the interpreter was ready');
			// Nothing else is sent until the zygote is up: a call sent
			// meanwhile would take the cancelled one's place.
			for (let i = 0; i < 200 && !/interpreter ready/.test(s.stderr()); i++) await sleep(100);
			await sleep(500);
			assert.equal(s.exitInfo, undefined, `the server outlived the zygote's start: ${show(s.exitInfo)}`);
			const next = await s.callTool('execute_python', { code: '6 * 7', session: 'e' }, { timeout: 30000 });
			assert.equal(next?.result?.structuredContent?.result, '42', `${show(next)}; the server's exit: ${show(s.exitInfo)}`);
			const other = await s.callTool('execute_python', { code: '"other"', session: 'f' }, { timeout: 30000 });
			assert.equal(other?.result?.structuredContent?.status, 'ok', show(other));
			assert.equal(s.exitInfo, undefined, `the server is alive: ${show(s.exitInfo)}`);
			assert.deepEqual(s.violations, []);
		} finally {
			try { await s.stop('eof', { timeout: 10000 }); } catch { /* ignore */ }
			s.kill();
		}
	});
});
