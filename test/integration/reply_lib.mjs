// What the reply tests share: the lines of a reply's error section (and,
// from lib.mjs, the project's own SKILL.md and a project with a variant).
import assert from 'node:assert/strict';
import { execPy, show } from './lib.mjs';

export { SKILL, projectWith } from './lib.mjs';

/** The lines of the error section, without trailing blank lines. */
export function errorLines(r) {
	const e = r.sections.error;
	assert.ok(e, `an error section: ${show(r.text)}`);
	const lines = e.split('\n');
	while (lines.length && lines[lines.length - 1] === '') lines.pop();
	return lines;
}

/** A call in `session` that must end ok. */
export async function ok(h, session, code) {
	const r = await execPy(h, code, { session });
	assert.equal(r.sc.status, 'ok', show(r.sc));
	return r;
}

/** A call in `session` that runs past its 1 s timeout and must roll back. */
export async function timeout(h, session) {
	const r = await execPy(h, 'while True: pass', { session, timeout_s: 1 });
	assert.deepEqual([r.sc.status, r.sc.state], ['timeout', 'rolled_back'], show(r.sc));
	return r;
}
