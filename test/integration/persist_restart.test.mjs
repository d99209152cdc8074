// Saved sessions: every object comes back after the server ends (end of input,
// SIGTERM, SIGKILL after the save), checked by value from outside.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { execPy, newProject, writeFile, sleep, show } from './lib.mjs';
import { stateHome, start, snapPath, waitSaved, end, BUILD, DIGEST } from './persist_lib.mjs';
describe('saved sessions survive a restart of the server', () => {
	for (const how of ['eof', 'SIGTERM', 'SIGKILL']) {
		test(`every object comes back after ${how}; what cannot be saved is named`, { timeout: 180000 }, async () => {
			const root = newProject('persist');
			const xdg = stateHome();
			let h = await start(root, xdg);
			let r = await execPy(h, BUILD);
			assert.equal(r.sc.status, 'ok', show(r.text));
			await waitSaved(h, 1);
			r = await execPy(h, DIGEST);
			assert.equal(r.sc.status, 'ok', show(r.text));
			const before = r.sc.stdout;
			await waitSaved(h, 2);
			await end(h, how);

			// From outside: the snapshot and the key are private files.
			const st = fs.lstatSync(snapPath(root));
			assert.ok(st.isFile(), 'state.snap is a regular file');
			assert.equal(st.mode & 0o777, 0o600);
			assert.equal(fs.statSync(path.dirname(snapPath(root))).mode & 0o777, 0o700);
			const key = path.join(xdg, 'python-sandbox-mcp', 'key');
			assert.equal(fs.lstatSync(key).mode & 0o777, 0o600);
			assert.equal(fs.statSync(path.dirname(key)).mode & 0o777, 0o700);
			assert.equal(fs.statSync(key).size, 32);

			h = await start(root, xdg);
			r = await execPy(h, DIGEST);
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.equal(r.sc.state, 'restored', show(r.text));
			assert.match(r.head.rest, /state restored/);
			assert.equal(r.sc.stdout, before, 'every value equal after the restart');
			assert.equal(r.sc.execution_count, 3, 'the execution counter goes on');
			assert.match(r.text, /note:\n.*restored from its state saved \d+ s ago \(after cell 2\)/);
			for (const name of ['df', 'arr', 'd', 'scale', 'Account', 'acct', 'np', 'pd'])
				assert.match(r.text, new RegExp(`Restored: [^\\n]*\\b${name}\\b`), `${name} named as restored`);
			for (const name of ['fh', 'gen', 'lock'])
				assert.match(r.text, new RegExp(`Could not be saved[^\\n]*\\b${name} \\(`), `${name} named as not saved`);
			// The next call is an ordinary one.
			r = await execPy(h, 'scale(acct.cents)');
			assert.equal(r.sc.state, 'kept');
			assert.equal(r.sc.result, '3702');
			// A restored function's traceback shows its cell's line.
			r = await execPy(h, 'scale(None)');
			assert.match(r.sc.error.traceback, /<cell 1>/);
			assert.match(r.sc.error.traceback, /return x \* k/);
			await h.close();
		});
	}

});
