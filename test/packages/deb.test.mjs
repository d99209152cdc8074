// The Debian package in a clean Debian 12 container with no network
// (PSM_PKGTEST_IMAGE, made by test/packages/pkgtest-image.sh: apt satisfied
// Depends from downloaded files, dpkg -i installed the package): what a user
// gets, as the user `agent` (uid 1000), every container with --network=none.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { writeFile } from '../integration/lib.mjs';
import { podman, project, outsideDir, startInContainer, assertCheck, assertServes, VERSION, SKILL_TEXT, CANARY } from './lib.mjs';

const IMAGE = process.env.PSM_PKGTEST_IMAGE || `localhost/psm-pkgtest:${VERSION}`;
const run = (args, opts) => podman(['run', '--rm', '--network=none', ...args], opts);
const asAgent = (args, opts) => run(['--user', 'agent', ...args], opts);

describe(`the package in Debian 12 without network (${IMAGE})`, () => {
	test('dpkg has it installed, with the man page, the docs and the skill; no AppArmor profile where none is needed', () => {
		const r = run([IMAGE, 'sh', '-c', "dpkg-query -W -f '${Status} ${Version}\\n' python-sandbox-mcp; dpkg -L python-sandbox-mcp; ls /etc/apparmor.d/python-sandbox-mcp 2>&1; true"]);
		const lines = r.stdout.split('\n');
		assert.equal(lines[0], `install ok installed ${VERSION}`);
		for (const f of ['/usr/bin/python-sandbox-mcp', '/usr/bin/python-sandbox-mcp-install-skill',
			'/usr/share/man/man1/python-sandbox-mcp.1.gz', '/usr/share/python-sandbox-mcp/SKILL.md',
			'/usr/share/doc/python-sandbox-mcp/copyright', '/usr/share/doc/python-sandbox-mcp/docs/SECURITY.md.gz'])
			assert.ok(lines.includes(f), `dpkg -L lists ${f}`);
		// This kernel has no AppArmor: postinst wrote no profile.
		assert.match(r.stdout, /No such file or directory/);
	});

	test('dpkg-reconfigure decides about the AppArmor profile again; dpkg --purge leaves nothing behind', () => {
		const r = run([IMAGE, 'sh', '-c', [
			'DEBIAN_FRONTEND=noninteractive dpkg-reconfigure python-sandbox-mcp',
			'dpkg --purge python-sandbox-mcp >/dev/null',
			'ls -d /usr/bin/python-sandbox-mcp* /usr/share/python-sandbox-mcp /usr/share/doc/python-sandbox-mcp /etc/apparmor.d/python-sandbox-mcp 2>/dev/null',
			'dpkg-query -W python-sandbox-mcp 2>&1 || true'].join('; ')]);
		assert.match(r.stdout, /^apparmor: this host does not restrict user namespaces; no profile needed$/m, r.stdout + r.stderr);
		assert.doesNotMatch(r.stdout, /^\//m, `nothing of the package is left: ${r.stdout}`);
		assert.match(r.stdout, /no packages found matching python-sandbox-mcp/);
	});

	test('-h, --help and --version as a user; the man page is the installed version\'s', () => {
		const h = asAgent([IMAGE, 'python-sandbox-mcp', '-h']);
		assert.match(h.stdout, /^usage: python-sandbox-mcp /);
		assert.equal(asAgent([IMAGE, 'python-sandbox-mcp', '--help']).stdout, h.stdout);
		assert.equal(asAgent([IMAGE, 'python-sandbox-mcp', '--version']).stdout, `python-sandbox-mcp ${VERSION}\n`);
		const man = asAgent([IMAGE, 'sh', '-c', 'zcat /usr/share/man/man1/python-sandbox-mcp.1.gz']).stdout;
		assert.match(man, new RegExp(`^\\.TH PYTHON-SANDBOX-MCP 1 "\\d{4}-\\d\\d-\\d\\d" "python-sandbox-mcp ${VERSION.replace(/\./g, '\\.')}"`, 'm'));
		assert.doesNotMatch(man, /@[A-Z]+@/, 'every placeholder replaced');
	});

	test('python-sandbox-mcp-install-skill puts the skill in a project without the source tree; an edited one is kept', () => {
		const root = project('pkg-skill');
		const v = ['-v', `${root}:${root}`, '-w', root];
		const r = asAgent([...v, IMAGE, 'python-sandbox-mcp-install-skill']);
		for (const a of ['.agents', '.claude']) {
			const f = path.join(root, a, 'skills/code-interpreter-sandbox-executor/SKILL.md');
			assert.equal(fs.readFileSync(f, 'utf8'), SKILL_TEXT, `${f} is the built-in SKILL.md`);
			assert.match(r.stdout, new RegExp(`installed .*${a}/skills/code-interpreter-sandbox-executor/SKILL.md`));
		}
		const edited = path.join(root, '.claude/skills/code-interpreter-sandbox-executor/SKILL.md');
		fs.writeFileSync(edited, SKILL_TEXT.replace('timeout_s: 30', 'timeout_s: 20'));
		const again = asAgent([...v, IMAGE, 'python-sandbox-mcp-install-skill'], { ok: false });
		assert.equal(again.status, 1, again.stderr);
		assert.match(again.stderr, /kept .*\.claude.*differs.*--force/);
		assert.match(fs.readFileSync(edited, 'utf8'), /timeout_s: 20/);
		asAgent([...v, IMAGE, 'python-sandbox-mcp-install-skill', '--force']);
		assert.equal(fs.readFileSync(edited, 'utf8'), SKILL_TEXT);
	});

	test('--check as a user names the mode and finds the policy enforced', () => {
		const root = project('pkg-check');
		const { mode } = assertCheck(asAgent(['-v', `${root}:${root}`, IMAGE, 'python-sandbox-mcp', '--check', '--root', root], { ok: false }));
		console.log(`# package, podman defaults, user agent: mode ${mode}`);
	});

	describe('an MCP session as a user, through the official SDK', () => {
		let h, root, outside;
		before(async () => {
			root = project('pkg-mcp');
			writeFile(root, '.env', `TOKEN=${CANARY}\n`);
			outside = outsideDir();
			// The skill as the package installs it: the server reads it as the policy.
			asAgent(['-v', `${root}:${root}`, '-w', root, IMAGE, 'python-sandbox-mcp-install-skill']);
			h = await startInContainer(['run', '-i', '--rm', '--network=none', '--user', 'agent',
				'-e', `PSM_CANARY=${CANARY}`, '-v', `${root}:${root}`, '-v', `${outside}:/outside:ro`, IMAGE, 'python-sandbox-mcp'], root);
		});
		after(async () => { await h?.close(); });

		test('execute_python serves numpy, pandas and a chart, with every permission of the policy enforced', { timeout: 180000 }, async () => {
			await assertServes(h, root, (rel) => fs.existsSync(path.join(root, rel)), '/outside/secret.txt');
		});
	});
});
