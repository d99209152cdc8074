// Approval names the real file and its project.  Project A's SKILL.md (which
// grants network and programs) is approved; project B, never approved,
// makes its SKILL.md a symlink to A's.  Before, B was approved too (the store
// named the real path alone): --check said approved, and a cell in B reached
// a 127.0.0.1 listener and ran `id`.  Now an approval is recorded for (ROOT,
// real path): B gets the ceiling, with the usual note, until the user
// approves B itself.  A store line of the earlier form ("HEX PATH") still
// approves A, whose ROOT holds the file, and never B.
// As root and as nobody, with namespaces and without them (dockerrun).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { BIN, startClient, newProject, execPy, writeFile, show, sleep, reachableArgv } from './lib.mjs';
import { SKILL_REL, LOOSE, WITHHELD, tmpDir, listener, sha256 } from './trust_lib.mjs';

const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const NOBODY_ARGS = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'];
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');

for (const [mode, pre] of [['namespaces', []], ['no namespaces', [DOCKERRUN]]]) {
	for (const who of AS_ROOT ? ['root', 'nobody'] : ['user']) {
		describe(`a SKILL.md symlinked to another project's approved one, ${mode}, as ${who}`, () => {
			const asNobody = who === 'nobody';
			let a, b, skillA, cfg, home, env, lis;
			// nobody runs copies it can reach (the checkout may be private).
			const argv = asNobody ? reachableArgv(pre) : [...pre, BIN];
			const launch = asNobody ? { command: 'setpriv', commandArgs: [...NOBODY_ARGS, ...argv] }
				: { command: argv[0], commandArgs: argv.slice(1) };
			const cli = (args) => spawnSync(asNobody ? 'setpriv' : BIN, asNobody ? [...NOBODY_ARGS, BIN, ...args] : args,
				{ encoding: 'utf8', timeout: 170000, input: '', env: { PATH: process.env.PATH, ...env } });
			const connect = (tag) => `import socket\ns = socket.create_connection(("127.0.0.1", ${lis.port}), timeout=5)\ns.sendall(b"${tag}")\ns.close()\n"sent"`;
			const id = 'import subprocess\nsubprocess.run(["id", "-u"], capture_output=True, text=True, check=True).stdout.strip()';

			before(async () => {
				a = newProject(`tsl-a-${who}`);
				b = newProject(`tsl-b-${who}`);
				skillA = writeFile(a, SKILL_REL, LOOSE);
				fs.mkdirSync(path.dirname(path.join(b, SKILL_REL)), { recursive: true });
				fs.symlinkSync(skillA, path.join(b, SKILL_REL));
				cfg = tmpDir(`tslcfg-${who}`);
				home = tmpDir(`tslhome-${who}`);
				if (asNobody) for (const d of [a, b, cfg, home]) spawnSync('chown', ['-R', '-h', `${NOBODY}:${NOBODY}`, d]);
				env = { XDG_CONFIG_HOME: cfg, HOME: home };
				lis = await listener();
			});
			after(async () => {
				await lis?.close();
				for (const d of [cfg, home]) fs.rmSync(d, { recursive: true, force: true });
			});

			test('A approved: B is not (--check, the note, the listener hears nothing, no program runs)', { timeout: 170000 }, async () => {
				const t = cli(['--trust', '--yes', '--root', a]);
				assert.equal(t.status, 0, t.stdout + t.stderr);
				const chk = cli(['--check', '--root', b]);
				assert.equal(chk.status, 1, chk.stdout + chk.stderr);
				assert.match(chk.stdout, /project policy: .*SKILL\.md \(a symlink to .*tsl-a-.*SKILL\.md\)/);
				assert.match(chk.stdout, /state: NOT approved on this machine \(for this project\)/);
				const n0 = lis.heard.length;
				const h = await startClient(b, { structured: true, env, ...launch });
				try {
					const c = await execPy(h, connect('LEAK-B'));
					assert.equal(c.sc.error?.denied_by, 'net_access', show(c.sc));
					assert.ok(c.text.includes(WITHHELD), c.text);
					assert.match(c.sc.note, /this project's policy \(.*, a symlink to .*\) asks for more than the built-in policy allows and is not approved on this machine for this project/);
					assert.ok(c.sc.note.includes(`python-sandbox-mcp --trust --root '${b}'`), c.sc.note);
					const x = await execPy(h, id);
					assert.equal(x.sc.error?.denied_by, 'shell_exec', show(x.sc));
				} finally { await h.close(); }
				await sleep(200);
				assert.equal(lis.heard.length, n0, `the listener heard: ${JSON.stringify(lis.heard.slice(n0))}`);
			});

			test('a store line of the earlier form approves the project that holds the file, never the other', { timeout: 170000 }, async () => {
				const store = path.join(cfg, 'python-sandbox-mcp', 'trusted');
				fs.writeFileSync(store, `${sha256(LOOSE)} ${skillA}\n`, { mode: 0o600 });
				if (asNobody) fs.chownSync(store, NOBODY, NOBODY);
				const ha = await startClient(a, { structured: true, env, ...launch });
				try {
					const c = await execPy(ha, connect('HELLO-A'));
					assert.equal(c.sc.status, 'ok', show(c.sc));
					assert.equal(c.sc.note, undefined);
				} finally { await ha.close(); }
				const hb = await startClient(b, { structured: true, env, ...launch });
				try {
					const c = await execPy(hb, connect('LEAK-B2'));
					assert.equal(c.sc.error?.denied_by, 'net_access', show(c.sc));
				} finally { await hb.close(); }
				await sleep(200);
				assert.ok(lis.heard.some((r) => r.data === 'HELLO-A'), JSON.stringify(lis.heard));
				assert.ok(!lis.heard.some((r) => r.data.startsWith('LEAK')), JSON.stringify(lis.heard));
				// Approving B itself is the user's word: then B gets it.
				assert.equal(cli(['--trust', '--yes', '--root', b]).status, 0);
				assert.match(fs.readFileSync(store, 'utf8'), new RegExp(`^[0-9a-f]{64} ${b}\tskill\t${skillA}$`, 'm'));
			});
		});
	}
}
