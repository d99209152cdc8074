// Saved sessions: what two names share comes back shared.  A matplotlib
// figure and the names of its axes (fig, ax = plt.subplots()) are pickled
// together, once, so that after a restart ax still draws in fig; two names
// bound to one object come back bound to one object, saved once (checked
// from outside by the snapshot's size).  A family that cannot be pickled
// whole is saved name by name: its one member that cannot be saved is named,
// the others come back.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { execPy, newProject, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end } from './persist_lib.mjs';

const PLOT = `
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
import numpy as np
`;

/** A project whose session ran `cell` (after PLOT), saved it and ended:
 *  { root, restart } where restart() starts a new server on it. */
async function savedAfter(name, cell) {
	const root = newProject(name);
	const xdg = stateHome();
	const h = await start(root, xdg);
	const r = await execPy(h, `${PLOT}${cell}\n'ok'`);
	assert.equal(r.sc.status, 'ok', show(r.text));
	await waitSaved(h, 1);
	await end(h, 'eof');
	return { root, restart: () => start(root, xdg) };
}

describe('saved sessions keep what names share', () => {
	test('a figure and its axes, and two names for one object, come back shared and are saved once', { timeout: 180000 }, async () => {
		const { root, restart } = await savedAfter('persist-shared', `
fig, ax = plt.subplots()
ax.plot([1, 2, 3])
fig2, axs = plt.subplots(1, 2)
plt.close('all')
a = {'k': [1, 2]}
b = a
big = np.arange(1_000_000)
alias = big
n1 = 7
n2 = 7`);

		// The 8 MB array is in the snapshot once, not once for each name.
		const size = fs.statSync(snapPath(root)).size;
		assert.ok(size > 8e6 && size < 12e6, `the snapshot holds big once: ${size} bytes`);

		const h = await restart();
		let r = await execPy(h, `ax.set_title('after')
print(ax.figure is fig, fig.axes[0] is ax, fig.axes[0].get_title(), len(ax.lines))
print(all(x.figure is fig2 for x in axs.flat), len(fig2.axes), a is b, alias is big, n1 == n2 == 7)`);
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.stdout, 'True True after 1\nTrue 2 True True True\n', show(r.text));
		for (const name of ['fig', 'ax', 'fig2', 'axs', 'a', 'b', 'big', 'alias', 'n1', 'n2'])
			assert.match(r.text, new RegExp(`Restored: [^\\n]*\\b${name}\\b`), `${name} named as restored`);
		// What ax draws reaches fig's file.
		r = await execPy(h, `fig.savefig('workspace/after.png')\n'saved'`);
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.ok(fs.statSync(`${root}/workspace/after.png`).size > 1000);
		await h.close();
	});

	test('a family that cannot be pickled whole is saved name by name; only what cannot be saved is lost', { timeout: 180000 }, async () => {
		const { restart } = await savedAfter('persist-shared-fallback', `
import threading
fig, ax = plt.subplots()
ax.plot([1, 2])
held = [ax, threading.Lock()]
plt.close('all')`);

		const h = await restart();
		const r = await execPy(h, `print(len(ax.lines), len(fig.axes), 'held' in globals())`);
		assert.equal(r.sc.status, 'ok', show(r.text));
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.stdout, '1 1 False\n', show(r.text));
		for (const name of ['fig', 'ax'])
			assert.match(r.text, new RegExp(`Restored: [^\\n]*\\b${name}\\b`), `${name} named as restored`);
		assert.match(r.text, /Could not be saved[^\n]*\bheld \([^)]*lock/, show(r.text));
		assert.doesNotMatch(r.text, /Could not be saved[^\n]*\b(fig|ax) \(/, show(r.text));
		await h.close();
	});
});
