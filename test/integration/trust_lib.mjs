// Workspace trust through the real binary and the MCP SDK client (shared by
// trust.test.mjs, trust_nobody.test.mjs and trust_store.test.mjs, so that each
// file stays short enough for the per-file timeout under the sanitizers): a
// project's SKILL.md that asks for more than the built-in policy (network,
// programs) gets none of it until the user approves that exact file with
// --trust; any change to the file withdraws the approval; the approval store
// lives outside the sandbox's reach and is refused when planted as a symlink
// or inside the project.  Every effect is checked from outside: a loopback
// listener's log, the store's bytes and modes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, show } from './lib.mjs';

export const SKILL_REL = '.agents/skills/code-interpreter-sandbox-executor/SKILL.md';
export const WITHHELD = "withheld: the project's policy is not approved on this machine";
const NOBODY = 65534;

export const LOOSE = `---
name: loose
description: a project that asks for the network and for programs
permissions:
  fs_read: true
  fs_write: workspace
  shell_exec: true
  net_access: true
---
Body.
`;

// A TCP listener on 127.0.0.1 that records every connection and byte.
export async function listener() {
	const heard = [];
	const server = net.createServer((sock) => {
		const rec = { data: '' };
		heard.push(rec);
		sock.on('data', (d) => { rec.data += d.toString('utf8'); });
		sock.on('error', () => {});
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	return { heard, port: server.address().port, close: () => new Promise((r) => server.close(r)) };
}

export const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');

export function tmpDir(tag) {
	const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `psm-${tag}-`)));
	fs.chmodSync(d, 0o755);
	return d;
}

function chownR(p, uid) {
	fs.lchownSync(p, uid, uid);
	if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) chownR(path.join(p, n), uid);
}

/** A cell that tries to read, append to and list the approval store, to
 *  create a file beside it, and to cat it (shell_exec granted); its result
 *  is the list of what each attempt raised, then whether cat failed. */
export function storeReachCode(store, cfg) {
	return `import os, subprocess
out = []
for f in (lambda: open(${JSON.stringify(store)}).read(), lambda: open(${JSON.stringify(store)}, "a").write("x"),
          lambda: os.listdir(${JSON.stringify(cfg)}), lambda: open(${JSON.stringify(cfg + '/python-sandbox-mcp/evil')}, "w")):
    try:
        f(); out.append("REACHED")
    except OSError as e:
        out.append(type(e).__name__)
p = subprocess.run(["cat", ${JSON.stringify(store)}], capture_output=True, text=True)
out.append(p.returncode != 0 and p.stdout == "")
out`;
}

