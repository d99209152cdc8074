// execute_python through the SDK client (with --structured-content):
// state, output capture, the final expression, exceptions, sessions, reset,
// seeding, input errors.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startClient, newProject, execPy, callTool, explain, MAX_CODE, show } from './lib.mjs';

describe('execute_python', () => {
	let h;
	before(async () => { h = await startClient(newProject('exec'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('the text block starts with the status line; structuredContent agrees', { timeout: 60000 }, async () => {
		const r = await execPy(h, '1 + 1');
		assert.equal(r.res.isError, false, show(r.res));
		assert.ok(r.head, `first line is not a status line: ${JSON.stringify(r.text.split('\n')[0])}`);
		assert.equal(r.head.status, 'ok');
		assert.equal(r.head.exit, 0);
		assert.equal(r.head.session, 'default');
		assert.equal(r.blocks[0].type, 'text', 'the text block comes first');
		assert.equal(r.sc.status, 'ok');
		assert.equal(r.sc.exit_code, 0);
		assert.equal(r.sc.session, 'default');
		assert.equal(r.sc.execution_count, r.head.cell);
		assert.equal(r.sc.state, 'new', 'the first call of a session has state "new"');
		assert.equal(typeof r.sc.duration_ms, 'number');
		assert.ok(r.sc.duration_ms >= 0);
		assert.equal(r.sc.result, '2');
		assert.equal(r.sc.error, null);
		assert.equal(r.sc.stdout, '');
		assert.equal(r.sc.stderr, '');
		assert.equal(r.sc.output_truncated, false);
		assert.equal(r.sc.full_output, null);
		assert.deepEqual(r.sc.artifacts, []);
		assert.equal(r.sections.result?.trim(), '2', `result section: ${JSON.stringify(r.text)}`);
		assert.equal(r.sections.stdout, undefined, 'empty sections are left out');
		assert.equal(r.sections.stderr, undefined, 'empty sections are left out');
		assert.equal(r.sections.error, undefined, 'empty sections are left out');
	});

	test('state persists between calls: x = 41, then x + 1 -> 42; cell number increments', async () => {
		const a = await execPy(h, 'x = 41\ndef inc(v):\n    return v + 1\nimport math');
		assert.equal(a.sc.status, 'ok', show(a.sc));
		assert.equal(a.sc.result, null);
		assert.equal(a.sc.state, 'kept');
		const b = await execPy(h, 'inc(x) if math.pi > 3 else None');
		assert.equal(b.sc.result, '42', show(b.sc));
		assert.equal(b.head.cell, a.head.cell + 1, `${a.text.split('\n')[0]} then ${b.text.split('\n')[0]}`);
		assert.equal(b.sc.execution_count, a.sc.execution_count + 1);
	});

	test('stdout and stderr are captured apart, at the fd level (print, os.write, C printf)', async () => {
		const code = [
			'import sys, os, ctypes',
			'print("py-print-out")',
			'sys.stderr.write("py-write-err\\n")',
			'sys.stdout.flush(); sys.stderr.flush()',
			'os.write(1, b"fd1-write-out\\n")',
			'os.write(2, b"fd2-write-err\\n")',
			'libc = ctypes.CDLL(None)',
			'libc.printf(b"c-printf-out\\n")',
			'libc.dprintf(2, b"c-dprintf-err\\n")',
			"_ = libc.fflush(None)",
		].join('\n');
		const r = await execPy(h, code);
		assert.equal(r.sc.status, 'ok', show(r.sc));
		for (const s of ['py-print-out', 'fd1-write-out', 'c-printf-out']) {
			assert.ok(r.sc.stdout.includes(s), `stdout lacks ${s}: ${JSON.stringify(r.sc.stdout)}`);
			assert.ok(!r.sc.stderr.includes(s), `stderr has ${s}: ${JSON.stringify(r.sc.stderr)}`);
			assert.ok(r.sections.stdout?.includes(s), `text stdout section lacks ${s}: ${JSON.stringify(r.text)}`);
		}
		for (const s of ['py-write-err', 'fd2-write-err', 'c-dprintf-err']) {
			assert.ok(r.sc.stderr.includes(s), `stderr lacks ${s}: ${JSON.stringify(r.sc.stderr)}`);
			assert.ok(!r.sc.stdout.includes(s), `stdout has ${s}: ${JSON.stringify(r.sc.stdout)}`);
			assert.ok(r.sections.stderr?.includes(s), `text stderr section lacks ${s}: ${JSON.stringify(r.text)}`);
		}
		assert.equal(r.sc.result, null, 'an assignment last: no result: ' + show(r.sc.result));
	});

	test('final expression: its repr is the result; None and a trailing ";" are hidden', async () => {
		const cases = [
			['"abc"', "'abc'"],
			['y = 3\ny * 2', '6'],
			['[1, "two", {"three": 3.0}]', "[1, 'two', {'three': 3.0}]"],
			['import numpy as np\nnp.arange(3)', 'array([0, 1, 2])'],
			['None', null],
			['print("side effect")', null],
			['y * 7;', null],
			['y = 10', null],
			['def f():\n    return 5\nf()', '5'],
			['for i in range(3):\n    pass', null],
		];
		for (const [code, want] of cases) {
			const r = await execPy(h, code);
			assert.equal(r.sc.status, 'ok', `${code}: ${show(r.sc)}`);
			assert.equal(r.sc.result, want, `${JSON.stringify(code)}: result ${show(r.sc.result)}`);
			if (want === null) assert.equal(r.sections.result, undefined, `${JSON.stringify(code)}: no result section expected: ${JSON.stringify(r.text)}`);
			else assert.equal(r.sections.result?.trim(), want, `${JSON.stringify(code)}: text ${JSON.stringify(r.text)}`);
		}
		const s = await execPy(h, 'print("side effect")');
		assert.equal(s.sc.stdout, 'side effect\n');
	});

	test('a Python exception: status error, exit 1, type/message, user-only traceback, state kept', async () => {
		await execPy(h, 'before_err = "kept"');
		const code = 'def boom_here():\n    return 1 / 0\n\nset_before = 1\nboom_here()\nset_after = 2';
		const r = await execPy(h, code);
		assert.equal(r.res.isError, true);
		assert.equal(r.sc.status, 'error', show(r.sc));
		assert.equal(r.sc.exit_code, 1);
		assert.equal(r.head?.status, 'error', r.text.split('\n')[0]);
		assert.equal(r.head.exit, 1);
		assert.equal(r.sc.error?.type, 'ZeroDivisionError', show(r.sc.error));
		assert.match(r.sc.error.message, /division by zero/);
		const tb = r.sc.error.traceback;
		assert.equal(typeof tb, 'string');
		assert.match(tb, /boom_here/, tb);
		assert.match(tb, /return 1 \/ 0/, `the traceback shows the user's source line: ${tb}`);
		assert.match(tb, /ZeroDivisionError/, tb);
		assert.doesNotMatch(tb, /bootstrap|runpy|exec\(|compile\(|\.py", line \d+, in _/i, `server frames in the traceback: ${tb}`);
		const frames = tb.split('\n').filter((l) => /^\s*File "/.test(l));
		assert.equal(frames.length, 2, `exactly the user's two frames expected:\n${tb}`);
		assert.ok(r.sections.error?.includes('ZeroDivisionError'), `text error section: ${JSON.stringify(r.text)}`);
		assert.ok(r.sc.error.denied_by === null || r.sc.error.denied_by === undefined, show(r.sc.error));
		// Notebook semantics: what ran before the exception is kept, nothing after it ran.
		const k = await execPy(h, '(before_err, set_before, "set_after" in globals())');
		assert.equal(k.sc.result, "('kept', 1, False)", show(k.sc));
		assert.equal(k.sc.state, 'kept');
	});

	test('a SyntaxError is an error result naming the line', async () => {
		const r = await execPy(h, 'a = 1\nb = (2 +\n');
		assert.equal(r.sc.status, 'error', show(r.sc));
		assert.equal(r.sc.exit_code, 1);
		assert.equal(r.sc.error.type, 'SyntaxError');
		assert.doesNotMatch(r.sc.error.traceback, /bootstrap/i, r.sc.error.traceback);
		const k = await execPy(h, '"a" in globals()');
		assert.equal(k.sc.result, 'False', 'nothing of a cell with a syntax error runs');
	});

	test('an exception raised by the user (custom class, nested call) keeps its type and message', async () => {
		const r = await execPy(h, 'class MyErr(Exception):\n    pass\ndef g():\n    raise MyErr("custom message 123")\ndef f():\n    g()\nf()');
		assert.equal(r.sc.error?.type, 'MyErr', show(r.sc.error));
		assert.equal(r.sc.error.message, 'custom message 123');
		const frames = r.sc.error.traceback.split('\n').filter((l) => /^\s*File "/.test(l));
		assert.equal(frames.length, 3, r.sc.error.traceback);
	});

	// What JSON cannot carry (a lone surrogate), or a message of megabytes:
	// the error as raised, cut to fit, never a result the server refuses.
	test('an exception whose message holds a lone surrogate, or is 10 MB long, is an error result, not a crash', { timeout: 60000 }, async () => {
		await execPy(h, 'kept_here = 3');
		let r = await execPy(h, 'raise ValueError("bad \\udcff byte")');
		assert.deepEqual([r.sc.status, r.sc.error?.type], ['error', 'ValueError'], show(r.sc));
		assert.match(r.sc.error.message, /^bad .udcff byte$/, show(r.sc.error));
		r = await execPy(h, 'raise ValueError("x" * 10_000_000)');
		assert.deepEqual([r.sc.status, r.sc.error?.type], ['error', 'ValueError'], show(r.sc));
		assert.match(r.sc.error.message, /characters omitted/, show(r.sc.error.message.slice(0, 300)));
		r = await execPy(h, 'kept_here');
		assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', '3', 'kept'], show(r.sc));
	});

	test('SystemExit and sys.exit do not end the session or the server', async () => {
		await execPy(h, 'survivor = 7');
		const r = await execPy(h, 'import sys\nsys.exit(3)');
		assert.notEqual(r.sc.status, 'ok', show(r.sc));
		const k = await execPy(h, 'survivor');
		assert.equal(k.sc.result, '7', show(k.sc));
	});

	test('named sessions are isolated; the status line names the session', async () => {
		await execPy(h, 'shared_name = "alpha"', { session: 'alpha' });
		await execPy(h, 'shared_name = "beta"', { session: 'beta-2_B' });
		const a = await execPy(h, 'shared_name', { session: 'alpha' });
		const b = await execPy(h, 'shared_name', { session: 'beta-2_B' });
		assert.equal(a.sc.result, "'alpha'");
		assert.equal(b.sc.result, "'beta'");
		assert.equal(a.head.session, 'alpha');
		assert.equal(b.head.session, 'beta-2_B');
		assert.equal(a.sc.session, 'alpha');
		const d = await execPy(h, '"shared_name" in globals()');
		assert.equal(d.sc.result, 'False', 'the default session does not see other sessions\' names');
		const pa = await execPy(h, 'import os\nos.getpid()', { session: 'alpha' });
		const pb = await execPy(h, 'import os\nos.getpid()', { session: 'beta-2_B' });
		assert.notEqual(pa.sc.result, pb.sc.result, 'each session is its own process');
		const ps = await execPy(h, 'import os\nos.getpid()');
		assert.notEqual(Number(ps.sc.result), h.pid, 'Python never runs in the server process');
	});

	test('reset: true clears the session\'s state; other sessions keep theirs', async () => {
		await execPy(h, 'keep_me = 1', { session: 'resetme' });
		await execPy(h, 'other_keep = 2', { session: 'untouched' });
		const r = await execPy(h, '"keep_me" in globals()', { session: 'resetme', reset: true });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, 'False', show(r.sc));
		assert.equal(r.sc.state, 'new', 'a reset session starts as "new"');
		const u = await execPy(h, 'other_keep', { session: 'untouched' });
		assert.equal(u.sc.result, '2');
		const again = await execPy(h, 'import numpy as np\nnp.__name__', { session: 'resetme' });
		assert.equal(again.sc.result, "'numpy'", 'imports still work after a reset');
	});

	test('random and numpy.random are seeded alike in every fresh session (seed 0)', async () => {
		const code = 'import random, numpy\n(random.random(), float(numpy.random.rand()), random.randint(0, 10**9))';
		const a = await execPy(h, code, { session: 'seed_a' });
		const b = await execPy(h, code, { session: 'seed_b' });
		assert.equal(a.sc.status, 'ok', show(a.sc));
		assert.equal(a.sc.result, b.sc.result, 'two fresh sessions give the same random numbers');
		const c = await execPy(h, code, { session: 'seed_a', reset: true });
		assert.equal(c.sc.result, a.sc.result, 'a reset session is seeded again');
		const d = await execPy(h, code, { session: 'seed_a' });
		assert.notEqual(d.sc.result, a.sc.result, 'the generator advances within a session');
		// seed 0: random.seed(0) and numpy.random.seed(0)
		const [r1, r2] = a.sc.result.replace(/[()]/g, '').split(',').map((v) => Number(v));
		assert.equal(r1, 0.8444218515250481, `random.random() after random.seed(0): ${a.sc.result}`);
		assert.equal(r2, 0.5488135039273248, `numpy.random.rand() after numpy.random.seed(0): ${a.sc.result}`);
	});

	// A child forked by the cell that reaches the cell's end (an exception,
	// a MemoryError, or no os._exit) ends there: its traceback goes to
	// stderr and it never speaks for the session, whose own result stands.
	test('a forked child that falls out of the cell ends there; the parent\'s result stands', async () => {
		const code = [
			'import os',
			'kids, codes = [], None',
			'for how in ("raise", "memory", "falls through"):',
			'    p = os.fork()',
			'    if p == 0:',
			'        if how == "raise": raise ValueError("in the child")',
			'        if how == "memory": raise MemoryError()',
			'        print("child fell through")',
			'        break',
			'    kids.append(p)',
			'else:',
			'    codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]',
			'    print("parent saw", codes)',
			'"parent"',
		].join('\n');
		const r = await execPy(h, code + '\nkids_seen = codes', { session: 'forks' });
		assert.deepEqual([r.sc.status, r.sc.result, r.sc.state], ['ok', null, 'new'], show(r.sc));
		assert.match(r.sc.stdout, /parent saw \[1, 1, 0\]/, show(r.sc));
		assert.match(r.sc.stdout, /child fell through/);
		assert.match(r.sc.stderr, /a process forked by this cell \(pid \d+\) reached the end of the cell with an exception[^]*ValueError: in the child/, show(r.sc));
		assert.match(r.sc.stderr, /MemoryError/);
		const n = await execPy(h, 'kids_seen', { session: 'forks' });
		assert.deepEqual([n.sc.status, n.sc.result, n.sc.state], ['ok', '[1, 1, 0]', 'kept'], show(n.sc));
	});

	// A crash names its signal and, from Python's faulthandler, the line
	// that was running (and the library frame below it), rolled back.
	test('a segfault names SIGSEGV and the line that was running; an abort names SIGABRT', { timeout: 60000 }, async () => {
		assert.equal((await execPy(h, 'crash_kept = 5', {})).sc.status, 'ok');
		const r = await execPy(h, 'import ctypes, sys\nprint("before", file=sys.stderr)\ndef f():\n    return ctypes.string_at(0)\nf()', {});
		assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['crashed', 139, 'rolled_back'], show(r.sc));
		assert.equal(r.sc.error.type, 'SIGSEGV', show(r.sc.error));
		assert.match(r.sc.error.message, /killed by SIGSEGV \(segmentation fault/);
		assert.match(r.sc.error.message, /in string_at \(ctypes\/__init__\.py, line \d+\), called from <cell \d+> line 4 in f/, r.sc.error.message);
		assert.match(r.sc.error.traceback, /File "<cell \d+>", line 4 in f\n\s*File "<cell \d+>", line 5 in <module>/, r.sc.error.traceback);
		assert.doesNotMatch(r.sc.error.traceback, /psm-bootstrap|Extension modules|0x[0-9a-f]{8}/);
		assert.equal(r.sc.stderr, 'before\n', 'the report moved from stderr into the error');
		assert.match(r.text, /\nerror:\nSIGSEGV: the session's process was killed by SIGSEGV/);
		const a = await execPy(h, 'import os\nos.abort()', {});
		assert.deepEqual([a.sc.status, a.sc.exit_code, a.sc.error.type], ['crashed', 134, 'SIGABRT'], show(a.sc));
		assert.match(a.sc.error.message, /abort/);
		const k = await execPy(h, 'crash_kept', {});
		assert.equal(k.sc.result, '5', show(k.sc));
	});

	test('matplotlib uses Agg, numpy/pandas import, cwd is the project root', async () => {
		const r = await execPy(h, 'import os, matplotlib, pandas, numpy\n(matplotlib.get_backend().lower(), os.getcwd())');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, `('agg', '${h.root}')`, show(r.sc));
	});
});

describe('execute_python input errors', () => {
	let h;
	before(async () => { h = await startClient(newProject('exec-in'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('a session name outside ^[A-Za-z0-9_-]{1,64}$ is an input error naming the pattern', async () => {
		for (const session of ['bad name', 'dots.not.ok', '../etc', '', 'x'.repeat(65), 'é', 'a/b']) {
			const res = await callTool(h, 'execute_python', { code: '1', session });
			assert.equal(res.isError, true, `${JSON.stringify(session)}: ${show(res)}`);
			const text = res.content.find((b) => b.type === 'text')?.text || '';
			assert.ok(text.includes('A-Za-z0-9_-'), `${JSON.stringify(session)}: the message must give the allowed pattern: ${text}`);
		}
		const ok = await execPy(h, '1', { session: 'x'.repeat(64) });
		assert.equal(ok.sc.status, 'ok', '64 characters are allowed');
	});

	test('arguments of the wrong type are input errors that name the argument', async () => {
		const cases = [
			[{}, /code/],
			[{ code: 42 }, /code/],
			[{ code: null }, /code/],
			[{ code: '1', session: 5 }, /session/],
			[{ code: '1', timeout_s: 'soon' }, /timeout_s/],
			[{ code: '1', timeout_s: -1 }, /timeout_s/],
			[{ code: '1', timeout_s: 0 }, /timeout_s/],
			[{ code: '1', reset: 'yes' }, /reset/],
		];
		for (const [args, re] of cases) {
			const res = await callTool(h, 'execute_python', args);
			assert.equal(res.isError, true, `${show(args)}: ${show(res)}`);
			const text = res.content.find((b) => b.type === 'text')?.text || '';
			assert.match(text, re, `${show(args)}: ${text}`);
		}
	});

	test('code over 2 MiB is an input error; code just under it runs', { timeout: 60000 }, async () => {
		const big = 'x = 1\n#' + 'a'.repeat(MAX_CODE);
		const res = await callTool(h, 'execute_python', { code: big });
		assert.equal(res.isError, true, show(res));
		const text = res.content.find((b) => b.type === 'text')?.text || '';
		assert.match(text, /2\s*MiB|2097152|2048\s*KiB|2\s*MB/i, `the message must say the limit: ${text.slice(0, 500)}`);
		const fine = 'x = 1\n#' + 'a'.repeat(MAX_CODE - 64 * 1024) + '\nx + 1';
		const r = explain(await callTool(h, 'execute_python', { code: fine }));
		assert.equal(r.sc?.status, 'ok', show(r.res));
		assert.equal(r.sc.result, '2');
	});

	test('more sessions than limits.max_sessions (8) is an input error naming the limit', async () => {
		const results = [];
		for (let i = 0; i < 9; i++) results.push(await callTool(h, 'execute_python', { code: '1', session: `many_${i}` }));
		const refused = results.filter((r) => r.isError);
		assert.ok(refused.length >= 1, 'a ninth session must be refused');
		const text = refused[0].content.find((b) => b.type === 'text')?.text || '';
		assert.match(text, /max_sessions/, text);
		// The message says what really frees a slot, and names the sessions
		// to reuse.  Before, it said "reset one", which freed nothing.
		assert.doesNotMatch(text, /reset one/, text);
		assert.match(text, /holds 8: [^\n]*many_0/, text);
		assert.match(text, /reset: true empties a session but keeps its slot/, text);
		const again = await execPy(h, '2', { session: 'many_0', reset: true });
		assert.equal(again.sc.result, '2', 'existing sessions keep working');
		// As it says: the reset freed no slot.
		const still = await callTool(h, 'execute_python', { code: '1', session: 'many_new' });
		assert.equal(still.isError, true, show(still));
		assert.match(still.content[0].text, /cannot start session "many_new"/);
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});
