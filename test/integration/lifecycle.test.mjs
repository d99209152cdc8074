// Lifecycle: exit status 0 on end of input, SIGTERM and SIGINT, with
// every child process ended (checked through /proc ppid chains).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { BIN, RawServer, newProject, descendants, waitGone, sleep, show, startClient, execPy } from './lib.mjs';

/** Starts a server, runs code in two sessions (so that the zygote and the
 *  sessions exist), optionally leaves a long execution running; returns the
 *  server and the processes below it. */
async function busyServer({ running = false } = {}) {
	const s = new RawServer(newProject('life'));
	const r = await s.initialize();
	assert.ok(r.result, show(r));
	for (const session of ['default', 'second']) {
		const x = await s.callTool('execute_python', { code: 'import os\nos.getpid()', session }, { timeout: 60000 });
		assert.equal(x.result?.isError, false, show(x));
	}
	let pending = null;
	if (running) {
		const id = s.nextId++;
		s.sendLine({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_python', arguments: { code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(60)', session: 'second' } } });
		pending = id;
		await sleep(700);
	}
	const kids = descendants(s.pid);
	return { s, kids, pending };
}

async function checkShutdown(how, opts) {
	const { s, kids } = await busyServer(opts);
	try {
		assert.ok(kids.length >= 2, `expected the zygote and sessions below the server, found ${show(kids)}`);
		const t0 = performance.now();
		const e = await s.stop(how, { timeout: 15000 });
		const took = performance.now() - t0;
		assert.deepEqual(e, { code: 0, signal: null }, `exit after ${how}; stderr: ${s.stderr().slice(-1500)}`);
		const left = await waitGone(kids, 1000);
		assert.deepEqual(left.map((p) => `${p.pid} ${p.comm} ${p.state}`), [], `child processes left after ${how}`);
		assert.ok(took < 10000, `${how}: exit took ${took.toFixed(0)} ms`);
		assert.deepEqual(s.violations, []);
	} finally {
		s.kill();
		for (const p of kids) { try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ } }
	}
}

describe('shutdown', { concurrency: 1 }, () => {
	test('end of input: exit 0, no child process left', { timeout: 60000 }, () => checkShutdown('eof'));
	test('SIGTERM: exit 0, no child process left', { timeout: 60000 }, () => checkShutdown('SIGTERM'));
	test('SIGINT: exit 0, no child process left', { timeout: 60000 }, () => checkShutdown('SIGINT'));
	test('SIGTERM while code runs: exit 0, the running session is ended too', { timeout: 60000 }, () => checkShutdown('SIGTERM', { running: true }));
	test('end of input while code runs: exit 0, no child process left', { timeout: 60000 }, () => checkShutdown('eof', { running: true }));

	test('end of input right after start (zygote still warming): exit 0, nothing left', { timeout: 30000 }, async () => {
		const s = new RawServer(newProject('life'));
		try {
			const r = await s.initialize();
			assert.ok(r.result, show(r));
			const kids = descendants(s.pid);
			const e = await s.stop('eof');
			assert.deepEqual(e, { code: 0, signal: null });
			assert.deepEqual((await waitGone(kids, 1000)).map((p) => p.pid), []);
		} finally { s.kill(); }
	});

	test('a private project directory (mode 0700, as mkdtemp makes it) works', { timeout: 40000 }, async () => {
		const s = new RawServer(newProject('private', { privateDir: true }), { structured: true });
		try {
			await s.initialize();
			const r = await s.callTool('execute_python', { code: 'open("workspace/outputs/p.txt", "w").write("ok")' }, { timeout: 30000 });
			assert.equal(r.result?.structuredContent?.status, 'ok', `${show(r)}\nstderr: ${s.stderr().slice(-800)}`);
			assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
		} finally { s.kill(); }
	});

	test('end of input before initialize: exit 0', { timeout: 30000 }, async () => {
		const s = new RawServer(newProject('life'));
		try {
			await sleep(200);
			const e = await s.stop('eof');
			assert.deepEqual(e, { code: 0, signal: null });
			assert.equal(s.messages.length, 0, 'nothing is written to stdout unasked');
		} finally { s.kill(); }
	});

	test('a session that ends itself (os._exit, SIGKILL, segfault) is reported; the server keeps serving', { timeout: 60000 }, async () => {
		const s = new RawServer(newProject('life'), { structured: true });
		try {
			await s.initialize();
			const cases = [
				['import os\nos._exit(5)', null],
				['import os, signal\nos.kill(os.getpid(), signal.SIGKILL)', 137],
				['import ctypes\nctypes.string_at(0)', 139],
			];
			for (const [code, exit] of cases) {
				const b = await s.callTool('execute_python', { code, session: 'dier' }, { timeout: 60000 });
				assert.equal(b.result?.isError, true, `${code}: ${show(b)}`);
				const sc = b.result.structuredContent;
				assert.notEqual(sc.status, 'ok', show(sc));
				if (exit !== null) {
					assert.ok(exit === 137 ? ['crashed', 'memory'].includes(sc.status) : sc.status === 'crashed', `${code}: ${show(sc)}`);
					assert.equal(sc.exit_code, exit, `${code}: ${show(sc)}`);
				}
				const p = await s.request('ping');
				assert.deepEqual(p.result, {}, 'the server is still serving');
				const c = await s.callTool('execute_python', { code: '1 + 2', session: 'dier' }, { timeout: 60000 });
				assert.equal(c.result?.structuredContent?.result, '3', `the session works again after ${code}: ${show(c)}`);
			}
			assert.deepEqual(await s.stop('eof'), { code: 0, signal: null });
			assert.deepEqual(s.violations, []);
		} finally { s.kill(); }
	});
});

