// What each call used (CPU time, peak memory), measured by the server from
// /proc, and the limit that stopped a call.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { SANITIZED, startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';
import { SKILL, projectWith, errorLines } from './reply_lib.mjs';


describe('what each call used', () => {
	let h;
	before(async () => { h = await startClient(newProject('usage'), { structured: true }); });
	after(async () => { await h?.close(); });

	const usageOf = (r) => {
		const m = / · cpu (\d+) ms · peak (\d+) MB$/.exec(r.text.split('\n')[0]);
		assert.ok(m, `the status line ends with cpu and peak: ${r.text.split('\n')[0]}`);
		assert.equal(Number(m[1]), r.sc.cpu_ms);
		// The line rounds as printf's %.0f does (424.5 -> 424).
		assert.ok(Math.abs(Number(m[2]) - r.sc.peak_mb) <= 0.5, `${m[2]} MB on the line, ${r.sc.peak_mb} in structuredContent`);
		return { cpu: r.sc.cpu_ms, peak: r.sc.peak_mb };
	};

	test('peak memory is this call\'s, not the session\'s lifetime peak; CPU time is counted', async () => {
		const a = usageOf(await execPy(h, 'import numpy as np\na = np.ones(60_000_000)\na.sum()\ndel a'));
		assert.ok(a.peak >= 450, `480 MB were allocated: peak ${a.peak}`);
		const b = usageOf(await execPy(h, 'b = np.ones(20_000_000)\nb[::4096] = 2\nfloat(b.sum())'));
		// Under AddressSanitizer the quarantine keeps some of the freed 480 MB
		// resident: the peak is still below the earlier call's.
		assert.ok(b.peak >= 150 && b.peak < (SANITIZED ? a.peak - 40 : 400), `160 MB this call after 480 MB before: peak ${b.peak}`);
		const c = usageOf(await execPy(h, 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass'));
		assert.ok(c.cpu >= 500, `0.6 s of CPU: ${c.cpu} ms`);
		const d = usageOf(await execPy(h, 'import time\ntime.sleep(0.6)'));
		assert.ok(d.cpu < 400, `sleeping uses no CPU: ${d.cpu} ms`);
	});

	test('a child process the call forked counts', async () => {
		const code = [
			'import os, time',
			'pid = os.fork()',
			'if pid == 0:',
			'    t = time.process_time()',
			'    while time.process_time() - t < 0.8: pass',
			'    os._exit(0)',
			'os.waitpid(pid, 0)[1]',
		].join('\n');
		const r = await execPy(h, code);
		assert.equal(r.sc.result, '0', show(r.text));
		const u = usageOf(r);
		assert.ok(u.cpu >= 700, `the child's 0.8 s of CPU count: ${u.cpu} ms`);
	});

	test('a call stopped by its timeout says which limit and its value; what it used is measured', async () => {
		const r = await execPy(h, 'while True: pass', { timeout_s: 2 });
		assert.equal(r.head.status, 'timeout', show(r.text));
		assert.match(r.sections.error, /^denied_by: limits \(timeout_s: 2\)$/m, show(r.text));
		assert.equal(r.sc.error.limit, 'timeout_s: 2');
		const u = usageOf(r);
		assert.ok(u.cpu >= 100 && u.cpu <= r.sc.duration_ms + 100, `it spun until killed (the machine may be shared): ${u.cpu} ms of ${r.sc.duration_ms}`);
	});

	test('the outputSchema declares cpu_ms and peak_mb', () => {
		const props = h.tools.find((t) => t.name === 'execute_python').outputSchema.properties;
		assert.ok(props.cpu_ms && props.peak_mb, show(props));
	});
});
