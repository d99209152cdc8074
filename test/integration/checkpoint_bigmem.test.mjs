// Large NumPy arrays in mappings of their own, in sessions that take
// checkpoints (interp/bigmem.h): a block freed after a checkpoint is never
// reused by the next large array, which would copy 4 kB at a time the
// pages the checkpoint still shares.  Through the real binary: NumPy names
// the allocator, the arrays it makes hold their values through growth,
// zeroing, threads and a rollback, and the copies are gone.  Without
// checkpoints the allocator is there only where the host takes freed
// memory back, for the page size of a fresh array after a rest, and
// leaves arrays made back to back to glibc.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { SANITIZED, newProject, startClient, execPy, writeFile, SKILL, show, checkpointCells, sleep, sessionProcs } from './lib.mjs';

const NAME = 'python-sandbox-mcp: large arrays mapped alone';
/** Without checkpoints, where the host takes freed memory back. */
const HOT_NAME = 'python-sandbox-mcp: large arrays mapped alone after a rest';
/** A cell line defining rss(): the session's resident memory, MB. */
const RSS = 'def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20';

/** A cell's result, a tuple of numbers and booleans, as an array. */
const tuple = (result) => JSON.parse(result.replace('(', '[').replace(')', ']').replaceAll('True', 'true').replaceAll('False', 'false'));

/** Whether this machine's host takes freed memory back: a VM whose
 * balloon reports free pages (virtio feature bit 5) discards memory freed
 * a second ago, and a huge page written there again costs ten to twenty
 * times a hot one; small pages cost the same either way.  Read from the
 * host as the zygote reads it.  Whether small pages then pay also hangs on
 * what a small page's fault costs on the machine, which the zygote
 * measures: the clients below set it (CHEAP_FAULT, DEAR_FAULT), so that
 * each path runs on any machine. */
function hostTakesFreed() {
	let reports = false;
	const drv = '/sys/bus/virtio/drivers/virtio_balloon';
	try {
		for (const d of fs.readdirSync(drv).filter((e) => e.startsWith('virtio')))
			try { reports ||= fs.readFileSync(path.join(drv, d, 'features'), 'utf8')[5] === '1'; } catch { /* no features */ }
	} catch { /* no balloon driver */ }
	return reports;
}

/** The zygote's measure of a small page's fault, set: 1 us (small pages
 * after a rest pay where the host takes freed memory back), 20 us (dearer
 * than a huge page the host took back: huge pages at any age). */
const CHEAP_FAULT = { PSM_TEST_ZYGOTE_FAULT_US: '1' };
const DEAR_FAULT = { PSM_TEST_ZYGOTE_FAULT_US: '20' };

/** A cell that maps a fresh 272 MB array right after freeing as much, and
 * another after 1.5 s of rest, and gives whether each mapping was advised
 * for huge pages (`hg` in the VmFlags of the mapping that holds the
 * array's middle is MADV_HUGEPAGE), and whether the second was advised
 * against them (`nh`, MADV_NOHUGEPAGE: small pages also where the kernel
 * gives huge ones unasked, transparent_hugepage `always`): (hot, cold,
 * cold_small).  272 MB is over the 256 MB kept at most, so each array
 * freed is given back, never kept. */
const HOT_COLD = [
	'import numpy as np, time',
	'def flags(a):',
	'    p, cur = a.ctypes.data + a.nbytes // 2, False',
	'    for line in open("/proc/self/smaps"):',
	'        f = line.split()',
	'        if not f[0].endswith(":"):',
	'            lo, hi = (int(x, 16) for x in f[0].split("-")); cur = lo <= p < hi',
	'        elif cur and f[0] == "VmFlags:":',
	'            return f[1:]',
	'n = 34_000_000',
	'a = np.ones(n); del a',
	'b = np.ones(n); hot = "hg" in flags(b); del b',
	'time.sleep(1.5)',
	'c = np.ones(n); f = flags(c); cold, cold_small = "hg" in f, "nh" in f; del c',
	'(hot, cold, cold_small)',
].join('\n');

/** HOT_COLD's cell sent after a second of rest: [hot, cold, cold_small]. */
async function hotCold(h) {
	await sleep(1000);
	const r = await execPy(h, HOT_COLD, { timeout_s: 60 });
	assert.equal(r.sc.status, 'ok', show(r.sc));
	return tuple(r.sc.result);
}

