// Saved sessions in pieces: a state of 16 MiB or more is saved as pieces,
// and a save at rest sends and writes only the pieces that changed since
// the last one.  Through the real server and client: a frame of 12 columns
// (48 MB) whose one column is replaced, then one changed in place, writes
// less than a tenth of the state per save (measured from outside: the
// pieces file's growth, and the server's own count), and comes back after
// a restart exactly.  A piece changed on disk is refused at the restore; a
// saver (the session's own code) that names a piece the server never wrote
// fails its save, the last snapshot stays, and the next save is whole.
//
// Each cell here takes its checkpoint (PSM_TEST_REPLAY_MS=0), but in the
// one test about the replay log: a cell that is only logged is saved at
// rest as a journal of cells instead (persist_journal.test.mjs), and these
// tests are about the state's saves.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, show, checkpointCells, sleep } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end } from './persist_lib.mjs';

const BUILD = [
	'import numpy as np, pandas as pd',
	'rng = np.random.default_rng(7)',
	'df = pd.DataFrame({f"c{i}": rng.random(500_000) for i in range(12)})',
	'df.shape',
].join('\n');
// An exact digest of the frame's values, its columns and their order.
const DIGEST = 'import hashlib\nhashlib.sha256(df.to_numpy().tobytes() + ",".join(df.columns).encode()).hexdigest()';

const EVERY_CALL = { env: { PSM_TEST_REPLAY_MS: '0' } };

function piecesFile(root) {
	const dir = path.dirname(snapPath(root));
	const names = fs.readdirSync(dir).filter((n) => /^pieces\.\d+$/.test(n));
	assert.equal(names.length, 1, `one pieces file: ${names}`);
	return path.join(dir, names[0]);
}

/** The last saved state's table of variables, read from outside in the
 *  pieces file (authenticated, not encrypted): name -> [pickle length,
 *  out-of-band buffer lengths...]. */
function varsTable(root) {
	const text = fs.readFileSync(piecesFile(root)).toString('latin1');
	const tables = [...text.matchAll(/"vars": (\[(?:\["\w+", \[[\d, ]*\]\](?:, )?)*\])/g)];
	assert.ok(tables.length >= 1, 'the table of variables is in the state');
	return Object.fromEntries(JSON.parse(tables[tables.length - 1][1]));
}

/** The n-th "state saved (B bytes in T ms, W written)" line: [B, W]. */
function savedLine(h, n) {
	const all = [...h.stderr().matchAll(/state saved \((\d+) bytes in \d+ ms, (\d+) written\)/g)];
	assert.ok(all.length >= n, `${n} saves logged: ${h.stderr().slice(-1500)}`);
	return [Number(all[n - 1][1]), Number(all[n - 1][2])];
}

/** A new project whose session holds the frame, saved once: [root, xdg, h]. */
async function savedFrame(tag) {
	const root = newProject(tag);
	const xdg = stateHome();
	const h = await start(root, xdg, EVERY_CALL);
	const r = await execPy(h, BUILD);
	assert.equal(r.sc.result, '(500000, 12)', show(r.text));
	await waitSaved(h, 1);
	return [root, xdg, h];
}

/** Ends the server after taking a digest of the state (the code `dig`,
 *  the frame's by default), starts another on the same project and checks
 *  that its first call restores the same state; the new server. */
async function restartSame(h, root, xdg, dig = DIGEST, what = 'the same values, columns and order') {
	const digest = (await execPy(h, dig)).sc.result;
	assert.match(String(digest), /^'[0-9a-f]{64}'$/);
	await end(h, 'SIGTERM');
	const h2 = await start(root, xdg, EVERY_CALL);
	const r = await execPy(h2, dig);
	assert.equal(r.sc.state, 'restored', show(r.text));
	assert.equal(r.sc.result, digest, what);
	return h2;
}