// A server whose user cannot reach its binary by path: the binary in a
// mode-700 directory of root's (a checkout under /root, or in mktemp -d),
// started as nobody by setpriv, which keeps its capabilities up to the exec
// and so can start it.  The server starts itself again three ways (the
// zygote, the --check server, the restart on the client's first root): each
// must still find its own binary.
if (process.getuid() === 0) {
	describe('a binary its user cannot reach by path (mode-700 directory, run as nobody)', () => {
		const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];
		function nobodyDir(tag) {
			const d = newProject(tag);
			fs.chownSync(d, 65534, 65534);
			return d;
		}
		const hidden = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-hidden-bin-'));
		process.on('exit', () => fs.rmSync(hidden, { recursive: true, force: true }));
		const bin = path.join(hidden, 'python-sandbox-mcp');
		fs.copyFileSync(BIN, bin);
		fs.chmodSync(bin, 0o755);
		const home = nobodyDir('hidden-home');
		const env = { HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), XDG_STATE_HOME: path.join(home, '.state') };

		test('the interpreter starts, --check runs, the restart on the client\'s root works', { timeout: 120000 }, async () => {
			assert.equal(fs.statSync(hidden).mode & 0o777, 0o700);
			const root = nobodyDir('hidden-root');
			const h = await startClient(root, { structured: true, command: 'setpriv', commandArgs: [...NOBODY, bin], env });
			try {
				const r = await execPy(h, 'import os\nos.getuid()');
				assert.equal(r.sc.status, 'ok', `${show(r.text)}\nstderr: ${h.stderr().slice(-1500)}`);
				assert.equal(r.sc.result, '65534');
			} finally { await h.close(); }

			const c = spawnSync('setpriv', [...NOBODY, bin, '--check', '--root', root], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env }, timeout: 90000 });
			assert.equal(c.status, 0, `${c.stdout}\n${c.stderr}`);
			assert.match(c.stdout, /probes \(in a real session\):\n[^]*check: the policy is enforced/);

			const elsewhere = nobodyDir('hidden-cwd');
			const transport = new StdioClientTransport({ command: 'setpriv', args: [...NOBODY, bin, '--structured-content'], cwd: elsewhere, env: { PATH: process.env.PATH, ...env }, stderr: 'pipe' });
			const err = [];
			transport.stderr?.on('data', (b) => err.push(b));
			const client = new Client({ name: 'psm-hidden-bin', version: '1' }, { capabilities: { roots: { listChanged: false } } });
			client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: pathToFileURL(root).href }] }));
			await client.connect(transport);
			try {
				const x = await client.callTool({ name: 'execute_python', arguments: { code: 'import os\nos.getcwd()' } });
				assert.equal(x.structuredContent?.result, `'${root}'`, `${show(x)}\nstderr: ${Buffer.concat(err).toString().slice(-1500)}`);
			} finally { await client.close(); }
		});
	});
}