/** Waits for the session's checkpoint of cell `cell` (a cell that wrote a
 * workspace file is always followed by one). */
async function checkpointAfter(h, cell) {
	const t0 = Date.now();
	while (!checkpointCells(h.pid, 'default').includes(cell) && Date.now() - t0 < 10000) await sleep(50);
	assert.ok(checkpointCells(h.pid, 'default').includes(cell), 'a workspace write forces a checkpoint');
}

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

	test('a large block malloc\'d outside NumPy and freed stays in glibc\'s heap for the next, as NumPy\'s frees would have left it', { timeout: 120000 }, async () => {
		// With checkpoints NumPy's blocks never pass through glibc, whose
		// thresholds then stayed below the 4 MiB blocks pandas' hash
		// tables take: each was mapped afresh and given back, a new huge
		// page every 2 MiB on every call.  Measured inside one cell (the
		// heap is trimmed before a checkpoint's fork): the blocks mapped
		// alone while held (mallinfo2's hblks, against before), and the
		// heap's free bytes once both are freed, twice.
		const r = await execPy(h, [
			'import ctypes',
			'class MI(ctypes.Structure): _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]',
			'libc = ctypes.CDLL(None); libc.mallinfo2.restype = MI',
			'libc.malloc.restype = ctypes.c_void_p; libc.free.argtypes = [ctypes.c_void_p]',
			'def churn():',
			'    h0 = libc.mallinfo2().hblks',
			'    ps = [libc.malloc(4 << 20) for _ in range(2)]',
			'    for p in ps: ctypes.memset(p, 1, 4 << 20)',
			'    mapped = libc.mallinfo2().hblks - h0',
			'    for p in ps: libc.free(p)',
			'    return (mapped, libc.mallinfo2().fordblks >> 20)',
			'churn() + churn()',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [mapped1, , mapped2, free2] = tuple(r.sc.result);
		assert.equal(mapped1, 0, `a 4 MiB malloc was mapped alone (${r.sc.result}): glibc's mmap threshold is below it`);
		assert.equal(mapped2, 0, `a 4 MiB malloc was mapped alone the second time (${r.sc.result})`);
		// Under AddressSanitizer malloc is the sanitizer's, glibc's heap is
		// not used at all (mallinfo2 reads 0): nothing stays there.
		if (!SANITIZED)
			assert.ok(free2 >= 8, `the heap kept ${free2} MiB of the 8 MiB freed (${r.sc.result}): trimmed, the next call maps it afresh`);
	});

	test('a large array freed is kept for the next that fits, up to an eighth of memory_mb, and across a checkpoint, which never holds it', { timeout: 120000 }, async () => {
		// memory_mb is 2048 in this policy: at most 256 MB kept.
		const r = await execPy(h, [
			'import numpy as np, resource',
			RSS,
			'a = np.ones(3_800_000); at = a.ctypes.data; r0 = rss(); del a; r1 = rss()',
			'b = np.empty(3_800_000); same = b.ctypes.data == at',
			'big = np.ones(40_000_000); r2 = rss(); del big; r3 = rss()',
			'del b; r4 = rss(); s4 = np.ones(500_000); r5 = rss()',
			'(r0 - r1, same, r2 - r3, s4.ctypes.data == at, r4 - r5)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [kept, same, over, small, cut] = tuple(r.sc.result);
		assert.ok(kept < 8, `freeing a 30 MB array gave back ${kept} MB: it was not kept`);
		assert.equal(same, true, 'the next array of its size did not reuse the kept block');
		assert.ok(over > 280, `freeing a 320 MB array (over 256 MB) gave back only ${over} MB`);
		// A 4 MB array takes the kept 30 MB block, and its rest is given back.
		assert.equal(small, true, 'a smaller array did not reuse the kept block');
		assert.ok(cut > 20, `the kept block's rest was not given back (${cut} MB)`);
		// Freed, kept, and a checkpoint follows the call: the block is left
		// out of the checkpoint's copy, and stays the session's, so the
		// next array of its size after the fork reuses it, resident, with
		// neither a copy nor a fresh page.
		const k = await execPy(h, [
			'c = np.ones(3_800_000); at_c = c.ctypes.data; del c',
			'open("workspace/forces-a-checkpoint-2.txt", "w").write("a file written: the call is followed by a checkpoint")',
			'at_c',
		].join('\n'));
		assert.equal(k.sc.status, 'ok', show(k.sc));
		const at = BigInt(k.sc.result);
		await checkpointAfter(h, k.sc.execution_count);
		// null: the process is gone (a checkpoint retired meanwhile).
		const holds = (pid) => {
			let maps;
			try { maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8'); } catch { return null; }
			return maps.split('\n').some((l) => {
				const [a, b] = l.split(' ')[0].split('-');
				return a && BigInt('0x' + a) <= at && at < BigInt('0x' + b);
			});
		};
		const procs = sessionProcs(h.pid, 'default');
		// One copy of this cell, or two when a save at rest took another
		// meanwhile: none holds the block.
		const ckpt = procs.checkpoints.filter((c) => c.cell === k.sc.execution_count).map((c) => c.pid);
		assert.ok(ckpt.length >= 1, `the checkpoint, found from outside: ${JSON.stringify(procs)}`);
		assert.equal(procs.sessions.length, 1, `the session, found from outside: ${JSON.stringify(procs)}`);
		const seen = ckpt.map(holds).filter((x) => x !== null);
		assert.ok(seen.length >= 1, 'the checkpoint ended before its memory map was read');
		assert.deepEqual(seen, seen.map(() => false), 'the checkpoint holds the kept block');
		assert.equal(holds(procs.sessions[0]), true, 'the session no longer holds the kept block after the fork');
		const g = await execPy(h, [
			'r6 = rss(); d = np.empty(3_800_000); d[:] = 1',
			'(d.ctypes.data == at_c, rss() - r6)',
		].join('\n'));
		assert.equal(g.sc.status, 'ok', show(g.sc));
		const [same2, grew] = tuple(g.sc.result);
		assert.equal(same2, true, 'the array after the fork did not reuse the kept block');
		assert.ok(grew < 8, `writing the reused block after the fork made the session ${grew} MB larger: it was mapped afresh`);
		// A checkpoint taken while a block is kept, then a rollback to it:
		// the copy never had the block, and its own large arrays are
		// mapped afresh, never at the kept one's address (unmapped there:
		// the first write would end it with SIGSEGV).
		const k2 = await execPy(h, 'del d\nopen("workspace/forces-a-checkpoint-3.txt", "w").write("a checkpoint follows")');
		assert.equal(k2.sc.status, 'ok', show(k2.sc));
		await checkpointAfter(h, k2.sc.execution_count);
		const t = await execPy(h, 'import time\ntime.sleep(30)', { timeout_s: 1 });
		assert.equal(t.sc.state, 'rolled_back', show(t.sc));
		const e = await execPy(h, 'e = np.ones(3_800_000); e2 = np.ones(3_800_000); float(e.sum() + e2.sum())');
		assert.equal(e.sc.status, 'ok', show(e.sc));
		assert.equal(e.sc.result, '7600000.0');
	});
});

describe('large arrays kept, in a fresh session', () => {
	let h;
	before(async () => { h = await startClient(newProject('bigmem-peak'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('kept blocks over 32 MiB are given back before a zeroed array is mapped afresh, as before any fresh mapping', { timeout: 120000 }, async () => {
		// 200 MB kept (under the 256 MB cap), then 300 MB of zeros, which no
		// kept block serves: the session grows by the 300 MB, not by 500.
		const r = await execPy(h, [
			'import numpy as np',
			RSS,
			'import gc; gc.collect()',
			'r0 = rss()',
			'a = np.ones(12_500_000); b = np.ones(12_500_000); del a, b',
			'kept = rss() - r0',
			'z = np.zeros(37_500_000); z[:] = 1; grew_z = rss() - r0; del z',
			'(kept, grew_z)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [kept, grewZ] = tuple(r.sc.result);
		assert.ok(kept > 150, `the two freed 100 MB arrays were not kept (${kept} MB)`);
		assert.ok(grewZ < 380, `a 300 MB zeroed array with 200 MB kept made the session ${grewZ} MB larger: the kept blocks stayed`);
	});

	test('a zeroed array of a column\'s size reuses a kept block, zeroed: no fault a page, and no value of the freed array left', { timeout: 120000 }, async () => {
		// np.zeros is NumPy's calloc.  Mapped afresh, a 400k-row column
		// (3.2 MB: one huge page and 1.2 MB of small ones) costs a fault for
		// each 4 kB of its tail at its first write; a kept block is resident.
		// The block held sevens: every byte must read zero (z.any(), which
		// makes no temporary array to fault on).  A 300 MB
		// np.zeros (past 32 MiB) stays a fresh mapping: the test above.
		const r = await execPy(h, [
			'import numpy as np, resource',
			'def flt(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt',
			'a = np.full(400_000, 7.0); at = a.ctypes.data; del a',
			'f0 = flt(); z = np.zeros(400_000); zero = not z.any(); z[:] = 1.0; faults = flt() - f0',
			'b = np.full((300, 1000), 7, dtype=np.int64); at_b = b.ctypes.data; del b',
			'z2 = np.zeros((300, 1000), dtype=np.int64)',
			'(z.ctypes.data == at, zero, faults, z2.ctypes.data == at_b, int(np.count_nonzero(z2)))',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [same, zero, faults, same2, nonzero] = tuple(r.sc.result);
		assert.equal(same, true, 'np.zeros did not reuse the kept block of its size');
		assert.equal(zero, true, 'np.zeros on a reused block read a value of the freed array');
		// Under AddressSanitizer the allocator's memset of the block reads its
		// shadow first (an eighth of it, 100 pages never touched: a fault
		// each, once); NumPy's own writes are not instrumented.
		const most = SANITIZED ? 200 : 100;
		assert.ok(faults < most, `a zeroed 3.2 MB array took ${faults} minor faults to write (a fresh mapping takes about 300)`);
		assert.equal(same2, true, 'a 2-D np.zeros did not reuse the kept block of its size');
		assert.equal(nonzero, 0, 'a 2-D np.zeros on a reused block kept values of the freed array');
	});

	test('a kept block of a column\'s size stays through a larger fresh mapping, as glibc\'s heap keeps it; a larger one is given back', { timeout: 120000 }, async () => {
		// 30 MB (a column of 4M rows) kept, then 100 MB mapped afresh: the
		// 30 MB stay for the next column-sized array.  Then 100 MB kept
		// too, and 300 MB of zeros mapped afresh: the 100 MB go, the 30 stay.
		const r = await execPy(h, [
			'import numpy as np',
			RSS,
			'a = np.ones(3_800_000); at = a.ctypes.data; del a',
			'r0 = rss(); big = np.ones(12_500_000); grew = rss() - r0',
			'b = np.empty(3_800_000); same = b.ctypes.data == at; del b, big',
			'r1 = rss(); z = np.zeros(37_500_000); z[:] = 1; grew_z = rss() - r1; del z',
			'e = np.empty(3_800_000); same_e = e.ctypes.data == at; del e',
			'(grew, same, grew_z, same_e)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [grew, same, grewZ, sameE] = tuple(r.sc.result);
		assert.ok(grew > 88, `a 100 MB array mapped afresh with 30 MB kept made the session only ${grew} MB larger: the 30 MB were given back`);
		assert.equal(same, true, 'the next 30 MB array did not reuse the block kept through the fresh mapping');
		assert.ok(grewZ < 240, `300 MB of zeros with 100 MB kept made the session ${grewZ} MB larger: the 100 MB block stayed`);
		assert.equal(sameE, true, 'the 30 MB block was given back with the 100 MB one');
	});

	test('an array refused while blocks are kept (they count against memory_mb) is mapped once they are given back', { timeout: 120000 }, async () => {
		// memory_mb is RLIMIT_DATA, which counts the kept blocks.  8 x 30 MB
		// kept, then a 1 GiB array under a data limit it fits only without
		// them (the cell lowers its own soft limit to that: a sanitizer
		// build sets no data limit, and a release build's 2048 MB is more).
		const r = await execPy(h, [
			'import numpy as np, resource',
			'def vmdata(): return int([l for l in open("/proc/self/status") if l.startswith("VmData:")][0].split()[1]) << 10',
			'soft, hard = resource.getrlimit(resource.RLIMIT_DATA)',
			'v0 = vmdata(); kept = [np.ones(3_800_000) for _ in range(8)]; del kept',
			'kept_mb = (vmdata() - v0) >> 20',
			'cap = vmdata() + (1 << 30) - (120 << 20)',
			'resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))',
			'try:',
			'    big = np.empty((1 << 30) // 8); got = big.nbytes >> 20; del big',
			'finally:',
			'    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))',
			'(soft == resource.RLIM_INFINITY or cap < soft, kept_mb, got)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [lowered, keptMb, got] = tuple(r.sc.result);
		assert.equal(lowered, true, 'the cell could not set a data limit below the session\'s own');
		assert.ok(keptMb > 200, `the freed arrays were not kept (${keptMb} MB held)`);
		assert.equal(got, 1024, 'the 1 GiB array');
	});
});

describe('large arrays kept, near memory_mb', () => {
	// A sanitizer build's session holds its shadow memory too.
	const MB = SANITIZED ? 1536 : 512;
	let h;
	before(async () => { h = await startClient(newProject('bigmem-near'), { structured: true, args: ['--memory', String(MB)], env: CHEAP_FAULT }); });
	after(async () => { await h?.close(); });

	test('where the host takes freed memory back, a fresh mapping is advised for huge pages only right after as much was freed', { timeout: 120000 }, async () => {
		// Elsewhere every fresh mapping is advised.  The cell comes
		// after a rest: one that follows the last within 400 ms (calls
		// back to back) takes huge pages throughout, as the memory the
		// calls before it freed is hot.
		const reports = hostTakesFreed();
		const [hot, cold, coldSmall] = await hotCold(h);
		assert.equal(hot, true, 'a fresh mapping right after as much was freed was not advised for huge pages');
		assert.equal(cold, !reports, reports
			? 'on a host that takes freed memory back, a fresh mapping 1.5 s after the last free was advised for huge pages'
			: 'on a host that keeps freed memory, a fresh mapping was not advised for huge pages');
		assert.equal(coldSmall, reports, reports
			? 'on a host that takes freed memory back, a fresh mapping 1.5 s after the last free was not advised against huge pages (MADV_NOHUGEPAGE)'
			: 'on a host that keeps freed memory, a fresh mapping was advised against huge pages');
	});

	test('a fresh mapping past three quarters of memory_mb gives every kept block back first, small ones too', { timeout: 120000 }, async () => {
		// The server counts what the session holds resident, kept blocks
		// too: near the limit they would end a call that fits without them.
		const r = await execPy(h, [
			'import numpy as np',
			'def res(): return int(open("/proc/self/statm").read().split()[1]) * 4096',
			'a = np.ones(3_800_000); b = np.ones(3_800_000); r0 = res(); del a, b; held = (r0 - res()) >> 20',
			`r1 = res(); size = ${MB} * 3 // 4 * 2**20 - r1 + (50 << 20)`,
			'x = np.ones(size // 8); grew = (res() - r1) >> 20; del x',
			'(held, size >> 20, grew)',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const [held, size, grew] = tuple(r.sc.result);
		assert.ok(held < 10, `the two freed 30 MB arrays were not kept (${held} MB given back at once)`);
		// The session then holds three quarters of memory_mb and 50 MB.
		assert.ok(size > 100, `the session already held most of memory_mb: a ${size} MB array does not test the rule`);
		assert.ok(grew < size - 40, `a ${size} MB array past three quarters of memory_mb made the session ${grew} MB larger: the 60 MB kept stayed`);
	});
});

describe('large arrays without checkpoints', () => {
	// Under memory_mb 1024 (1536 sanitized) at most 128 MB is kept: a
	// 272 MB array freed is given back, never kept.
	const MB = SANITIZED ? 1536 : 1024;
	let h;
	before(async () => {
		const root = newProject('bigmem-off');
		const skill = writeFile(root, 'policy/SKILL.md', SKILL.replace('checkpoint: true', 'checkpoint: false'));
		fs.mkdirSync(path.join(root, 'workspace'), { recursive: true });
		h = await startClient(root, { structured: true, args: ['--skill', skill, '--memory', String(MB)], env: CHEAP_FAULT });
	});
	after(async () => { await h?.close(); });

	test('NumPy keeps its default allocator (a freed block is reused at no cost there), unless the host takes freed memory back', { timeout: 120000 }, async () => {
		// Where the host takes freed memory back, the page size of a cell
		// after a rest is what the allocator is for: NumPy's own (and
		// glibc's heap, glibc.malloc.hugetlb) takes huge pages for every
		// large array, the dear ones after a rest.
		const r = await execPy(h, 'import numpy as np\nnp.core.multiarray.get_handler_name()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, hostTakesFreed() ? `'${HOT_NAME}'` : "'default_allocator'");
	});

	test('a fresh array after a rest takes small pages where the host takes freed memory back; one right after a free is glibc\'s', { timeout: 120000 }, async () => {
		const reports = hostTakesFreed();
		const [hot, cold, coldSmall] = await hotCold(h);
		if (reports) {
			assert.equal(hot, true, 'without checkpoints, a fresh array right after as much was freed was not advised for huge pages');
			assert.equal(cold, false, 'without checkpoints, on a host that takes freed memory back, a fresh array 1.5 s after the last free was advised for huge pages');
			assert.equal(coldSmall, true, 'without checkpoints, on a host that takes freed memory back, a fresh array 1.5 s after the last free was not advised against huge pages');
		} else {
			// NumPy's default allocator advises every large block alike,
			// whenever it is made, and never against huge pages.
			assert.equal(cold, hot, 'on a host that keeps freed memory, NumPy\'s default allocator advised two fresh blocks differently');
			assert.equal(coldSmall, false, 'on a host that keeps freed memory, a fresh array was advised against huge pages');
		}
		// Which allocator made each: a mapping of our own starts on a
		// 2 MiB boundary, a block of glibc's never does (its header).
		await sleep(1000);
		const r = await execPy(h, [
			'import numpy as np, time',
			'x = np.ones(34_000_000); del x',
			'hot = np.ones(4_000_000); hot_ours = hot.ctypes.data % (2 << 20) == 0; del hot',
			'time.sleep(1.5)',
			'cold = np.ones(4_000_000); cold_ours = cold.ctypes.data % (2 << 20) == 0; cold[:] = 7; s = float(cold.sum()); del cold',
			'(hot_ours, cold_ours, s == 28_000_000)',
		].join('\n'), { timeout_s: 60 });
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, reports ? '(False, True, True)' : '(False, False, True)',
			reports ? 'without checkpoints, the array right after a free is not glibc\'s, or the one after a rest is not a mapping of its own'
				: 'on a host that keeps freed memory, an array got a mapping of its own without checkpoints');
	});
});

describe('large arrays where a small page faults dearer than a huge page the host took back', () => {
	// On such a machine (a small page's fault measured at 11 us on one VM,
	// 2.2 us on another of the same kernel build) small pages after a rest
	// cost more than the huge ones they stand in for, whatever the host
	// does with freed memory: huge pages at any age, with checkpoints and
	// without.
	const MB = SANITIZED ? 1536 : 512;
	let on, off;
	before(async () => {
		on = await startClient(newProject('bigmem-dear'), { structured: true, args: ['--memory', String(MB)], env: DEAR_FAULT });
		const root = newProject('bigmem-dear-off');
		const skill = writeFile(root, 'policy/SKILL.md', SKILL.replace('checkpoint: true', 'checkpoint: false'));
		fs.mkdirSync(path.join(root, 'workspace'), { recursive: true });
		off = await startClient(root, { structured: true, args: ['--skill', skill, '--memory', String(MB)], env: DEAR_FAULT });
	});
	after(async () => { await on?.close(); await off?.close(); });

	test('with checkpoints, a fresh mapping after a rest is advised for huge pages', { timeout: 120000 }, async () => {
		const [hot, cold, coldSmall] = await hotCold(on);
		assert.equal(hot, true, 'a fresh mapping right after as much was freed was not advised for huge pages');
		assert.equal(cold, true, 'where small pages fault dear, a fresh mapping 1.5 s after the last free was not advised for huge pages');
		assert.equal(coldSmall, false, 'where small pages fault dear, a fresh mapping 1.5 s after the last free was advised against huge pages');
	});

	test('without checkpoints, NumPy keeps its default allocator', { timeout: 120000 }, async () => {
		const r = await execPy(off, 'import numpy as np\nnp.core.multiarray.get_handler_name()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.sc.result, "'default_allocator'", 'where small pages fault dear, the allocator for small pages after a rest was installed');
	});
});
