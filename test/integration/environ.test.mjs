// The server's environment never reaches the sandbox: not in os.environ,
// and not in the memory a session inherits.  A client passes its servers
// environment variables (API tokens); the zygote is exec'd with none of
// them, so its initial stack, which every session inherits and can read
// with ctypes even after the jail cleared the environment, holds none.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newProject, startClient, execPy } from './lib.mjs';

const CANARY = `PSM-ENV-CANARY-${process.pid}-${Date.now()}`;

describe('the server environment stays outside', () => {
	let h;
	before(async () => { h = await startClient(newProject('environ'), { structured: true, env: { PSM_TEST_TOKEN: CANARY } }); });
	after(async () => { await h?.close(); });

	test('no trace of a server variable in os.environ or in the initial stack', { timeout: 120000 }, async () => {
		// The canary is written reversed in the cell, so the cell's own text
		// cannot be what is found.
		const code = [
			'import os, ctypes',
			`want = ${JSON.stringify([...CANARY].reverse().join(''))}[::-1].encode()`,
			'f = open("/proc/self/stat").read().rsplit(")", 1)[1].split()',
			'arg_start, env_end = int(f[45]), int(f[48])',
			'area = ctypes.string_at(arg_start, env_end - arg_start)',
			'print(any(want in v.encode() for v in os.environ.values()), want in area, len(area) > 0)',
		].join('\n');
		const r = await execPy(h, code);
		const { sc } = r;
		assert.equal(sc.status, 'ok', JSON.stringify(sc));
		assert.equal(sc.stdout.trim(), 'False False True', `the server's variable leaked: ${sc.stdout}`);
	});
});

// The one variable the zygote gets from the server is the server's own
// value (malloc's heap in huge pages): a GLIBC_TUNABLES of the server's
// environment (glibc's allocator knobs, a client's or an attacker's
// choice) never reaches the sandbox.
describe('GLIBC_TUNABLES is the server\'s own value', () => {
	const mark = `${process.pid}${Date.now()}`;
	let h;
	before(async () => { h = await startClient(newProject('tunables'), { structured: true, env: { GLIBC_TUNABLES: `glibc.malloc.check=0:glibc.psm.canary=${mark}` } }); });
	after(async () => { await h?.close(); });

	test('the session inherits glibc.malloc.hugetlb=1, never the server\'s GLIBC_TUNABLES', { timeout: 120000 }, async () => {
		const code = [
			'import ctypes',
			`want = ${JSON.stringify([...mark].reverse().join(''))}[::-1].encode()`,
			'f = open("/proc/self/stat").read().rsplit(")", 1)[1].split()',
			'arg_start, env_end = int(f[45]), int(f[48])',
			'area = ctypes.string_at(arg_start, env_end - arg_start)',
			'print(want in area, b"GLIBC_TUNABLES=glibc.malloc.hugetlb=1" in area)',
		].join('\n');
		const { sc } = await execPy(h, code);
		assert.equal(sc.status, 'ok', JSON.stringify(sc));
		assert.equal(sc.stdout.trim(), 'False True', sc.stdout);
	});
});
