// Saved sessions and the policy: reset discards the snapshot, persist: false
// writes nothing, persist_mb caps a snapshot and the reply says so once; a
// state too large for memory_mb is not restored, and the note says what to
// raise before the next save replaces it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, writeFile, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, waitLog, end, BUILD, DIGEST } from './persist_lib.mjs';
describe('saved sessions and the policy', () => {
	test('reset: true discards the saved state too', { timeout: 180000 }, async () => {
		const root = newProject('persist-reset');
		const xdg = stateHome();
		let h = await start(root, xdg);
		await execPy(h, 'secret = 41');
		await waitSaved(h, 1);
		let r = await execPy(h, 'fresh = 1', { reset: true });
		assert.equal(r.sc.state, 'new');
		await waitSaved(h, 2);
		await h.close();
		h = await start(root, xdg);
		r = await execPy(h, 'print(fresh)\nprint("secret" in globals())');
		assert.equal(r.sc.state, 'restored', show(r.text));
		assert.equal(r.sc.stdout, '1\nFalse\n');
		// reset on the first call after a restart: nothing comes back.
		await h.close();
		h = await start(root, xdg);
		r = await execPy(h, '"fresh" in globals()', { reset: true });
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.result, 'False');
		await h.close();
	});

	test('persist: false writes nothing and restores nothing', { timeout: 120000 }, async () => {
		const root = newProject('persist-off');
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: no saving\nlimits:\n  persist: false\n---\n');
		const xdg = stateHome();
		let h = await start(root, xdg);
		let r = await execPy(h, 'x = 5');
		assert.equal(r.sc.status, 'ok');
		await execPy(h, 'y = 6');
		await sleep(1500);
		await h.close();
		assert.equal(fs.existsSync(path.join(root, 'workspace', '.sessions')), false, 'no .sessions directory');
		// No key, no lock: nothing of a saved session.  The server's history
		// of the calls (what export reads) is kept all the same.
		assert.equal(fs.existsSync(path.join(xdg, 'python-sandbox-mcp', 'key')), false, 'no key made');
		assert.equal(fs.existsSync(path.join(xdg, 'python-sandbox-mcp', 'locks')), false, 'no lock taken');
		h = await start(root, xdg);
		r = await execPy(h, '"x" in globals()');
		assert.equal(r.sc.state, 'new');
		assert.equal(r.sc.result, 'False');
		await h.close();
	});

	test('over limits.persist_mb the state is not saved, and the reply says so once', { timeout: 300000 }, async () => {
		const root = newProject('persist-cap');
		writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
			'---\nname: t\ndescription: small cap\nlimits:\n  persist_mb: 1\n---\n');
		const xdg = stateHome();
		// Each cell takes its checkpoint, so that each rest saves the state
		// whole (persist_mb bounds snapshots, not a journal of cells).
		const h = await start(root, xdg, { env: { PSM_TEST_REPLAY_MS: '0' } });
		await execPy(h, 'small = 1');
		await waitSaved(h, 1);
		assert.ok(fs.existsSync(snapPath(root)));
		let r = await execPy(h, 'import numpy as np\nbig = np.ones(600_000)');
		assert.equal(r.sc.status, 'ok');
		await waitLog(h.stderr, /state not saved/);
		r = await execPy(h, '1');
		assert.match(r.text, /note:\n.*\(5 MB\) is over limits\.persist_mb \(1 MB\): it is not saved/, show(r.text));
		assert.equal(fs.existsSync(snapPath(root)), false, 'the older snapshot is removed, not restored later as the last state');
		await waitLog(h.stderr, /state not saved/, { count: 2 });
		r = await execPy(h, '2');
		assert.doesNotMatch(r.text, /persist_mb/, 'said once');
		await h.close();
	});

	const SKILL_AT = '.agents/skills/code-interpreter-sandbox-executor/SKILL.md';
	/** A project whose session saved a 100 MB array, then a policy with less memory. */
	async function savedBig(tag, memoryMb) {
		const root = newProject(tag);
		const xdg = stateHome();
		const h = await start(root, xdg);
		const r = await execPy(h, 'import numpy as np\nbig = np.ones(12_500_000)\nbig.nbytes');
		assert.equal(r.sc.status, 'ok', show(r.text));
		await waitSaved(h, 1);
		await end(h, 'eof');
		writeFile(root, SKILL_AT, `---\nname: t\ndescription: less memory\nlimits:\n  memory_mb: ${memoryMb}\n---\n`);
		return { root, xdg, size: fs.statSync(snapPath(root)).size };
	}

	test('a saved state larger than memory_mb is refused by its size, with what to raise', { timeout: 120000 }, async () => {
		const { root, xdg, size } = await savedBig('persist-mem-size', 80);
		const h = await start(root, xdg);
		const r = await execPy(h, '1');
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.execution_count, 1);
		assert.match(r.text, /note:\n.*is not restored: it is 95 MB, more than limits\.memory_mb \(80 MB\) lets the session hold: not restored \(raise memory_mb to restore it; the next save replaces it\)/, show(r.text));
		assert.equal(fs.statSync(snapPath(root)).size, size, 'the snapshot is left as it was');
		await h.close();
	});

	test('a saved state that does not fit beside the interpreter is not restored, and the note says what to raise', { timeout: 120000 }, async () => {
		const { root, xdg } = await savedBig('persist-mem-fit', 128);
		const h = await start(root, xdg);
		const r = await execPy(h, '1');
		assert.equal(r.sc.state, 'new', show(r.text));
		assert.equal(r.sc.execution_count, 1, 'a fresh session counts from 1');
		// Which stops it first depends on the build: the session's own
		// allocation fails, or (under AddressSanitizer, whose shadow memory
		// counts too) the watchdog ends it over memory_mb. Either way the
		// note names memory_mb, and nothing is said to be restored.
		if (r.sc.status === 'memory')
			assert.match(r.text, /note:\n.*over memory_mb \(128 MB\)[^\n]*\nthe saved state of session default could not be loaded in this call/, show(r.text));
		else
			assert.match(r.text, /note:\n.*could not be loaded \(\w+Error: [^)]*\): a state that fills most of limits\.memory_mb \(128 MB\) needs more to come back, so raise memory_mb to restore it, before the next save of this session replaces it; this call ran in a fresh session/, show(r.text));
		assert.doesNotMatch(r.text, /Restored: /);
		await h.close();
	});
});

