// The images of a reply are downscaled by the session (sandboxed work,
// never the server's), within what is left of the call's timeout and at
// least 15 s; a session that takes longer is stopped, and the error says
// that the cell had finished and what was slow, not that the cell ran past
// its timeout.  The session's downscaling is made slow from inside, as
// hostile code could: it replaces its own _thumbnail.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, show } from './lib.mjs';

/** A cell that saves a PNG of about 1 MB (noise: larger than a reply
 *  carries, so it is downscaled) after making the session's downscaling
 *  sleep `secs` first. */
function slowThumbCell(secs) {
	return [
		'import sys, time',
		'm = sys.modules["_psm"]',
		'orig = m._thumbnail',
		`m._thumbnail = lambda p, n: (time.sleep(${secs}), orig(p, n))[1]`,
		'import numpy as np, matplotlib.pyplot as plt',
		'fig = plt.figure(figsize=(8, 8), dpi=100)',
		'plt.imshow(np.random.rand(600, 600), interpolation="nearest")',
		'fig.savefig("workspace/outputs/slow.png")',
		'plt.close(fig)',
		'import os',
		'os.path.getsize("workspace/outputs/slow.png") > 256 * 1024',
	].join('\n');
}

describe('downscaling the reply\'s images is bounded by the call\'s timeout', () => {
	const handles = [];
	after(async () => { for (const h of handles) await h.close(); });

	test('16 s of downscaling under timeout_s 40: the call is ok, with its image', { timeout: 120000 }, async () => {
		const root = newProject('thumb-slow');
		const h = await startClient(root, { structured: true });
		handles.push(h);
		const r = await execPy(h, slowThumbCell(16), { timeout_s: 40 }, { timeout: 90000 });
		// Before: a fixed 15 s for the images, then "ran longer than its
		// timeout (40 s)".
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.images.length, 1, show(r.blocks));
		assert.ok(fs.existsSync(path.join(root, 'workspace/outputs/slow.png')));
	});

	test('downscaling that never ends: stopped, and the error says what was slow', { timeout: 60000 }, async () => {
		const root = newProject('thumb-stuck');
		const h = await startClient(root, { structured: true, env: { PSM_TEST_THUMBS_MS: '500' } });
		handles.push(h);
		// The imports first, and a timeout the cell itself fits in with
		// room to spare: with timeout_s 2, the first call's interpreter
		// start, imports and figure under the sanitizers on a loaded
		// machine took 2.1 s, and the cell itself ran past its timeout.
		const w = await execPy(h, 'import numpy, matplotlib.pyplot', {}, { timeout: 40000 });
		assert.equal(w.sc.status, 'ok', show(w.sc));
		const r = await execPy(h, slowThumbCell(3600), { timeout_s: 10 }, { timeout: 40000 });
		assert.equal(r.sc.status, 'timeout', show(r.sc));
		assert.match(r.sc.error.message, /the cell finished, but downscaling its images/, show(r.sc));
		assert.doesNotMatch(r.sc.error.message, /ran longer than its timeout/);
		assert.equal(r.sc.error.denied_by, 'limits');
		// The file the cell wrote stays; the server answers the next call.
		assert.ok(fs.existsSync(path.join(root, 'workspace/outputs/slow.png')));
		const n = await execPy(h, '1 + 1');
		assert.equal(n.sc.status, 'ok', show(n.sc));
	});
});
