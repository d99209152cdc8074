// What the reply tests share: the lines of a reply's error section (and,
// from lib.mjs, the project's own SKILL.md and a project with a variant).
import assert from 'node:assert/strict';
import { show } from './lib.mjs';

export { SKILL, projectWith } from './lib.mjs';

/** The lines of the error section, without trailing blank lines. */
export function errorLines(r) {
	const e = r.sections.error;
	assert.ok(e, `an error section: ${show(r.text)}`);
	const lines = e.split('\n');
	while (lines.length && lines[lines.length - 1] === '') lines.pop();
	return lines;
}
