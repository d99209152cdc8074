// limits.max_workspace_mb fails closed and counts everything the sandbox
// writes: what the server's walks cannot see (directories nested deeper
// than 64 levels, a directory it cannot read) counts as over the limit and
// the reply says why; the server's own directories (.cache, .logs,
// .sessions) count; so do the fs_write directories outside the workspace.
// Both jail modes (namespaces, and Landlock + seccomp under Docker's
// default rules through build/helpers/dockerrun), as root and as nobody.
// Effects checked from outside: the reply, the files the cell left,
// list_artifacts's note, the session's state at the next call.
// Attack: under max_workspace_mb 20, 3 x 100 MB below 70 nested
// directories (du 401 MB), 60 MB real + 300 MB sparse in .cache, 300 MB in
// results/ (fs_write): each ended ok.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, execPy, callTool, jsonResult, show, BIN, reachableArgv, SKILL, newProject, writeFile } from './lib.mjs';

const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const AS_ROOT = process.getuid() === 0;
const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];

const modes = [['namespaces', 'root'], ['Docker rules', AS_ROOT ? 'root' : 'user']];
if (AS_ROOT) modes.push(['Docker rules', 'nobody'], ['namespaces', 'nobody']);

for (const [mode, who] of modes) {
	describe(`max_workspace_mb fails closed (${mode}, as ${who})`, () => {
		let h, root, skill, env, as;
		before(async () => {
			root = path.join(newProject(`wsunseen-${who}`, { privateDir: true }), 'proj');
			const text = SKILL.replace('max_workspace_mb: 4096', 'max_workspace_mb: 20')
				.replace('fs_write: workspace', 'fs_write: [workspace, results]');
			skill = writeFile(root, 'policy/SKILL.md', text);
			fs.mkdirSync(path.join(root, 'results'));
			fs.mkdirSync(path.join(root, 'workspace', 'outputs'), { recursive: true });
			// fs_write outside the workspace loosens the built-in policy:
			// approved (--trust) in a store of the test's own.
			const cfg = path.join(path.dirname(root), 'cfg');
			fs.mkdirSync(cfg, { mode: 0o700 });
			env = { XDG_CONFIG_HOME: cfg, HOME: cfg };
			if (who === 'nobody') spawnSync('chown', ['-R', '65534:65534', path.dirname(root)]);
			// nobody runs copies it can reach (the checkout may be private).
			const nobody = who === 'nobody';
			const bin = nobody ? reachableArgv()[0] : BIN;
			const server = mode === 'namespaces' ? [bin] : nobody ? reachableArgv([DOCKERRUN]) : [DOCKERRUN, BIN];
			as = (argv) => (nobody ? ['setpriv', [...NOBODY, ...argv]] : [argv[0], argv.slice(1)]);
			const [tc, ta] = as([bin, '--trust', '--yes', '--root', root, '--skill', skill]);
			const t = spawnSync(tc, ta, { encoding: 'utf8', input: '', env: { PATH: process.env.PATH, ...env } });
			assert.equal(t.status, 0, t.stdout + t.stderr);
			const [command, commandArgs] = as(server);
			h = await startClient(root, { structured: true, args: ['--skill', skill], env, command, commandArgs });
			h.bin = bin;
		});
		after(async () => { await h?.close(); });

		// The call is stopped and rolled back; once `cleanup` removed what
		// it wrote (the server deletes nothing), the state is the one before.
		async function stopped(code, why, cleanup, check = async () => {}) {
			assert.equal((await execPy(h, 'kept = 7')).sc.status, 'ok');
			const r = await execPy(h, `kept = 8\n${code}\n"done"`, {}, { timeout: 120000 });
			try {
				assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['limits', 153, 'rolled_back'], show(r.sc));
				assert.equal(r.sc.error?.denied_by, 'limits', show(r.sc.error));
				assert.match(r.sc.error.message, why, show(r.sc.error));
				await check();
			} finally {
				cleanup();
			}
			const k = await execPy(h, 'kept');
			assert.equal(k.sc.result, '7', show(k.sc));
		}

		test('3 x 100 MB below 70 nested directories: limits, the reply says why', { timeout: 180000 }, async () => {
			await stopped([
				'import os',
				'd = "workspace/" + "/".join(["n"] * 70)',
				'os.makedirs(d)',
				'for i in range(3):',
				'    with open(f"{d}/big{i}.bin", "wb") as f:',
				'        f.truncate(100 << 20)',
			].join('\n'), /could not measure all .*directories nested deeper than 64 levels \(first at workspace\/n\/n\//,
			() => fs.rmSync(path.join(root, 'workspace', 'n'), { recursive: true, force: true }),
			async () => {
				const l = jsonResult(await callTool(h, 'list_artifacts', { include_hidden: true })).sc;
				assert.equal(l.truncated, true, show(l));
				assert.match(l.note, /not everything could be listed: the workspace holds directories nested deeper than 64 levels/, show(l));
				// Any call while it is there is stopped.
				const again = await execPy(h, 'x = 1');
				assert.equal(again.sc.status, 'limits', show(again.sc));
				assert.match(again.sc.error.message, /nested deeper than 64 levels/);
			});
		});

		for (const dir of ['.cache', '.logs', '.sessions']) {
			test(`60 MB real and 300 MB sparse in workspace/${dir}: limits`, { timeout: 120000 }, async () => {
				await stopped([
					'import os',
					`os.makedirs("workspace/${dir}/x", exist_ok=True)`,
					`open("workspace/${dir}/x/real.bin", "wb").write(b"r" * (60 << 20))`,
					`with open("workspace/${dir}/x/sparse.bin", "wb") as f:`,
					'    f.truncate(300 << 20)',
				].join('\n'), /past limits\.max_workspace_mb \(20 MB\)/,
				() => fs.rmSync(path.join(root, 'workspace', dir, 'x'), { recursive: true, force: true }),
				// (Under load the watcher may stop the write halfway.)
				async () => assert.ok(fs.existsSync(path.join(root, 'workspace', dir, 'x', 'real.bin')), 'the server deletes nothing'));
			});
		}

		test('300 MB in results/ (fs_write outside the workspace): limits', { timeout: 120000 }, async () => {
			await stopped('with open("results/r.bin", "wb") as f:\n    f.truncate(300 << 20)', /past limits\.max_workspace_mb \(20 MB\)/,
				() => fs.rmSync(path.join(root, 'results', 'r.bin'), { force: true }),
				async () => assert.equal(fs.statSync(path.join(root, 'results', 'r.bin')).size, 300 * 1024 * 1024));
			assert.equal((await execPy(h, 'open("results/small.txt", "w").write("ok")')).sc.status, 'ok');
		});

		// (Once per user: --check starts a session of its own.)
		if (mode === 'namespaces' || who === 'nobody') test('--check says that results/ counts against max_workspace_mb', { timeout: 180000 }, () => {
			const [c, a] = as([h.bin, '--check', '--root', root, '--skill', skill]);
			const r = spawnSync(c, a, { encoding: 'utf8', input: '', timeout: 170000, env: { PATH: process.env.PATH, ...env } });
			assert.ok(r.stdout.includes(`fs_write  counted       ${root}/results (outside the workspace) counts with the workspace against max_workspace_mb (20 MB)`),
				r.stdout + r.stderr);
		});

		if (who === 'nobody') {
			test('a directory the server cannot read: limits, the reply says why', { timeout: 120000 }, async () => {
				// Made without read permission (mkdir's mode: chmod is refused
				// without namespaces), a file written in it all the same.
				await stopped('import os\nos.mkdir("workspace/locked", 0o300)\nopen("workspace/locked/f", "w").write("x" * 100)',
					/a directory or file the server cannot read \(first at workspace\/locked/,
					() => fs.rmSync(path.join(root, 'workspace', 'locked'), { recursive: true, force: true }));
			});
		}
	});
}
