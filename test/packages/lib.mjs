// Helpers of the package, image and pod tests (make test-packages).
//
// The server runs inside a container, started by the official MCP
// TypeScript SDK client on the host exactly as an agent's MCP configuration
// starts a containerised server: the transport's command is `podman run -i`
// (or `podman exec -i` into a pod's container), so stdin and stdout of the
// server are the MCP stream.  Every effect is checked from outside the
// sandbox: from the host for a bind-mounted project, with `podman exec` for
// a pod's volume.
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, execPy, callTool, jsonResult, show, REPO } from '../integration/lib.mjs';

export { REPO };
export const VERSION = fs.readFileSync(path.join(REPO, 'VERSION'), 'utf8').trim();
// podman's own settings for the tests (test/packages/podman-env.sh).
export const PODMAN_ENV = process.env.CONTAINERS_CONF ? { CONTAINERS_CONF: process.env.CONTAINERS_CONF } : {};
// A secret the tests plant where the code must not reach it.
export const CANARY = 'PSM-PACKAGE-CANARY-7f3a';
export const SKILL_TEXT = fs.readFileSync(path.join(REPO, 'SKILL.md'), 'utf8');

/** podman ARGS; returns { status, stdout, stderr }; throws with both streams when
 * `ok` and the status is not 0. */
export function podman(args, { input = '', ok = true, timeout = 120000 } = {}) {
	const r = spawnSync('podman', args, { encoding: 'utf8', input, timeout, maxBuffer: 64 << 20, env: { ...process.env, ...PODMAN_ENV } });
	if (ok && r.status !== 0)
		throw new Error(`podman ${args.join(' ')}: status ${r.status}\n${r.stdout}\n${r.stderr}`);
	return r;
}

/** A project the container's user 1000 owns, mounted at the same path: under
 * /var/tmp, as the jail refuses a project under /tmp that holds secrets (its
 * private /tmp would show them), and one test puts a .env there. */
const made = [];
process.on('exit', () => { for (const d of made) fs.rmSync(d, { recursive: true, force: true }); });
export function project(tag) {
	const root = fs.mkdtempSync(`/var/tmp/psm-${tag}-`);
	made.push(root);
	fs.chmodSync(root, 0o755);
	fs.chownSync(root, 1000, 1000);
	return root;
}

/** A directory outside every project, holding secret.txt with CANARY. */
export function outsideDir() {
	const d = project('outside');
	fs.writeFileSync(path.join(d, 'secret.txt'), `${CANARY}\n`);
	return d;
}

/** An MCP client whose server is `podman ...args --root ROOT ...` (args end with
 * the image and, unless it is the image's entrypoint, python-sandbox-mcp). */
export async function startInContainer(args, root, opts = {}) {
	return startClient(root, {
		structured: true, ...opts,
		command: 'podman', commandArgs: args,
		env: { ...PODMAN_ENV, ...(opts.env || {}) },
	});
}

/** `--check` output, asserted to name the jail's mode and to find the policy
 * enforced; returns { text, mode }. */
export function assertCheck(r) {
	const text = r.stdout + r.stderr;
	assert.equal(r.status, 0, `--check: status ${r.status}\n${text}`);
	const m = /^mode: (.+)$/m.exec(text);
	assert.ok(m, `--check names the mode:\n${text}`);
	assert.match(text, /^check: the policy is enforced$/m, text);
	assert.match(text, /^jail: enforceable$/m, text);
	return { text, mode: m[1] };
}

/**
 * What the package promises a user, through a real MCP session: the stack
 * with a chart, then each permission of the default policy refused with its
 * name, the state kept.  `exists(rel)` says, from outside the sandbox,
 * whether ROOT/rel exists; ROOT/.env holds a secret; `outside` is a file
 * outside ROOT (as the container names it) holding CANARY; the server was
 * started with PSM_CANARY=CANARY in its environment.
 */
export async function assertServes(h, root, exists, outside) {
	const tools = h.tools.map((t) => t.name).sort();
	assert.deepEqual(tools, ['execute_python', 'list_artifacts', 'verify_outputs']);
	const chart = await execPy(h, [
		'import numpy as np, pandas as pd, matplotlib.pyplot as plt',
		'df = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})',
		'df.plot(x="x", y="y"); plt.savefig("workspace/outputs/chart.png")',
		'int(df.y.sum())',
	].join('\n'), {}, { timeout: 120000 });
	assert.equal(chart.sc.status, 'ok', show(chart.sc));
	assert.equal(chart.sc.result, '285');
	assert.ok(chart.images.length >= 1, 'the chart comes back as an image');
	assert.ok(exists('workspace/outputs/chart.png'), 'the chart is in the workspace, seen from outside');

	const refusals = [
		['a write outside the workspace', `open(${JSON.stringify(path.join(root, 'escaped.txt'))}, "w").write("x")`, 'fs_write'],
		['a TCP connection', 'import socket\nsocket.create_connection(("127.0.0.1", 9), timeout=2)', 'net_access'],
		['a program', 'import subprocess\nsubprocess.run(["true"])', 'shell_exec'],
		['a secret under ROOT', 'open(".env").read()', 'fs_read'],
		['a file outside ROOT', `open(${JSON.stringify(outside)}).read()`, 'fs_read'],
	];
	for (const [what, code, perm] of refusals) {
		const r = await execPy(h, code);
		assert.equal(r.sc.status, 'error', `${what}: ${show(r.sc)}`);
		assert.equal(r.sc.error?.denied_by, perm, `${what}: ${show(r.sc.error)}`);
		assert.equal(r.sc.state, 'kept', `${what}: the state stays`);
		assert.ok(!JSON.stringify(r.res).includes(CANARY), `${what}: no secret in the reply`);
	}
	assert.equal(exists('escaped.txt'), false, 'nothing was written outside the workspace (seen from outside)');
	const kept = await execPy(h, 'int(df.y.sum()) + 1');
	assert.equal(kept.sc.result, '286', 'the session kept its DataFrame through the refusals');
	const env = await execPy(h, 'import os\nsorted(k for k, v in os.environ.items() if "CANARY" in k or "CANARY" in v)');
	assert.equal(env.sc.result, '[]', 'the server\'s environment does not reach the code');

	const v = jsonResult(await callTool(h, 'verify_outputs', { files: ['workspace/outputs/chart.png'] }));
	assert.equal(v.sc.status, 'completed', show(v.sc));
}
