// A client that stops reading stdout holds nothing up: replies wait in a
// bounded queue while every timer and watchdog keeps acting, and a client
// that reads nothing for too long, or lets too many replies pile up, is cut
// off with a message on stderr; the server then ends as at end of input,
// every state saved.  The client here is raw stdio whose stdout stream is
// paused (the kernel's buffer fills, the server's writes can go no further);
// the session is watched from outside, in /proc.  Measured before: a reply
// that did not fit in the pipe stopped the whole server until the client
// read again (a cell under timeout_s 2 ran for as long as the client did
// not read, its memory growing past memory_mb).
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { RawServer, newProject, descendants, stillAlive, sleep, show, openDir, stageBinaries, SANITIZED, VALGRIND } from './lib.mjs';
import { stateHome, start } from './persist_lib.mjs';

const servers = [];
after(() => { for (const s of servers) s.kill(); });

function raw(root, opts) {
	const s = new RawServer(root, opts);
	servers.push(s);
	return s;
}

/** The pid and start time of the process titled `title` below pid (a
 *  process gives itself its title just after it starts). */
async function titled(pid, title, ms = 20000) {
	for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(100)) {
		for (const p of descendants(pid)) {
			let cmd;
			try { cmd = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').replace(/\0+$/, ''); } catch { continue; }
			if (cmd === title) return p;
		}
	}
	return null;
}

/** A ping whose reply (it echoes the id) is far larger than a pipe's or a
 *  socket's buffer: written to a client that does not read, it waits. */
function bigPing(s, tag, mb = 4) {
	const id = `${tag}-${'x'.repeat(mb << 20)}`;
	s.sendLine({ jsonrpc: '2.0', id, method: 'ping' });
	return id;
}

async function waitExit(s, ms) {
	let timer;
	const t = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ms); });
	try { return await Promise.race([s.exited, t]); } finally { clearTimeout(timer); }
}

const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const slack = VALGRIND ? 60000 : SANITIZED ? 20000 : 10000;

/** Runs `code` (whose call only a limit of the server ends) while the client
 *  reads nothing, a large reply waiting before its own; checks from outside
 *  that the session is gone on time, then reads: both replies, in order. */
async function limitWhileUnread(t, s, code, status) {
	await s.initialize();
	let r = await s.callTool('execute_python', { code: 'x = 1' }, { timeout: 120000 });
	assert.equal(r.result?.isError, false, show(r));
	const session = await titled(s.pid, 'python-sandbox-mcp: session default');
	assert.ok(session, 'the session process is found by its title');

	s.proc.stdout.pause();
	s.sendLine({ jsonrpc: '2.0', id: 'hog', method: 'tools/call', params: { name: 'execute_python', arguments: { code } } });
	const pingId = bigPing(s, 'after-hog');

	// Seen from outside while the client still reads nothing: the session
	// that ran the cell is gone within its limits and some slack.
	const t0 = Date.now();
	let alive = stillAlive([session]);
	while (alive.length && Date.now() - t0 < 2000 + slack) {
		await sleep(100);
		alive = stillAlive([session]);
	}
	const took = Date.now() - t0;
	assert.deepEqual(alive, [], `the session (pid ${session.pid}) still ran ${took} ms after its call began, the client not reading`);
	t.diagnostic(`the session was gone ${took} ms after the call was sent, the client not reading`);
	assert.equal(s.exitInfo, undefined, `the server is still there; stderr: ${s.stderr().slice(-1500)}`);
	assert.ok(!s.messages.some((m) => m.id === 'hog'), 'the client was not reading: the reply cannot have arrived yet');

	s.proc.stdout.resume();
	const ping = await s.response(pingId, { timeout: 30000 });
	assert.deepEqual(ping.result, {});
	r = await s.response('hog', { timeout: 30000 });
	const text = r.result?.content?.[0]?.text ?? '';
	assert.match(text, status, show(r));
	t.diagnostic(`its reply: ${text.split('\n')[0]}`);
	assert.ok(s.messages.indexOf(ping) < s.messages.indexOf(r), 'replies in the order they were made');

	// The server goes on as before.
	r = await s.callTool('execute_python', { code: 'print("again")' }, { timeout: 60000 });
	assert.match(r.result?.content?.[0]?.text ?? '', /again/, show(r));
	assert.deepEqual(s.violations, [], show(s.violations));
	assert.deepEqual(await s.stop('eof', { timeout: 20000 }), { code: 0, signal: null });
}