describe('a large state saved in pieces', () => {
	test('one column changed between rests: each save writes less than a tenth of the state, and the state comes back exactly', { timeout: 240000 }, async () => {
		let [root, xdg, h] = await savedFrame('pieces');
		let r;
		const [state, first] = savedLine(h, 1);
		assert.ok(state > 48e6 && first >= state, `the first save is whole: ${state} bytes, ${first} written`);
		const file = piecesFile(root);
		assert.ok(fs.statSync(snapPath(root)).size < 64 * 1024, 'state.snap is only the manifest');
		let size = fs.statSync(file).size;

		// A column replaced: pandas moves the other eleven into a new block.
		r = await execPy(h, 'df["c3"] = df["c3"] * 2\nfloat(df["c3"].sum())');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 2);
		let [, wrote] = savedLine(h, 2);
		let grew = fs.statSync(file).size - size;
		assert.ok(wrote < state / 10, `replaced column: ${wrote} bytes written of ${state}`);
		assert.ok(grew < state / 10, `replaced column: the pieces file grew by ${grew}`);
		size += grew;

		// A column changed in place.
		r = await execPy(h, 'df["c5"] *= 3\nfloat(df["c5"].sum())');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 3);
		[, wrote] = savedLine(h, 3);
		grew = fs.statSync(file).size - size;
		assert.ok(wrote < state / 10, `changed in place: ${wrote} bytes written of ${state}`);
		assert.ok(grew < state / 10, `changed in place: the pieces file grew by ${grew}`);
		h = await restartSame(h, root, xdg);
		assert.match(h.stderr(), /saved state streamed and verified/);
		// After the restart the restore's pieces serve the next save.
		r = await execPy(h, 'df["c7"] = -df["c7"]\n1');
		await waitSaved(h, 1);
		[, wrote] = savedLine(h, 1);
		assert.ok(wrote < state / 10, `after a restart: ${wrote} bytes written of ${state}`);
		await end(h, 'SIGTERM');
	});

	// A saver pickles an object array one element at a time, in band, at
	// every save: at 4M rows the loop's three string columns were most of
	// each save's CPU.  Large object arrays of str are saved as codes into
	// their distinct strings instead (interp/strcodes.c), out of band, one
	// run per column of a pandas block.  Seen from outside: the state's
	// size (pickle writes each of these elements as a memo reference of 5
	// bytes, about 92 MB here; as codes of 2 bytes about 56 MB), one string
	// column changed in place writes less than a tenth of it (its codes,
	// 4 MB: the new string takes code 0 and shifts the others), and the
	// strings, other object arrays beside them, and an array in Fortran
	// order come back exactly after a restart.
	test('string columns are saved as codes: a smaller state, one changed column writes little, all comes back exactly', { timeout: 240000 }, async () => {
		const root = newProject('pieces-strings');
		const xdg = stateHome();
		let h = await start(root, xdg, EVERY_CALL);
		let r = await execPy(h, [
			'import numpy as np, pandas as pd',
			'rng = np.random.default_rng(3)',
			'words = np.array(["w%04d-é" % i if i % 3 else "w%04d-😀" % i for i in range(1000)], dtype=object)',
			'sf = pd.DataFrame({f"s{i}": words[rng.integers(0, 1000, 2_000_000)] for i in range(6)})',
			'sf["n"], sf["m"] = rng.random(2_000_000), rng.random(2_000_000)',
			'mixed = np.array(["a", 1, None, 2.5] * 50_000, dtype=object)',
			'fa = np.asfortranarray(words[rng.integers(0, 1000, (2, 100_000))])',
			// Strings with missing values (NaN, None), -0.0 and a NaN with a payload:
			// 1,004 distinct values, codes of 2 bytes.
			'import struct',
			'gaps = words[rng.integers(0, 1000, 300_000)]',
			'gaps[::7], gaps[3::11], gaps[5::13] = np.nan, None, -0.0',
			'gaps[9::17] = struct.unpack("<d", struct.pack("<Q", 0x7ff8000000000bad))[0]',
			'sf.shape, fa.flags.f_contiguous',
		].join('\n'));
		assert.equal(r.sc.result, '((2000000, 8), True)', show(r.text));
		const DIG = [
			'import hashlib, struct',
			'hashlib.sha256("\\x00".join(sf[[f"s{i}" for i in range(6)]].to_numpy().ravel().tolist()).encode()',
			'  + sf[["n", "m"]].to_numpy().tobytes() + repr((mixed.tolist(), fa.tolist(), fa.flags.f_contiguous,',
			'  str(sf.dtypes.tolist()), mixed.dtype, fa.dtype, [(type(x).__name__, struct.pack("<d", x).hex()',
			'  if isinstance(x, float) else x) for x in gaps.tolist()])).encode()).hexdigest()',
		].join('\n');
		await waitSaved(h, 1);
		const [state] = savedLine(h, 1);
		assert.ok(state > 56e6 && state < 64e6, `the state is its codes: ${state} bytes`);
		const vars = varsTable(root);
		assert.ok(vars.gaps[0] < 64 * 1024 && vars.gaps.includes(6e5), `strings with missing values are codes: ${vars.gaps}`);
		assert.ok(vars.mixed[0] > 2e5, `an array with an int among its strings is pickled as before: ${vars.mixed}`);
		r = await execPy(h, 'sf.loc[:1000, "s1"] = "changed"\nint((sf["s1"] == "changed").sum())');
		assert.equal(r.sc.result, '1001', show(r.text));
		await waitSaved(h, 2);
		const [, wrote] = savedLine(h, 2);
		assert.ok(wrote < state / 10, `one string column changed in place: ${wrote} bytes written of ${state}`);
		h = await restartSame(h, root, xdg, DIG, 'the same strings, objects and order');
		await end(h, 'SIGTERM');
	});

	// NumPy pickles a datetime64 or timedelta64 array in band whatever the
	// protocol (it will not export their memory as a buffer): a frame's
	// timestamp column was copied into the pickle at every save, changed or
	// not (at 4M rows 32 MB, with the fresh memory the pickle grew into:
	// most of the saver's CPU).  Now its integers are exported out of band,
	// like a numeric column's.  Seen from outside, in the state on disk
	// (varsTable): each variable's pickle and buffer lengths.  Naive,
	// time-zone-aware, Fortran-ordered and big-endian dates and durations
	// are out of band, and all come back exactly after a restart, byte
	// order included (NumPy's own pickle turns a big-endian one native),
	// and can be written to.
	test('date and duration arrays are saved out of band, and come back exactly', { timeout: 240000 }, async () => {
		const root = newProject('pieces-dates');
		const xdg = stateHome();
		let h = await start(root, xdg, EVERY_CALL);
		let r = await execPy(h, [
			'import numpy as np, pandas as pd',
			'n = 2_000_000',
			'tf = pd.DataFrame({"ts": pd.date_range("2025-01-01", periods=n, freq="s"),',
			'                   "td": pd.to_timedelta(np.arange(n), unit="ms"),',
			'                   "tz": pd.date_range("2025-03-30", periods=n, freq="min", tz="Europe/Paris"),',
			'                   "v": np.arange(n, dtype=float)})',
			'fd = np.asfortranarray(np.arange(400_000, dtype="i8").reshape(2, 200_000)).view("M8[s]")',
			'be = np.arange(100_000, dtype=">i8").view(">M8[ms]")',
			'tf.shape, fd.flags.f_contiguous, str(be.dtype)',
		].join('\n'));
		assert.equal(r.sc.result, "((2000000, 4), True, '>M8[ms]')", show(r.text));
		const DIG = [
			'import hashlib',
			'hashlib.sha256(b"".join(tf[c].to_numpy().view("i8").tobytes() for c in ("ts", "td", "v"))',
			'  + tf["tz"].array.asi8.tobytes() + fd.view("i8").tobytes() + be.view(">i8").tobytes()',
			'  + repr((list(tf.columns), str(tf.dtypes.tolist()), str(tf["tz"].dt.tz), fd.dtype, fd.shape,',
			'          fd.flags.f_contiguous, be.dtype)).encode()).hexdigest()',
		].join('\n');
		await waitSaved(h, 1);
		const [state] = savedLine(h, 1);
		assert.ok(state > 64e6 && state < 72e6, `the state: ${state} bytes`);
		const vars = varsTable(root);
		assert.ok(vars.tf[0] < 64 * 1024, `the frame's pickle holds no dates: ${vars.tf}`);
		assert.deepEqual(vars.tf.slice(1).filter((n) => n === 16e6).length, 4, `its four columns are buffers: ${vars.tf}`);
		assert.ok(vars.fd[0] < 64 * 1024 && vars.fd.includes(3.2e6), `the Fortran-ordered dates are a buffer: ${vars.fd}`);
		assert.ok(vars.be[0] < 64 * 1024 && vars.be.includes(8e5), `the big-endian dates are a buffer: ${vars.be}`);
		h = await restartSame(h, root, xdg, DIG, 'the same dates, durations, zones, layouts and byte orders');
		r = await execPy(h, [
			'tf.loc[0, "ts"] = pd.Timestamp("2000-01-01")',
			'fd[0, 0] = np.datetime64("2001-01-01")',
			'str(tf["ts"][0]), str(fd[0, 0]), str(tf["tz"][1]), str(tf["td"][5])',
		].join('\n'));
		assert.equal(r.sc.result, "('2000-01-01 00:00:00', '2001-01-01T00:00:00', '2025-03-30 00:01:00+01:00', '0 days 00:00:00.005000')", show(r.text));
		await end(h, 'SIGTERM');
	});

	// The saver of a checkpoint that a newer one replaced is reparented to
	// the session, which reaps it in its next cell: the kernel then adds
	// what the saver wrote (the state, to the server's pipe) to the
	// session's count of bytes written.  That is no effect of the cell's:
	// a cheap cell after it is still only logged, not checkpointed (it was
	// checkpointed for "it wrote 24000000 bytes besides its output").
	test('the bytes a save wrote are not the next cell\'s: a cheap cell after it is logged', { timeout: 120000 }, async () => {
		const root = newProject('pieces-reap');
		const xdg = stateHome();
		const h = await start(root, xdg);
		let r = await execPy(h, 'import numpy as np\na = np.random.default_rng(1).random(3_000_000)\na.nbytes');
		assert.equal(r.sc.result, '24000000', show(r.text));
		await waitSaved(h, 1);
		r = await execPy(h, "with open('workspace/w.txt', 'w') as f:\n    f.write('x')");
		assert.equal(r.sc.status, 'ok', show(r.text));
		const t0 = Date.now();
		while (checkpointCells(h.pid, 'default').join() !== '2' && Date.now() - t0 < 5000) await sleep(50);
		assert.deepEqual(checkpointCells(h.pid, 'default'), [2], 'a workspace write forces a checkpoint');
		await sleep(500); // the replaced checkpoint ends, its saver goes to the session
		r = await execPy(h, 'y = 2');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await sleep(1000);
		assert.deepEqual(checkpointCells(h.pid, 'default'), [2], 'the cheap cell was logged, not checkpointed');
		await end(h, 'SIGTERM');
	});

	test('a piece changed on disk: the restore refuses the snapshot and says why', { timeout: 180000 }, async () => {
		let [root, xdg, h] = await savedFrame('pieces-bad');
		await end(h, 'SIGTERM');
		// From outside: one byte in the middle of the pieces file.
		const file = piecesFile(root);
		const fd = fs.openSync(file, 'r+');
		const at = Math.floor(fs.fstatSync(fd).size / 2);
		const b = Buffer.alloc(1);
		fs.readSync(fd, b, 0, 1, at);
		b[0] ^= 0xff;
		fs.writeSync(fd, b, 0, 1, at);
		fs.closeSync(fd);
		h = await start(root, xdg, EVERY_CALL);
		let r = await execPy(h, '"df" in globals()');
		assert.equal(r.sc.result, 'False', show(r.text));
		assert.notEqual(r.sc.state, 'restored', show(r.text));
		assert.match(h.stderr(), /the saved state does not match its tag: refused/);
		assert.equal(fs.existsSync(snapPath(root)), false, 'the refused snapshot is removed');
		await end(h, 'SIGTERM');
	});

	test('a saver that names a piece the server never wrote: its save fails, the last one stays, the next one is whole', { timeout: 240000 }, async () => {
		let [root, xdg, h] = await savedFrame('pieces-lie');
		const [state] = savedLine(h, 1);
		let r;
		// The session's own code replaces its saver (it runs in a fork
		// of the session's checkpoint): a piece of 1 MiB named by a
		// label the server never gave.
		r = await execPy(h, [
			'import _psm',
			'orig = _psm._write_pieces',
			'def lie(fd, total, records, known):',
			'    import os',
			'    os.write(fd, b"PSMSAVE2" + total.to_bytes(8, "little"))',
			'    os.write(fd, b"S" + (1 << 20).to_bytes(4, "little") + b"\\x42" * 16)',
			'_psm._write_pieces = lie',
			'df["c1"] = 0.0',
		].join('\n'));
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1); // the log of the first
		const t0 = Date.now();
		while (!/the saver named a piece of the last save that the server does not hold/.test(h.stderr())) {
			assert.ok(Date.now() - t0 < 60000, `no refused save: ${h.stderr().slice(-1500)}`);
			await new Promise((res) => setTimeout(res, 200));
		}
		r = await execPy(h, '_psm._write_pieces = orig\ndf["c2"] = 1.0\n1');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 2);
		const [, wrote] = savedLine(h, 2);
		assert.ok(wrote >= state, `the save after the refused one is whole: ${wrote} of ${state}`);
		h = await restartSame(h, root, xdg);
		await end(h, 'SIGTERM');
	});
});
