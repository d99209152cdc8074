// What the reply tests share: the project's own SKILL.md, a project with
// a variant of it, and the lines of a reply's error section.
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { newProject, writeFile, show } from './lib.mjs';

export const SKILL = fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8');

/** A project whose SKILL.md has some text replaced; returns [root, skillPath]. */
export function projectWith(tag, replacements) {
	const root = newProject(tag);
	let text = SKILL;
	for (const [from, to] of replacements) {
		assert.ok(text.includes(from), `SKILL.md has ${from}`);
		text = text.replace(from, to);
	}
	return [root, writeFile(root, 'policy/SKILL.md', text)];
}

/** The lines of the error section, without trailing blank lines. */
export function errorLines(r) {
	const e = r.sections.error;
	assert.ok(e, `an error section: ${show(r.text)}`);
	const lines = e.split('\n');
	while (lines.length && lines[lines.length - 1] === '') lines.pop();
	return lines;
}
