// verify_outputs on hostile files a cell wrote: the server's own memory
// stays bounded whatever the bytes expand to, and the check fails with a
// detail that names the bound.  Checked from outside: the server process's
// peak RSS (VmHWM in /proc/PID/status) before and after.
// Attack: '<svg>' + '<a>' * N (never closed) took the server from 10 MB to
// 1.65 GB for a 32 MiB file (expat allocates per open element), a 32 MiB
// JSON [0,0,...] to 1.35 GB (a whole cJSON tree); 64 MiB got the server
// OOM-killed in a 2304 MiB pod, every session with it.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startClient, newProject, execPy, callTool, jsonResult, show, BIN } from './lib.mjs';

const MiB = 1024 * 1024;
// A check holds its file (read whole, at most 256 MiB) and at most 64 MiB
// of parser; all checks at once at most 128 MiB of parser.  Two checks of
// 32 MiB files at once: 64 + 128 MiB over the server's own.  AddressSanitizer
// keeps up to 256 MiB of freed memory in quarantine, and its shadow.
const SLACK_MB = BIN.includes('/san/') ? 640 : 300;

function hwmMB(pid) {
	const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
	return Number(m[1]) / 1024;
}

describe('verify_outputs on hostile files: bounded server memory', () => {
	let h;
	before(async () => {
		h = await startClient(newProject('vbound'), { structured: true });
		const r = await execPy(h, [
			'n = 32 << 20',
			'open("workspace/outputs/deep.svg", "w").write(("<svg>" + "<a>" * n)[:n])',
			'attrs = "<svg" + "".join(" a%d=\\"\\"" % k for k in range(n // 12)) + "/>"',
			'open("workspace/outputs/attrs.svg", "w").write(attrs)',
			'open("workspace/outputs/zeros.json", "w").write("[0" + ",0" * (n // 2 - 1) + "]")',
			'open("workspace/outputs/deep.json", "w").write("[" * 5000)',
			'"written"',
		].join('\n'), {}, { timeout: 120000 });
		assert.equal(r.sc.status, 'ok', show(r.sc));
	});
	after(async () => { await h?.close(); });

	async function verify(files) {
		const res = await callTool(h, 'verify_outputs', { files, require_success: false, write_summary: false }, { timeout: 180000 });
		return jsonResult(res).sc;
	}

	test('each hostile file fails or passes with its bound named; the peak stays bounded', { timeout: 300000 }, async () => {
		const hwm0 = hwmMB(h.pid);
		// Two calls at once: the server's two worker threads check together.
		const [a, b] = await Promise.all([
			verify(['workspace/outputs/deep.svg', 'workspace/outputs/zeros.json']),
			verify(['workspace/outputs/attrs.svg', 'workspace/outputs/deep.json']),
		]);
		const [deep, zeros] = a.checks, [attrs, djson] = b.checks;
		assert.equal(deep.ok, false, show(deep));
		assert.match(deep.detail, /SVG nests deeper than 256 elements/, show(deep));
		assert.equal(zeros.ok, true, show(zeros));
		assert.match(zeros.detail, /JSON array with 16777216 items/, show(zeros));
		assert.equal(attrs.ok, false, show(attrs));
		assert.match(attrs.detail, /too large to check in memory/, show(attrs));
		assert.equal(djson.ok, false, show(djson));
		assert.match(djson.detail, /deeper than 1000 levels/, show(djson));
		const grew = hwmMB(h.pid) - hwm0;
		assert.ok(grew < SLACK_MB, `the server's peak RSS grew by ${grew.toFixed(0)} MB (from ${hwm0.toFixed(0)} MB)`);
		// The server still answers, and its sessions live.
		const r = await execPy(h, '6 * 7');
		assert.equal(r.sc.result, '42', show(r.sc));
	});
});
