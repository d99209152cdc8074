// The interpreter dying during its start-up: whatever step it dies at, every
// pending call gets an answer that says so (never silence), and the server
// keeps serving.  PSM_TEST_ZYGOTE_KILL makes the zygote SIGKILL itself at a
// named step; the server cannot tell that from any other sudden death.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';

import fs from 'node:fs';

import { startClient, newProject, execPy, callTool, writeFile, show } from './lib.mjs';

const SKILL = fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8');

const STEPS = ['exec', 'config', 'jail', 'python', 'ready', 'spawn'];

describe('the zygote killed at each step of its start-up', () => {
	for (const step of STEPS) {
		test(`killed at "${step}": both pending calls are answered with the reason`, { timeout: 90000 }, async () => {
			const h = await startClient(newProject(`kill-${step}`), { structured: true, env: { PSM_TEST_ZYGOTE_KILL: step } });
			try {
				// Two calls in flight at once, in two sessions: neither may be left waiting.
				const [a, b] = await Promise.all([
					execPy(h, 'print(6*7)', {}, { timeout: 60000 }),
					execPy(h, 'print(7*8)', { session: 'other' }, { timeout: 60000 }),
				]);
				for (const r of [a, b]) {
					assert.equal(r.res.isError, true, show(r.text));
					assert.match(r.text, /interpreter|sandbox|session/i, show(r.text));
				}
				// The server itself is still there and answers.
				const l = await callTool(h, 'list_artifacts', {});
				assert.equal(l.isError ?? false, false);
			} finally {
				await h.close();
			}
		});
	}
});

// A configuration larger than the socket's buffer: the server is still
// writing it when the zygote dies, so the write fails (EPIPE) instead of
// landing in the buffer.  That failure once left the call unanswered.
test('the zygote dies while the server is still sending its configuration', { timeout: 90000 }, async () => {
	const root = newProject('kill-config-send');
	writeFile(root, '.agents/skills/code-interpreter-sandbox-executor/SKILL.md',
		SKILL + '\n' + ('padding line to make the file larger than a socket buffer\n').repeat(15000));
	const h = await startClient(root, { structured: true, env: { PSM_TEST_ZYGOTE_KILL: 'exec' } });
	try {
		const r = await execPy(h, 'print(6*7)', {}, { timeout: 60000 });
		assert.equal(r.res.isError, true, show(r.text));
		assert.match(r.text, /interpreter/i, show(r.text));
	} finally {
		await h.close();
	}
});
