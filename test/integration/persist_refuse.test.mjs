// Saved sessions: a snapshot the server did not write (bytes changed, a symlink,
// a pickle planted by a cell, a copy from another session) is refused.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, writeFile, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end, BUILD, DIGEST } from './persist_lib.mjs';
describe('a snapshot the server did not write is refused', () => {
	async function savedProject(tag, code = 'value = 123') {
		const root = newProject(tag);
		const xdg = stateHome();
		const h = await start(root, xdg);
		const r = await execPy(h, code);
		assert.equal(r.sc.status, 'ok');
		await waitSaved(h, 1);
		await h.close();
		return { root, xdg };
	}

	async function expectRefused(root, xdg, why, session = 'default') {
		const h = await start(root, xdg);
		const r = await execPy(h, '"value" in globals()', { session });
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.status, 'ok');
		assert.equal(r.sc.result, 'False');
		assert.match(r.text, new RegExp(`note:\\n.*saved state of session ${session} was refused: [^\\n]*${why}[^\\n]*this call runs in a fresh session`), show(r.text));
		assert.equal(fs.existsSync(snapPath(root, session)), false, 'the refused file is removed');
		await h.close();
	}

	test('one byte changed', { timeout: 120000 }, async () => {
		const { root, xdg } = await savedProject('tamper-bytes');
		const p = snapPath(root);
		const buf = fs.readFileSync(p);
		buf[Math.floor(buf.length / 3)] ^= 0x01;
		fs.writeFileSync(p, buf);
		await expectRefused(root, xdg, 'do not match the tag');
	});

	// The server streams a large state from a ring of 1 MiB chunks that it
	// refills while the session reads: a byte changed in the last chunk,
	// and a file cut short (with a trailer that says so), are still refused.
	test('one byte changed in the last of many chunks, and a file cut short', { timeout: 180000 }, async () => {
		const code = 'import numpy as np\nvalue = np.random.default_rng(5).integers(0, 255, 6 << 20, dtype=np.uint8)';
		let { root, xdg } = await savedProject('tamper-late', code);
		let p = snapPath(root);
		let buf = fs.readFileSync(p);
		assert.ok(buf.length > 6 << 20, `a snapshot of ${buf.length} bytes`);
		buf[buf.length - 72 - 1000] ^= 0x01;
		fs.writeFileSync(p, buf);
		await expectRefused(root, xdg, 'do not match the tag');
		({ root, xdg } = await savedProject('tamper-cut', code));
		p = snapPath(root);
		buf = fs.readFileSync(p);
		// Cut to 3 MiB, the trailer after it saying so (its length, at 8,
		// rewritten): well-formed, so it is streamed, and its tag fails.
		const trailer = Buffer.from(buf.subarray(buf.length - 72));
		trailer.writeBigUInt64LE(BigInt(3 << 20), 8);
		fs.writeFileSync(p, Buffer.concat([buf.subarray(0, 3 << 20), trailer]));
		await expectRefused(root, xdg, 'do not match the tag');
	});

	test('replaced by a symlink', { timeout: 120000 }, async () => {
		const { root, xdg } = await savedProject('tamper-link');
		const p = snapPath(root);
		fs.renameSync(p, path.join(root, 'elsewhere.snap'));
		fs.symlinkSync(path.join(root, 'elsewhere.snap'), p);
		await expectRefused(root, xdg, 'symlink');
		assert.ok(fs.existsSync(path.join(root, 'elsewhere.snap')), 'the symlink target is left alone');
	});

	test('a pickle planted by a cell, and a valid snapshot copied to another session', { timeout: 180000 }, async () => {
		const root = newProject('tamper-plant');
		const xdg = stateHome();
		let h = await start(root, xdg);
		// The cell plants, for session "victim", a pickle that would create
		// a file when loaded, with a trailer of the right shape; and copies
		// its own (valid) snapshot for session "copied".
		const r = await execPy(h, `
import os, pickle, struct, shutil
value = 123
class Boom:
    def __reduce__(self):
        return (open, ("workspace/pwned", "w"))
data = pickle.dumps(Boom())
body = b"PSMSAVE1" + struct.pack("<Q", len(data)) + data
os.makedirs("workspace/.sessions/victim", exist_ok=True)
with open("workspace/.sessions/victim/state.snap", "wb") as f:
    f.write(body + b"PSMSNAP1" + struct.pack("<QQQ", len(body), 0, 1) + b"\\0" * 32)
print("planted")
`);
		assert.equal(r.sc.stdout, 'planted\n', show(r.text));
		await waitSaved(h, 1);
		await execPy(h, `
import shutil, os
os.makedirs("workspace/.sessions/copied", exist_ok=True)
shutil.copy("workspace/.sessions/default/state.snap", "workspace/.sessions/copied/state.snap")
`);
		await waitSaved(h, 2);
		await h.close();
		await expectRefused(root, xdg, 'do not match the tag', 'victim');
		await expectRefused(root, xdg, 'do not match the tag', 'copied');
		assert.equal(fs.existsSync(path.join(root, 'workspace', 'pwned')), false, 'the planted pickle never ran');
	});

});