describe('a client that stops reading', () => {
	test('the memory watchdog still acts, and the replies wait whole and in order', { timeout: 180000 }, async (t) => {
		// Under AddressSanitizer a session's shadow memory alone is over 256 MB.
		const mem = SANITIZED || VALGRIND ? 1024 : 256;
		const s = raw(newProject('slow-read'), { args: ['--memory', String(mem), '--timeout', '2'] });
		// Shared memory (not in RLIMIT_DATA: counted only by the watchdog)
		// up to 400 MB past memory_mb, then a busy loop: only memory_mb or
		// timeout_s ends it.
		await limitWhileUnread(t, s, [
			'import os, mmap',
			'ms = []',
			`for i in range(${Math.ceil((mem + 400) / 50)}):`,
			'    m = mmap.mmap(-1, 50 << 20, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)',
			'    for off in range(0, 50 << 20, 4096): m[off] = 1',
			'    ms.append(m)',
			'while True: pass',
		].join('\n'), /^(memory|timeout)\b/);
	});

	// The timeout, a timer of the server's loop only, under another user
	// and in both jail modes.
	for (const mode of ['namespaces', 'no namespaces']) {
		const who = AS_ROOT ? 'nobody' : 'the current user';
		test(`timeout_s still acts, the server run by ${who}, ${mode}`, { timeout: 180000 }, async (t) => {
			const { bin, dockerrun } = stageBinaries('slow-bin');
			const root = newProject(`slow-${mode.replace(' ', '')}`);
			fs.mkdirSync(path.join(root, 'workspace'));
			const home = openDir('slow-home');
			if (AS_ROOT) spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root, home]);
			const server = mode === 'namespaces' ? [bin] : [dockerrun, bin];
			const launch = AS_ROOT
				? { command: 'setpriv', commandArgs: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...server] }
				: { command: server[0], commandArgs: server.slice(1) };
			const s = raw(root, { args: ['--timeout', '2'], env: { HOME: home }, ...launch });
			await limitWhileUnread(t, s, 'while True: pass', /^timeout\b/);
		});
	}

	test('a client that reads nothing for the stall bound is cut off, and its sessions are saved', { timeout: 180000 }, async (t) => {
		const root = newProject('slow-stall');
		const xdg = stateHome();
		const s = raw(root, { args: ['--log-level', 'info'], env: { XDG_STATE_HOME: xdg, PSM_TEST_STDOUT_STALL_MS: '1500' } });
		await s.initialize();
		const r = await s.callTool('execute_python', { code: 'kept = 41 + 1' }, { timeout: 120000 });
		assert.equal(r.result?.isError, false, show(r));

		s.proc.stdout.pause();
		bigPing(s, 'unread');
		const e = await waitExit(s, 1500 + 10000 + slack);
		assert.deepEqual(e, { code: 0, signal: null }, `the server ends by itself; stderr: ${s.stderr().slice(-1500)}`);
		const err = s.stderr();
		assert.match(err, /the client has read nothing of its replies for 1\.5 s .*cut off/, err.slice(-1500));
		assert.match(err, /state saved \(/, err.slice(-1500));
		assert.doesNotMatch(err, /could not be saved/);

		const h = await start(root, xdg);
		const again = await h.client.callTool({ name: 'execute_python', arguments: { code: 'kept' } });
		assert.equal(again.structuredContent?.state, 'restored', show(again));
		assert.equal(again.structuredContent?.result, '42', show(again));
		await h.close();
	});

	test('replies piled up past the queue\'s bound cut the client off, in bounded memory', { timeout: 180000 }, async (t) => {
		const s = raw(newProject('slow-cap'));
		await s.initialize();
		s.proc.stdout.pause();
		// 24 replies of 4 MiB: 96 MiB, more than the bound of 64 MiB.
		let peakKb = 0;
		const sample = () => {
			try {
				const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${s.pid}/status`, 'utf8'));
				if (m) peakKb = Math.max(peakKb, Number(m[1]));
			} catch { /* gone */ }
		};
		for (let i = 0; i < 24 && !s.exitInfo; i++) {
			bigPing(s, `p${i}`);
			await sleep(20);
			sample();
		}
		const e = await waitExit(s, 20000 + slack);
		assert.deepEqual(e, { code: 0, signal: null }, `the server ends by itself; stderr: ${s.stderr().slice(-1500)}`);
		assert.match(s.stderr(), /the client has left \d+ MiB of replies unread .*cut off/, s.stderr().slice(-1500));
		// The queue's 64 MiB, the line being read (up to 8 MiB) and what
		// parsing and printing it take, never the 96 MiB sent.
		t.diagnostic(`server peak RSS ${peakKb} kB`);
		if (!SANITIZED && !VALGRIND)
			assert.ok(peakKb < 200 * 1024, `server peak RSS ${peakKb} kB`);
	});
});
