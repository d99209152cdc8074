// The OCI image (make image: localhost/python-sandbox-mcp:VERSION) under
// podman's defaults: no --user, no security option, no capability added,
// podman's default seccomp profile and network; the project bind-mounted at
// /project as the image's README line shows.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { writeFile } from '../integration/lib.mjs';
import { podman, project, outsideDir, startInContainer, assertCheck, assertServes, VERSION, CANARY, REPO } from './lib.mjs';

const IMAGE = process.env.PSM_IMAGE || `localhost/python-sandbox-mcp:${VERSION}`;

describe(`the image under podman's defaults (${IMAGE})`, () => {
	test('non-root by default, the server as its entrypoint, the version labelled', () => {
		const cfg = JSON.parse(podman(['image', 'inspect', IMAGE]).stdout)[0].Config;
		assert.equal(cfg.User, '1000:1000', 'a numeric user, as runAsNonRoot needs');
		assert.deepEqual(cfg.Entrypoint, ['python-sandbox-mcp']);
		assert.equal(cfg.WorkingDir, '/project');
		assert.equal(cfg.Labels['org.opencontainers.image.version'], VERSION);
		const id = podman(['run', '--rm', '--entrypoint', 'id', IMAGE]).stdout;
		assert.match(id, /^uid=1000\(agent\) gid=1000\(agent\)/);
		assert.equal(podman(['run', '--rm', IMAGE, '--version']).stdout, `python-sandbox-mcp ${VERSION}\n`);
	});

	test('--check names the mode and finds the policy enforced', () => {
		const root = project('img-check');
		const { mode, text } = assertCheck(podman(['run', '--rm', '-v', `${root}:/project`, IMAGE, '--check'], { ok: false }));
		assert.match(text, /^root: \/project$/m, 'the working directory is the project');
		console.log(`# image, podman defaults: mode ${mode}`);
	});

	test('the escape suite passes in the image, as its user (both jail modes)', { timeout: 600000 }, () => {
		// test/jail/run.sh with its helpers, built from this tree (the same
		// code as the package), mounted read-only.
		const r = podman(['run', '--rm', '-v', `${path.join(REPO, 'build/helpers')}:/psm/helpers:ro`,
			'-v', `${path.join(REPO, 'test/jail')}:/psm/jail:ro`, '--entrypoint', 'bash', IMAGE,
			'/psm/jail/run.sh', '/psm/helpers'], { ok: false, timeout: 600000 });
		const last = r.stdout.trim().split('\n').pop();
		console.log(`# image: escape suite ${last}`);
		assert.equal(r.status, 0, r.stdout.split('\n').filter((l) => /^FAIL|^     \|/.test(l)).join('\n') + r.stderr);
		assert.match(last, /^\d+ passed, 0 failed$/);
	});

	describe('an MCP session through the official SDK', () => {
		let h, root;
		before(async () => {
			root = project('img-mcp');
			writeFile(root, '.env', `TOKEN=${CANARY}\n`);
			const outside = outsideDir();
			h = await startInContainer(['run', '-i', '--rm', '-e', `PSM_CANARY=${CANARY}`,
				'-v', `${root}:/project`, '-v', `${outside}:/outside:ro`, IMAGE], '/project');
		});
		after(async () => { await h?.close(); });

		test('execute_python serves numpy, pandas and a chart, with every permission of the policy enforced', { timeout: 180000 }, async () => {
			await assertServes(h, '/project', (rel) => fs.existsSync(path.join(root, rel)), '/outside/secret.txt');
		});
	});
});
