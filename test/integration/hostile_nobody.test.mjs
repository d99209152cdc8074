// The hostile-session findings again, with the server run by an unprivileged
// user (nobody, through setpriv, when the tests run as root; the current
// user otherwise), with namespaces and without them (build/helpers/dockerrun:
// a container runtime's default rules).  Such a server has no capability
// over its own sessions' processes: with namespaces they are not dumpable,
// so /proc/PID/fd and /proc/PID/root of a session are closed to it; without
// them they stay dumpable (each in a Landlock domain of its own), so it
// reads their descriptors and counts their memfds.  Every effect is checked from outside: CPU time of
// the session's processes, heartbeat files, the reply.
//
// The binary and dockerrun are run from a copy in a directory nobody can
// enter (the checkout may sit below a mode-700 directory), the project and
// HOME are nobody's.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { SANITIZED, startClient, newProject, writeFile, execPy, descendants, sleep, show, openDir, stageBinaries, memfdCell } from './lib.mjs';

const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const W_RESULT = 27;


/** CPU time (ms) used so far by every process below the server. */
function sandboxCpuMs(serverPid) {
	let ticks = 0;
	for (const p of descendants(serverPid)) {
		let s;
		try { s = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8'); } catch { continue; }
		const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
		ticks += Number(f[11]) + Number(f[12]);
	}
	return ticks * 10;
}

// Under AddressSanitizer an idle session already takes about 280 MB (its
// shadow memory and quarantine): the limit leaves room for that.
const MEM = SANITIZED ? 1024 : 256;
const SKILL = fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8')
	.replace('max_workspace_mb: 4096', 'max_workspace_mb: 50')
	.replace('memory_mb: 2048', `memory_mb: ${MEM}`);

for (const mode of ['namespaces', 'no namespaces']) {
	const who = AS_ROOT ? 'nobody' : 'the current user';
	describe(`a hostile session, the server run by ${who}, ${mode}`, () => {
		let h, root, home, launchArgv;
		const beat = (f) => { try { return fs.statSync(path.join(root, 'workspace', f)).size; } catch { return -1; } };

		before(async () => {
			const { bin, dockerrun } = stageBinaries('hn-bin');
			root = newProject(`hn-${mode.replace(' ', '')}`);
			const skill = writeFile(root, 'policy/SKILL.md', SKILL);
			fs.mkdirSync(path.join(root, 'workspace'));
			// A project under /tmp holding a secret, as a CI checkout does.
			writeFile(root, '.env', 'API_KEY=TOP-SECRET-CANARY\n');
			home = openDir('hn-home');
			if (AS_ROOT) spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root, home]);
			const server = mode === 'namespaces' ? [bin] : [dockerrun, bin];
			const launch = AS_ROOT
				? { command: 'setpriv', commandArgs: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...server] }
				: { command: server[0], commandArgs: server.slice(1) };
			launchArgv = [launch.command, ...launch.commandArgs];
			h = await startClient(root, { structured: true, args: ['--skill', skill], env: { HOME: home }, ...launch });
			const r = await execPy(h, 'import os, struct, json, time\nkept = 7', {}, { timeout: 120000 });
			assert.equal(r.sc.status, 'ok', show(r.text));
			const u = await execPy(h, 'os.getuid()');
			if (AS_ROOT) assert.equal(u.sc.result, String(NOBODY), 'the sandbox runs as nobody');
		});
		after(async () => { await h?.close(); });

		test('the project under /tmp holds a .env: the server runs, the .env is refused', { timeout: 60000 }, async () => {
			const r = await execPy(h, 'open(".env").read()');
			assert.equal(r.sc.error?.denied_by, 'fs_read', show(r.sc));
			assert.ok(!JSON.stringify(r.res).includes('TOP-SECRET-CANARY'));
		});

		test('a forged result frame: the call times out, nothing of it runs afterwards', { timeout: 60000 }, async () => {
			const r = await execPy(h, [
				'kept = 8',
				'b = json.dumps({"status": "ok", "result": "\'forged\'", "error": None, "figures": []}).encode()',
				`os.write(3, struct.pack("<III", 0x50534d31, ${W_RESULT}, len(b)) + b)`,
				'while True:',
				'    with open("workspace/forged.beat", "a") as f: f.write("x")',
			].join('\n'), { timeout_s: 3 });
			assert.notEqual(r.sc.result, "'forged'", show(r.sc));
			assert.ok(['timeout', 'crashed'].includes(r.sc.status), show(r.sc));
			assert.equal(r.sc.state, 'rolled_back', show(r.sc));
			await sleep(300);
			const c0 = sandboxCpuMs(h.pid), b0 = beat('forged.beat');
			await sleep(1000);
			const used = sandboxCpuMs(h.pid) - c0;
			assert.ok(used < 150, `the sandbox used ${used} ms of CPU in 1 s between calls`);
			assert.ok(b0 > 0, 'the cell ran');
			assert.equal(beat('forged.beat'), b0, 'the heartbeat stopped');
			const n = await execPy(h, 'kept * 6');
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '42'], show(n.sc));
		});

		test('a setsid escapee, every descriptor used up: the heartbeat stops after the call', { timeout: 60000 }, async () => {
			const session = 'escapee';
			const r = await execPy(h, [
				'import os, time',
				'r, w = os.pipe()',
				'if os.fork() == 0:',
				'    os.setsid()',
				'    if os.fork() == 0:',
				'        os.write(w, b"x")',
				'        while True:',
				'            with open("workspace/esc.beat", "a") as f: f.write("x")',
				'            time.sleep(0.02)',
				'    os._exit(0)',
				'os.read(r, 1)',
				'while not (os.path.exists("workspace/esc.beat") and os.path.getsize("workspace/esc.beat")): time.sleep(0.01)',
				'fds = []',
				'try:',
				'    while True: fds.append(os.open("/dev/null", os.O_RDONLY))',
				'except OSError:',
				'    pass',
			].join('\n'), { session });
			assert.ok(['ok', 'error', 'crashed'].includes(r.sc.status), show(r.sc));
			await sleep(300);
			const b = beat('esc.beat');
			assert.ok(b > 0, 'the escapee ran during the call');
			await sleep(600);
			assert.equal(beat('esc.beat'), b, 'the heartbeat stopped after the call');
		});

		// A memfd is memory only a descriptor shows, and a descriptor
		// sent over a socketpair and closed is held by no process: the
		// sandbox refuses memfds in every mode, and --check says why.
		test('memfds: memfd_create is refused, and --check says why', { timeout: 90000 }, async () => {
			const r = await execPy(h, memfdCell(Math.ceil(MEM * 1.5 / 50)), { session: 'memfd' });
			assert.equal(r.sc.status, 'error', show(r.sc));
			assert.equal(r.sc.error.type, 'PermissionError', show(r.sc.error));
			assert.match(r.sc.error.message, /memfd_create is refused in this sandbox: memory_mb could not count a memfd/);
			if (mode !== 'namespaces') return; // one --check is enough
			const c = spawnSync(launchArgv[0], [...launchArgv.slice(1), '--check', '--root', root], { encoding: 'utf8', timeout: 80000, env: { PATH: process.env.PATH, HOME: home } });
			assert.match(c.stdout, /^memfds: memfd_create refused in the sandbox: a memfd sent over a socket and closed/m, c.stdout + c.stderr);
			assert.match(c.stdout, /seccomp +applied .*no memfd_create/, c.stdout);
		});

		const memCases = [
			// The jail's private /tmp is host memory too (read through the
			// zygote's root); without namespaces /tmp is a directory on the
			// host's disk, not memory.
			...(mode === 'namespaces' ? [[`${MEM * 5 / 16} MB in /tmp, then ${MEM * 5 / 8} MB in the process`, [
				'with open("/tmp/half", "wb") as f:',
				`    for i in range(${MEM * 5 / 16}): f.write(b"x" * (1 << 20))`,
				`b = bytearray(${MEM * 5 / 8} << 20)`,
				`for off in range(0, ${MEM * 5 / 8} << 20, 4096): b[off] = 1`,
				'time.sleep(5)',
			]]] : []),
			[`mmap(MAP_SHARED|MAP_ANONYMOUS) of ${4 * MEM} MB`, [
				'import mmap',
				`m = mmap.mmap(-1, ${4 * MEM} << 20, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)`,
				`for off in range(0, ${4 * MEM} << 20, 4096): m[off] = 1`,
				'time.sleep(5)',
			]],
		];
		for (const [what, lines] of memCases) {
			test(`${what} with memory_mb ${MEM}: status memory, rolled back`, { timeout: 90000 }, async () => {
				const session = 'mem';
				// (Files in /tmp outlive a rollback: the previous case's goes.)
				assert.equal((await execPy(h, 'import os, time\nkept = 7\nif os.path.exists("/tmp/half"): os.unlink("/tmp/half")', { session })).sc.status, 'ok');
				const r = await execPy(h, 'kept = 8\n' + lines.join('\n'), { session, timeout_s: 30 }, { timeout: 60000 });
				assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['memory', 137, 'rolled_back'], show(r.sc));
				const n = await execPy(h, 'kept', { session });
				assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
			});
		}

		test('the workspace limit: a call that writes past it is stopped, rolled back, its files stay', { timeout: 90000 }, async () => {
			const session = 'disk';
			assert.equal((await execPy(h, 'import os, time\nkept = 7', { session })).sc.status, 'ok');
			const r = await execPy(h, [
				'kept = 8',
				'for i in range(100):',
				'    with open(f"workspace/fill{i:03d}.bin", "wb") as f: f.write(os.urandom(5 << 20))',
				'    time.sleep(0.02)',
			].join('\n'), { session, timeout_s: 60 }, { timeout: 90000 });
			assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['limits', 153, 'rolled_back'], show(r.sc));
			const ws = path.join(root, 'workspace');
			const files = fs.readdirSync(ws).filter((n) => n.startsWith('fill'));
			assert.ok(files.length > 0 && files.length < 100, `${files.length} files stay`);
			for (const f of files) fs.unlinkSync(path.join(ws, f));
			const n = await execPy(h, 'kept', { session });
			assert.deepEqual([n.sc.status, n.sc.result], ['ok', '7'], show(n.sc));
		});
	});
}
