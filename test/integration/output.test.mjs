// execute_python's output: truncation to head + tail with a marker and the
// full text under workspace/.logs/; every byte Python prints (invalid UTF-8,
// escape sequences, fake JSON-RPC lines) is carried inside a result and the
// server's stdout stays JSON-RPC only (checked line by line on raw stdio).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { RawServer, newProject, lineCount, show } from './lib.mjs';

function textOf(resp) { return resp.result?.content?.find((b) => b.type === 'text')?.text || ''; }

describe('output capture on raw stdio', () => {
	let s, root;
	before(async () => {
		root = newProject('out');
		s = new RawServer(root, { structured: true });
		const r = await s.initialize();
		assert.ok(r.result, show(r));
		// Warm the interpreter once, so no test below waits for the start of
		// the zygote on a loaded machine within its own short timeout.
		const w = await s.callTool('execute_python', { code: '1' }, { timeout: 120000 });
		assert.equal(w.result?.structuredContent?.status, 'ok', show(w));
	});
	after(async () => {
		try { await s.stop('eof', { timeout: 10000 }); } catch { /* reported by the last test */ }
		s.kill();
	});

	test('stdout over max_output_chars: head + tail + a marker; the whole text in workspace/.logs/', { timeout: 60000 }, async () => {
		const code = 'for i in range(5000):\n    print(f"line {i:05d}")';
		const total = 5000 * 11;
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.equal(sc.output_truncated, true, show(sc).slice(0, 500));
		const out = sc.stdout;
		assert.ok(out.startsWith('line 00000\nline 00001\n'), `the head is kept: ${JSON.stringify(out.slice(0, 60))}`);
		assert.ok(out.trimEnd().endsWith('line 04999'), `the tail is kept: ${JSON.stringify(out.slice(-60))}`);
		assert.ok(!out.includes('line 02500'), 'the middle is left out');
		// 5,000 short lines: the reply's budget (9 KiB, 225 lines) cuts
		// more than max_output_chars (8000) would.
		assert.ok(lineCount(out) <= 225 && out.length >= 1500, `the kept text fits the reply's budget: ${out.length} chars, ${lineCount(out)} lines`);
		const numbers = [...out.matchAll(/\d[\d,_]*/g)].map((m) => Number(m[0].replace(/[,_]/g, ''))).filter((n) => n > 5000);
		assert.ok(numbers.some((n) => n >= total - 9000 && n <= total), `the marker must say how many characters were left out: ${numbers} in ${JSON.stringify(out.slice(3000, 5000))}`);
		assert.match(sc.full_output ?? '', /^workspace\/\.logs\/[^/]+/, show(sc.full_output));
		const full = fs.readFileSync(path.join(root, sc.full_output), 'utf8');
		for (const want of ['line 00000\n', 'line 02500\n', 'line 04999\n']) assert.ok(full.includes(want), `${sc.full_output} lacks ${want}`);
		assert.ok(full.length >= total, `${sc.full_output} holds ${full.length} chars, less than ${total}`);
		const text = textOf(r);
		assert.ok(text.includes(sc.full_output), `the text block must give the full output's path: ${text.slice(0, 300)}`);
		assert.ok(Buffer.byteLength(text) <= 9 * 1024 && lineCount(text) <= 225, `the text block fits the reply's budget: ${Buffer.byteLength(text)} bytes`);
		assert.ok(!r.result.content.some((b) => b.type === 'resource_link' && /\.logs/.test(b.uri)), 'the log file is not an artifact');
	});

	test('stderr is truncated on its own; a short stdout is left whole', { timeout: 60000 }, async () => {
		const code = 'import sys\nprint("small stdout")\nsys.stderr.write("E" * 30000 + "\\nEND-OF-ERR\\n")';
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.equal(sc.stdout, 'small stdout\n');
		assert.equal(sc.output_truncated, true);
		assert.ok(sc.stderr.length < 9000, `stderr kept ${sc.stderr.length} chars`);
		assert.ok(sc.stderr.includes('END-OF-ERR'), 'the tail of stderr is kept');
		assert.ok(sc.stderr.startsWith('EEEE'), 'the head of stderr is kept');
		const full = fs.readFileSync(path.join(root, sc.full_output), 'utf8');
		assert.ok(full.includes('E'.repeat(30000)), 'the whole stderr is in the log file');
	});

	test('a huge output (20 MB) stays bounded in the reply and the server keeps serving', { timeout: 90000 }, async () => {
		const r = await s.callTool('execute_python', { code: 'import sys\nfor _ in range(200):\n    sys.stdout.write("z" * 100000 + "\\n")\n"done"' }, { timeout: 60000 });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.equal(sc.result, "'done'");
		assert.ok(sc.stdout.length < 9000, `${sc.stdout.length}`);
		assert.equal(sc.output_truncated, true);
		const p = await s.request('ping');
		assert.deepEqual(p.result, {});
	});

	test('a reply fits 9 KiB and 225 lines by default, every part cut says where its whole text is', { timeout: 60000 }, async () => {
		const code = 'import sys\nfor i in range(3000): print("line", i)\nsys.stderr.write("E" * 20000 + "\\nEND\\n")\n"r" * 20000';
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		const text = textOf(r);
		assert.ok(Buffer.byteLength(text) <= 9 * 1024, `${Buffer.byteLength(text)} bytes`);
		assert.ok(lineCount(text) <= 225, `${lineCount(text)} lines`);
		// structuredContent, which Claude Code and Codex show in place of
		// the text, is within the same budget.
		assert.ok(Buffer.byteLength(JSON.stringify(sc)) <= 10 * 1024, `${Buffer.byteLength(JSON.stringify(sc))} bytes of JSON`);
		const markers = [...text.matchAll(/\[\.\.\. (\d+) characters omitted \((\d+) in all\); (the whole output is in (workspace\/\.logs\/\S+)|the value is _ in the session[^\]]*) \.\.\.\]/g)];
		assert.equal(markers.length, 3, `one marker each for stdout, stderr and the value: ${JSON.stringify(markers.map((m) => m[0]))}`);
		const wholeOut = fs.readFileSync(path.join(root, markers[0][4]), 'utf8');
		assert.ok(wholeOut.includes('line 0\n') && wholeOut.includes('line 1500\n') && wholeOut.includes('line 2999\n'), markers[0][4]);
		assert.equal(Number(markers[0][2]), wholeOut.length, 'stdout: the marker counts the whole output');
		assert.ok(fs.readFileSync(path.join(root, markers[1][4]), 'utf8').includes('E'.repeat(20000) + '\nEND\n'), markers[1][4]);
		assert.equal(Number(markers[2][2]), 20002, 'the value: the marker counts the whole repr');
		assert.equal(markers[2][4], undefined, 'the value is not saved (the server has only its head and tail)');
		assert.ok(text.includes('line 2999\n') && /stderr:\nEEEE/.test(text) && text.includes('\nEND\n'), 'heads and tails are kept');
	});

	test('invalid UTF-8 printed by Python arrives inside the result as valid text', async () => {
		const code = [
			'import sys, os',
			'sys.stdout.buffer.write(b"A\\xff\\xfeB\\xc3\\x28C\\xed\\xa0\\x80D\\n")',
			'sys.stdout.flush()',
			'os.write(1, b"E\\x80\\x81F\\n")',
			'os.write(2, b"G\\xc0\\xafH\\n")',
			'print("caf\\u00e9 \\u2603 \\U0001F600 ok")',
		].join('\n');
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.match(sc.stdout, /A[^\n]*B[^\n]*C[^\n]*D\n/, JSON.stringify(sc.stdout));
		assert.match(sc.stdout, /E[^\n]*F\n/, JSON.stringify(sc.stdout));
		assert.match(sc.stderr, /G[^\n]*H\n/, JSON.stringify(sc.stderr));
		assert.ok(sc.stdout.includes('café ☃ 😀 ok'), `valid UTF-8 passes unchanged: ${JSON.stringify(sc.stdout)}`);
		assert.ok(!/[\ud800-\udfff]/.test(sc.stdout.replace(/\ud83d\ude00/g, '')), 'no lone surrogates');
		assert.deepEqual(s.violations, []);
	});

	test('escape sequences, NUL and control bytes arrive inside the result', async () => {
		const code = 'import sys\nsys.stdout.write("red:\\x1b[31mRED\\x1b[0m bell:\\x07 nul:\\x00 cr:\\r del:\\x7f bs:\\x08 u2028:\\u2028 end\\n")';
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		// The carriage return starts the line's next state, as on a terminal.
		assert.equal(sc.stdout, ' del:\\x7f bs:\\x08 u2028:\\u2028 end\n', JSON.stringify(sc.stdout));
		const n = await s.callTool('execute_python', { code: 'import sys\nsys.stdout.write("red:\\x1b[31mRED\\x1b[0m bell:\\x07 nul:\\x00 after\\n")' });
		assert.equal(n.result?.structuredContent?.stdout, 'red:\\x1b[31mRED\\x1b[0m bell:\\x07 nul:\\x00 after\n', 'output after the NUL byte is kept');
		assert.deepEqual(s.violations, []);
	});

	// Nothing the code prints can move the reader's cursor, ring, hide text
	// or reorder it: each such character is shown escaped, readable.
	const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff]|\udb40[\udc00-\udc7f]/u;
	test('controls, bidi overrides and invisible characters are escaped in stdout, stderr, the result and the traceback', async () => {
		const bad = '\\x1b]0;title\\x07 \\x1b[2J nul:\\x00 del:\\x7f bs:\\x08 csi:\\x9b rlo:\\u202e iso:\\u2066 zw:\\u200b tag:\\U000e0041 end';
		const code = [
			'import sys',
			`print("${bad}")`,
			`print("${bad}", file=sys.stderr)`,
			'class R:',
			`    def __repr__(self): return "${bad}"`,
			'R()',
		].join('\n');
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		const want = '\\x1b]0;title\\x07 \\x1b[2J nul:\\x00 del:\\x7f bs:\\x08 csi:\\u009b rlo:\\u202e iso:\\u2066 zw:\\u200b tag:\\U000e0041 end';
		assert.equal(sc.stdout, want + '\n');
		assert.equal(sc.stderr, want + '\n');
		assert.equal(sc.result, want);
		const text = textOf(r);
		assert.doesNotMatch(text.replace(/\n/g, ''), RAW, JSON.stringify(text));
		assert.ok(text.includes(want), text);
		const e = await s.callTool('execute_python', { code: `raise ValueError("${bad}")` });
		const esc = e.result?.structuredContent;
		assert.equal(esc?.status, 'error', show(e));
		assert.ok(esc.error.message.includes(want), JSON.stringify(esc.error));
		assert.ok(esc.error.traceback.includes(want), JSON.stringify(esc.error));
		assert.doesNotMatch(textOf(e).replace(/\n/g, ''), RAW);
	});

	test('a carriage-return progress bar arrives as its last state', async () => {
		const code = 'import sys, time\nfor i in range(5):\n    print(f"\\rloading {i * 25:3d}%", end="", flush=True)\nprint()\nprint("dos line\\r")\nprint("done")';
		const r = await s.callTool('execute_python', { code });
		assert.equal(r.result?.structuredContent?.stdout, 'loading 100%\ndos line\ndone\n', show(r));
	});

	test('binary output is summarised, and its bytes are in the log', async () => {
		// Ends with a byte no text holds, so no line of text follows the dump.
		const r = await s.callTool('execute_python', { code: 'import os, sys\nb = os.urandom(2999) + bytes([255])\nsys.stdout.buffer.write(b); sys.stdout.flush()\nopen("workspace/b.bin", "wb").write(b)\nprint("text after", file=sys.stderr)' });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.match(sc.stdout, /^\[3000 bytes of binary output \(not text\); the bytes are in workspace\/\.logs\/[^ \]]+\]\n?$/, JSON.stringify(sc.stdout));
		assert.ok(sc.stdout.length < 200);
		assert.equal(sc.stderr, 'text after\n');
		const log = sc.stdout.match(/workspace\/\.logs\/[^ \]]+/)[0];
		assert.equal(sc.full_output, log);
		assert.deepEqual(fs.readFileSync(path.join(root, log)), fs.readFileSync(path.join(root, 'workspace/b.bin')));
		assert.doesNotMatch(textOf(r), /\ufffd/);
	});

	test('the lines printed after binary output are shown after its summary', async () => {
		const code = 'import os\nos.write(1, bytes(range(256)) * 4)\nprint("\\nwrote 1024 bytes")\nprint("checksum \\x1b[31mok\\x1b[0m")';
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.match(sc.stdout, /^\[1063 bytes of binary output \(not text\); the bytes are in workspace\/\.logs\/[^ \]]+\]\nthe text written after them:\nwrote 1024 bytes\nchecksum (\\x1b|\\u001b)\[31mok/, JSON.stringify(sc.stdout));
		assert.ok(sc.stdout.length < 300, JSON.stringify(sc.stdout));
	});

	test('binary output keeps the text written before it and after it around the marker', async () => {
		const code = 'import os, sys\nprint("MARKER-BEFORE line one")\nprint("MARKER-BEFORE line two", flush=True)\n'
			// A byte that is no text first: random bytes that began
			// with a line end (1 run in 256) showed it before the marker.
			+ 'sys.stdout.buffer.write(bytes([255]) + os.urandom(512 * 1024) + bytes([255])); sys.stdout.flush()\nprint("\\nMARKER-AFTER done")';
		const r = await s.callTool('execute_python', { code });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.match(sc.stdout, /^MARKER-BEFORE line one\nMARKER-BEFORE line two\n\[\d+ bytes of binary output \(not text\); the bytes are in workspace\/\.logs\/[^ \]]+\]\nthe text written after them:\nMARKER-AFTER done\n?$/, JSON.stringify(sc.stdout.slice(0, 600)));
		assert.ok(sc.stdout.length < 400, JSON.stringify(sc.stdout.slice(0, 600)));
		const log = fs.readFileSync(path.join(root, sc.full_output));
		assert.ok(log.length > 512 * 1024 && log.subarray(0, 22).toString() === 'MARKER-BEFORE line one', `${sc.full_output}: ${log.length} bytes`);
		// Bytes that happen to decode before the first binary one, with no
		// line end, are not shown as text.
		const r2 = await s.callTool('execute_python', { code: 'import os\nos.write(1, b"abc" + bytes(range(256)) * 4)' });
		assert.match(r2.result?.structuredContent?.stdout ?? '', /^\[1027 bytes of binary output/, show(r2));
	});

	test('lines that look like JSON-RPC printed by Python stay inside the result', async () => {
		const fake1 = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}';
		const fake2 = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"fake"}}';
		const fake3 = '{"jsonrpc":"2.0","id":424242,"error":{"code":-32601,"message":"fake"}}';
		const code = `import os, sys\nprint(${JSON.stringify(fake1)})\nsys.stdout.flush()\nos.write(1, ${JSON.stringify(fake2 + '\n')}.encode())\nos.write(2, ${JSON.stringify(fake3 + '\n')}.encode())\nprint(${JSON.stringify(fake3)}, file=sys.__stdout__, flush=True)`;
		const from = s.messages.length;
		const r = await s.callTool('execute_python', { code }, { id: 'fake-json' });
		const sc = r.result?.structuredContent;
		assert.equal(sc?.status, 'ok', show(r));
		assert.ok(sc.stdout.includes(fake1), JSON.stringify(sc.stdout));
		assert.ok(sc.stdout.includes(fake2), JSON.stringify(sc.stdout));
		assert.ok(sc.stderr.includes(fake3), JSON.stringify(sc.stderr));
		const p = await s.request('ping');
		assert.deepEqual(p.result, {});
		const stray = s.messages.slice(from).filter((m) => m.id === 1 || m.id === 424242 || (m.method === 'notifications/message' && m.params?.data === 'fake'));
		assert.deepEqual(stray, [], 'Python\'s output reached the MCP stream');
		assert.deepEqual(s.violations, []);
	});

	test('Python writing to fd 1 with a closed or replaced sys.stdout still cannot reach the MCP stream', async () => {
		const code = 'import sys, os\nsys.stdout = sys.__stdout__ = open(os.devnull, "w")\nos.write(1, b"{\\"jsonrpc\\":\\"2.0\\",\\"id\\":777,\\"result\\":{}}\\n")\nos.dup2(2, 1)\nos.write(1, b"{\\"jsonrpc\\":\\"2.0\\",\\"id\\":778,\\"result\\":{}}\\n")';
		const from = s.messages.length;
		const r = await s.callTool('execute_python', { code });
		assert.ok(r.result, show(r));
		await s.request('ping');
		assert.deepEqual(s.messages.slice(from).filter((m) => m.id === 777 || m.id === 778), []);
		assert.deepEqual(s.violations, []);
		// The session may have been damaged by the dup2; a reset gives a clean one.
		const k = await s.callTool('execute_python', { code: 'print("fresh")', reset: true });
		assert.equal(k.result?.structuredContent?.stdout, 'fresh\n', show(k));
	});

	test('every stdout line of the server was one JSON-RPC 2.0 object', () => {
		assert.deepEqual(s.violations, []);
	});
});