/** The approve / change / untrust cycle as `who` ('root' or 'nobody', through setpriv). */
export function trustCycle(who) {
	const asNobody = who === 'nobody';
	const wrap = asNobody ? { command: 'setpriv', commandArgs: ['--reuid=65534', '--regid=65534', '--clear-groups', BIN] } : {};

	describe(`workspace trust (${who})`, () => {
		let root, cfg, home, skill, store, lis, env;

		// The CLI as the same user as the server.
		function cli(args, opts = {}) {
			const argv = asNobody ? ['--reuid=65534', '--regid=65534', '--clear-groups', BIN, ...args] : args;
			return spawnSync(asNobody ? 'setpriv' : BIN, argv, { encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env }, ...opts });
		}
		async function start(extraEnv = {}) {
			return startClient(root, { structured: true, env: { ...env, ...extraEnv }, ...wrap });
		}
		const connectCode = (tag) => `import socket\ns = socket.create_connection(("127.0.0.1", ${lis.port}), timeout=5)\ns.sendall(b"${tag}")\ns.close()\n"sent"`;
		const idCode = 'import subprocess\nsubprocess.run(["id", "-u"], capture_output=True, text=True, check=True).stdout.strip()';

		// Both permissions are refused, with the withheld line; the listener
		// heard nothing.
		async function assertWithheld(h, tag) {
			const n0 = lis.heard.length;
			const first = await execPy(h, '1 + 1', { session: `first-${tag}` });
			assert.equal(first.sc.status, 'ok', show(first.sc));
			assert.match(first.text, /\nnote:\n/, first.text);
			assert.match(first.text, /- net_access: true/);
			assert.match(first.text, /- shell_exec: true/);
			assert.ok(first.text.includes(`python-sandbox-mcp --trust --root '${root}'`), first.text);
			assert.match(first.sc.note, /net_access: true[\s\S]*shell_exec: true/);

			const c = await execPy(h, connectCode(`LEAK-${tag}`), { session: `first-${tag}` });
			assert.equal(c.sc.status, 'error', show(c.sc));
			assert.equal(c.sc.error.denied_by, 'net_access', show(c.sc.error));
			assert.ok(c.text.includes('denied_by: net_access\n' + WITHHELD), c.text);
			assert.equal(c.sc.error.withheld, "the project's policy is not approved on this machine");
			assert.doesNotMatch(c.text, /\nnote:\n/, 'the note comes with the first reply of a session only');

			const x = await execPy(h, idCode, { session: `first-${tag}` });
			assert.equal(x.sc.status, 'error', show(x.sc));
			assert.equal(x.sc.error.denied_by, 'shell_exec', show(x.sc.error));
			assert.ok(x.text.includes(WITHHELD), x.text);
			await new Promise((r) => setTimeout(r, 200));
			assert.equal(lis.heard.length, n0, `the listener heard: ${JSON.stringify(lis.heard.slice(n0))}`);
		}

		async function assertGranted(h, tag) {
			const c = await execPy(h, connectCode(`HELLO-${tag}`), { session: `g-${tag}` });
			assert.equal(c.sc.status, 'ok', show(c.sc));
			assert.doesNotMatch(c.text, /\nnote:\n/, 'nothing withheld: no note');
			assert.equal(c.sc.note, undefined);
			const t0 = Date.now();
			while (!lis.heard.some((r) => r.data === `HELLO-${tag}`) && Date.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 50));
			assert.ok(lis.heard.some((r) => r.data === `HELLO-${tag}`), `the listener heard ${JSON.stringify(lis.heard)}`);
			const x = await execPy(h, idCode, { session: `g-${tag}` });
			assert.equal(x.sc.status, 'ok', show(x.sc));
			assert.match(x.sc.result, /^'\d+'$/);
		}

		before(async () => {
			root = newProject(`trust-${who}`);
			cfg = tmpDir(`trustcfg-${who}`);
			home = tmpDir(`trusthome-${who}`);
			skill = writeFile(root, SKILL_REL, LOOSE);
			store = path.join(cfg, 'python-sandbox-mcp', 'trusted');
			if (asNobody) { chownR(root, NOBODY); chownR(cfg, NOBODY); chownR(home, NOBODY); }
			env = { XDG_CONFIG_HOME: cfg, HOME: home };
			lis = await listener();
		});
		after(async () => {
			await lis?.close();
			for (const d of [cfg, home]) fs.rmSync(d, { recursive: true, force: true });
		});

		test('unapproved: neither network nor programs; the first reply of each session says what was withheld and how to approve', { timeout: 120000 }, async () => {
			const h = await start();
			try {
				await assertWithheld(h, 'a');
				const b = await execPy(h, '2', { session: 'other' }); // another session: the note again
				assert.match(b.text, /\nnote:\n[\s\S]*- net_access: true\n- shell_exec: true/, b.text);
				assert.match(h.stderr(), /net_access: true/, 'logged on stderr at start');
			} finally { await h.close(); }
		});

		test('--trust without a terminal and without --yes refuses and records nothing', () => {
			const r = cli(['--trust', '--root', root]);
			assert.equal(r.status, 2, r.stdout + r.stderr);
			assert.match(r.stderr, /terminal[\s\S]*--yes/);
			assert.match(r.stdout, /- net_access: true\n- shell_exec: true/, 'it shows what would be granted');
			assert.equal(fs.existsSync(store), false);
		});

		test('after --trust --yes both work; the store is the user\'s own (0600 in a 0700 directory) and out of the code\'s reach', { timeout: 170000 }, async () => {
			const r = cli(['--trust', '--yes', '--root', root]);
			assert.equal(r.status, 0, r.stdout + r.stderr);
			const st = fs.statSync(store), dst = fs.statSync(path.dirname(store));
			assert.equal(st.mode & 0o7777, 0o600);
			assert.equal(dst.mode & 0o7777, 0o700);
			assert.equal(st.uid, asNobody ? NOBODY : 0);
			assert.ok(fs.readFileSync(store, 'utf8').includes(`${sha256(LOOSE)} ${root}\tskill\t${skill}\n`), 'the project, the path and SHA-256 of the bytes');
			// One server for both (each start costs seconds under the
			// sanitizers): the grants work, and even with them the store
			// stays out of the code's reach.
			const before = fs.readFileSync(store);
			const mtime = fs.statSync(store).mtimeMs;
			const h = await start();
			try {
				await assertGranted(h, 'approved');
				const r = await execPy(h, storeReachCode(store, cfg));
				assert.equal(r.sc.status, 'ok', show(r.sc));
				assert.doesNotMatch(r.sc.result, /REACHED/);
				assert.match(r.sc.result, /True\]$/);
			} finally { await h.close(); }
			assert.deepEqual(fs.readFileSync(store), before);
			assert.equal(fs.statSync(store).mtimeMs, mtime);
			assert.deepEqual(fs.readdirSync(path.dirname(store)), ['trusted']);
		});

		test('one byte of the file changed: both are withheld again', { timeout: 120000 }, async () => {
			fs.writeFileSync(skill, LOOSE.replace('Body.', 'Body!'));
			const h = await start();
			try { await assertWithheld(h, 'changed'); } finally { await h.close(); }
			fs.writeFileSync(skill, LOOSE);
		});

		test('--untrust withdraws the approval', { timeout: 120000 }, async () => {
			// --trust without --yes looks the file up first: an approved
			// file needs no question (exit 0), an unapproved one does.
			const again = cli(['--trust', '--root', root]);
			assert.equal(again.status, 0, again.stdout + again.stderr);
			assert.match(again.stdout, /already approved/, 'the original bytes are approved again');
			const r = cli(['--untrust', '--root', root]);
			assert.equal(r.status, 0, r.stdout + r.stderr);
			assert.match(r.stdout, /no longer approved/);
			assert.ok(!fs.readFileSync(store, 'utf8').includes(skill));
			const after = cli(['--trust', '--root', root]);
			assert.equal(after.status, 2, 'not approved any more: it would have to ask');
			assert.doesNotMatch(after.stdout, /already approved/);
		});
	});
}
