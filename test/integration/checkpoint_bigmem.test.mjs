// Large NumPy arrays in mappings of their own, in sessions that take
// checkpoints (interp/bigmem.h): a block freed after a checkpoint is never
// reused by the next large array, which would copy 4 kB at a time the
// pages the checkpoint still shares.  Through the real binary: NumPy names
// the allocator, the arrays it makes hold their values through growth,
// zeroing, threads and a rollback, and the copies are gone.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { newProject, startClient, execPy, writeFile, SKILL, show } from './lib.mjs';

const NAME = 'python-sandbox-mcp: large arrays mapped alone';

describe('large arrays with checkpoints', () => {
	let h;
	before(async () => { h = await startClient(newProject('bigmem'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('NumPy reports the allocator, and a large array starts on a 2 MiB boundary', { timeout: 120000 }, async () => {
		const r = await execPy(h, [
			'import numpy as np',
			'a = np.ones(4_000_000)',
			'(np.core.multiarray.get_handler_name(), a.ctypes.data % (2 << 20), np.core.multiarray.get_handler_name(a))',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, `('${NAME}', 0, '${NAME}')`);
	});

	test('values hold through growth, zeroing, an array made by a thread, and a rollback', { timeout: 120000 }, async () => {
		const r = await execPy(h, [
			'import numpy as np, threading',
			'g = np.arange(300_000, dtype=np.float64)',          // malloc'd, then grown past 2 MiB
			'g.resize(3_000_000, refcheck=False)',
			'm = np.arange(3_000_000, dtype=np.float64)',        // mapped, then grown and shrunk
			'm.resize(5_000_000, refcheck=False)',
			'm2 = np.arange(3_000_000, dtype=np.float64)',
			'm2.resize(1_000, refcheck=False)',
			'z = np.zeros(6_000_000)',
			't = {}',
			'th = threading.Thread(target=lambda: t.setdefault("x", np.full(3_000_000, 2.0)))',
			'th.start(); th.join()',
			'c = t.pop("x") * 1.5',
			'(float(g[:300_000].sum()), float(g[300_000:].sum()), float(m[:3_000_000].sum()), float(m[3_000_000:].sum()),',
			' float(m2.sum()), float(z.sum()), float(c.sum()))',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, '(44999850000.0, 0.0, 4499998500000.0, 0.0, 499500.0, 0.0, 9000000.0)');
		// Rewritten in place and stopped: the checkpoint's copy is what
		// comes back.
		const t = await execPy(h, 'import time\nm[:] = 7\nc[:] = 7\ntime.sleep(30)', { timeout_s: 1 });
		assert.equal(t.sc.status, 'timeout', show(t.sc));
		assert.equal(t.sc.state, 'rolled_back', show(t.sc));
		const v = await execPy(h, 'float(m[:3_000_000].sum()), float(c.sum())');
		assert.equal(v.sc.result, '(4499998500000.0, 9000000.0)', show(v.sc));
	});

	test('a large array freed after a checkpoint is not reused by the next one (no copy per 4 kB)', { timeout: 120000 }, async () => {
		// glibc puts a block below its mmap threshold in its heap, and the
		// threshold rises to 31 MB once a block that large is freed: then
		// a 30 MB array lives in the heap, and the next one, allocated
		// after `del`, reuses its pages, which the checkpoint taken in
		// between shares.  7,300 pages copied one fault at a time with
		// NumPy's default allocator; a fresh mapping is a fault per 2 MiB.
		const setup = await execPy(h, [
			'import numpy as np, resource',
			'x = np.ones(3_900_000); del x',
			'a = np.ones(3_800_000)',
			'open("workspace/forces-a-checkpoint.txt", "w").write("a file written: the call is followed by a checkpoint")',
		].join('\n'));
		assert.equal(setup.sc.status, 'ok', show(setup.sc));
		const r = await execPy(h, [
			'del a',
			'b = np.empty(3_800_000)',
			'f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt',
			'b[:] = 1',
			'resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const faults = Number(r.sc.result);
		assert.ok(faults < 1500, `writing a fresh 30 MB array took ${faults} minor faults (7,300 would be a copy per 4 kB)`);
	});
});

describe('large arrays without checkpoints', () => {
	let h;
	before(async () => {
		const root = newProject('bigmem-off');
		const skill = writeFile(root, 'policy/SKILL.md', SKILL.replace('checkpoint: true', 'checkpoint: false'));
		fs.mkdirSync(path.join(root, 'workspace'), { recursive: true });
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	test('NumPy keeps its default allocator: a freed block is reused at no cost there', { timeout: 120000 }, async () => {
		const r = await execPy(h, 'import numpy as np\nnp.core.multiarray.get_handler_name()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, "'default_allocator'");
	});
});
