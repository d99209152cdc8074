// What reaches the model in an execute_python reply: the exception line
// always (folded and head-and-tail tracebacks), through the SDK client.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';
import { SKILL, projectWith, errorLines } from './reply_lib.mjs';


describe('tracebacks', () => {
	let h;
	before(async () => { h = await startClient(newProject('tb'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('deep recursion: frames fold as CPython folds them, RecursionError is the last line', async () => {
		const r = await execPy(h, 'import sys\nsys.setrecursionlimit(5000)\ndef f(n):\n    return f(n+1)\nf(0)');
		assert.equal(r.head.status, 'error', show(r.text));
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^RecursionError: maximum recursion depth exceeded/, show(r.text));
		assert.match(r.sections.error, /\[Previous line repeated \d{3,} more times\]/, show(r.text));
		assert.ok(r.text.length < 2000, `the reply is short once folded: ${r.text.length} chars`);
		assert.equal(r.sc.error.type, 'RecursionError');
		assert.match(r.sc.error.traceback, /RecursionError: maximum recursion depth exceeded\n?$/);
	});

	test('mutual recursion through a library frame folds as a repeated block', async () => {
		const code = [
			'import copy',
			'class Node:',
			'    def __deepcopy__(self, memo):',
			'        return copy.deepcopy(Node(), memo)',
			'copy.deepcopy(Node())',
		].join('\n');
		const r = await execPy(h, code);
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^RecursionError: /, show(r.text));
		assert.match(r.sections.error, /\[Previous \d lines repeated \d+ more times\]/, show(r.text));
		assert.ok(r.text.length < 3000, `folded: ${r.text.length} chars`);
	});
});

describe('tracebacks under a small max_output_chars', () => {
	let h;
	before(async () => {
		const [root, skill] = projectWith('tbsmall', [['max_output_chars: 8000', 'max_output_chars: 1500']]);
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	test('a long traceback of distinct frames keeps its head and its tail; the exception line is last', async () => {
		// 300 distinct functions calling each other: nothing to fold.
		const defs = [];
		for (let i = 0; i < 300; i++) defs.push(`def g${i}():\n    return g${i + 1}()`);
		defs.push('def g300():\n    raise ValueError("the bottom was reached")');
		const r = await execPy(h, defs.join('\n') + '\ng0()');
		const lines = errorLines(r);
		assert.equal(lines[lines.length - 1], 'ValueError: the bottom was reached', show(r.text));
		assert.equal(lines[0], 'Traceback (most recent call last):', 'the head is kept');
		assert.match(r.sections.error, /omitted|cut/, 'a marker says what was left out');
		assert.match(r.sections.error, /in g299/, 'the tail frames are kept');
		assert.ok(r.sections.error.length < 2500, `about max_output_chars: ${r.sections.error.length}`);
	});

	test('a refusal: the exception line, then denied_by and the hint, end the section', async () => {
		const defs = [];
		for (let i = 0; i < 200; i++) defs.push(`def w${i}():\n    return w${i + 1}()`);
		defs.push('def w200():\n    open("not-in-workspace.txt", "w")');
		const r = await execPy(h, defs.join('\n') + '\nw0()');
		const lines = errorLines(r);
		const n = lines.length;
		assert.match(lines[n - 3], /^(PermissionError|OSError): /, show(r.text));
		assert.equal(lines[n - 2], 'denied_by: fs_write');
		assert.match(lines[n - 1], /denied by the sandbox policy/);
	});

	test('a huge exception message keeps its type at the start of the last line', async () => {
		const r = await execPy(h, 'raise KeyError("k" * 50000)');
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^KeyError: 'kkkk.*omitted.*kkkk'$/, show(r.text));
		assert.ok(r.text.length < 4000, `bounded: ${r.text.length}`);
	});
});
