// The server where namespaces are refused, as in a container with the
// runtime's default rules: build/helpers/dockerrun applies them (seccomp
// refusing unshare, setns, mount, namespace clone flags; clone3 ENOSYS;
// CAP_SYS_ADMIN and friends dropped) and execs the real server, which then
// runs its jail as Landlock + seccomp.  Root and nobody, pid 1 and not; the
// demo scenario end to end; effects checked from outside.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startClient, newProject, execPy, callTool, writeFile, show, sleep, BIN, REPO, reachableArgv } from './lib.mjs';

const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
const AS_ROOT = process.getuid() === 0;
const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];

/** A project owned by `uid` (nobody's for the unprivileged runs), below a
 * directory only that uid may enter (mode 0700, as mktemp -d makes it, as
 * /root is), which holds a file of that mode too. */
function project(tag, uid) {
	const parent = newProject(tag, { privateDir: true });
	writeFile(parent, 'secret.txt', 'TOP-SECRET-CANARY\n');
	fs.chmodSync(path.join(parent, 'secret.txt'), 0o600);
	const root = path.join(parent, 'proj');
	writeFile(root, 'data.csv', 'a,b\n1,2\n');
	fs.mkdirSync(path.join(root, 'workspace', 'outputs'), { recursive: true });
	if (uid !== undefined) spawnSync('chown', ['-R', `${uid}:${uid}`, parent]);
	return root;
}

function meta(p) {
	const st = fs.statSync(p);
	return `${st.mode.toString(8)} ${st.uid} ${st.gid} ${st.mtimeMs} ${st.ctimeMs}`;
}

for (const who of AS_ROOT ? ['root', 'nobody'] : ['user']) {
	describe(`Docker's default rules, as ${who}`, () => {
		let h, root, data_meta;
		before(async () => {
			root = project(`nsfree-${who}`, who === 'nobody' ? 65534 : undefined);
			data_meta = meta(path.join(root, 'data.csv'));
			// nobody runs copies it can reach (the checkout may be private).
			const launch = who === 'nobody'
				? { command: 'setpriv', commandArgs: [...NOBODY, ...reachableArgv([DOCKERRUN])] }
				: { command: DOCKERRUN, commandArgs: [BIN] };
			h = await startClient(root, { structured: true, ...launch });
		});
		after(async () => { await h?.close(); });

		test('the stack runs, a chart lands in the workspace', { timeout: 120000 }, async () => {
			const r = await execPy(h, [
				'import numpy as np, pandas as pd, matplotlib.pyplot as plt',
				'df = pd.read_csv("data.csv")',
				'plt.plot(np.arange(10)); plt.savefig("workspace/outputs/c.png")',
				'int(df.a.sum())',
			].join('\n'));
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.equal(r.sc.result, '1');
			assert.ok(fs.readFileSync(path.join(root, 'workspace/outputs/c.png')).subarray(1, 4).toString() === 'PNG');
		});

		test('beside the project, a file only its owner may read stays out of reach; what the code writes is the owner\'s', { timeout: 60000 }, async () => {
			const secret = path.join(path.dirname(root), 'secret.txt');
			const r = await execPy(h, `open(${JSON.stringify(secret)}).read()`);
			assert.equal(r.sc.error?.type, 'PermissionError', show(r.sc));
			assert.equal(r.sc.error.denied_by, 'fs_read', show(r.sc.error));
			assert.ok(!JSON.stringify(r.res).includes('TOP-SECRET-CANARY'));
			const w = await execPy(h, `open(${JSON.stringify(path.join(root, 'workspace/owned.txt'))}, "w").write("x")`);
			assert.equal(w.sc.status, 'ok', show(w.sc));
			assert.equal(fs.statSync(path.join(root, 'workspace/owned.txt')).uid, fs.statSync(root).uid);
		});

		test('other processes\' command lines and status are out of reach; the session\'s own /proc entry is not', { timeout: 60000 }, async () => {
			// A host process with a token on its command line, as agents
			// and their tools often start them.
			const canary = `psm-token-${who}-${process.pid}`;
			const holder = spawn('sh', ['-c', 'sleep 120', canary], { stdio: 'ignore' });
			// What of /proc the cell reads: the holder's, the server's, pid 1's
			// and the zygote's entries, the list of pids; then `last`.
			const probe = (last) => [
				'import os',
				'out = {}',
				`for pid in (${holder.pid}, ${h.pid}, 1, os.getppid()):`,
				'    for f in ("cmdline", "status", "stat", "environ"):',
				'        try: open("/proc/%d/%s" % (pid, f), "rb").read(); out["%d/%s" % (pid, f)] = "read"',
				'        except OSError as e: pass',
				'try: os.listdir("/proc"); out["list"] = "read"',
				'except OSError: pass',
				last,
			].join('\n');
			try {
				const r = await execPy(h, probe('own = open("/proc/self/status").read().count("\\n") > 10 and len(os.listdir("/proc/self/fd")) > 2\n(out, own)'));
				assert.equal(r.sc.status, 'ok', show(r.sc));
				assert.equal(r.sc.result, '({}, True)');
				assert.ok(!JSON.stringify(r.res).includes(canary));
				// After a rollback the session is its checkpoint, another
				// process: still nothing of the others (and, documented, not
				// its own entry either).
				const t = await execPy(h, 'import time\ntime.sleep(10)', { timeout_s: 1 });
				assert.equal(t.sc.state, 'rolled_back', show(t.sc));
				const a = await execPy(h, probe('out'));
				assert.equal(a.sc.result, '{}', show(a.sc));
			} finally { holder.kill(); }
		});

		test('shutil.copy, copy2 and tarfile work in the workspace (data, not metadata)', { timeout: 60000 }, async () => {
			const r = await execPy(h, [
				'import shutil, tarfile, io, os',
				'shutil.copy("data.csv", "workspace/c1.csv")',
				'shutil.copy2("data.csv", "workspace/c2.csv")',
				'with tarfile.open("workspace/t.tar", "w") as t: t.add("data.csv", arcname="d/x.csv")',
				'with tarfile.open("workspace/t.tar") as t: t.extractall("workspace/untar")',
				'[open(p).read() for p in ("workspace/c1.csv", "workspace/c2.csv", "workspace/untar/d/x.csv")]',
			].join('\n'));
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.equal(r.sc.result, "['a,b\\n1,2\\n', 'a,b\\n1,2\\n', 'a,b\\n1,2\\n']");
			assert.match(r.sc.stderr, /not copied in this sandbox mode/);
		});

		test('metadata outside the workspace cannot change (checked from outside)', { timeout: 60000 }, async () => {
			for (const code of ['os.chmod("data.csv", 0o600)', 'os.utime("data.csv", (0, 0))',
				'os.setxattr("data.csv", "user.x", b"1")', 'os.chown("data.csv", os.getuid(), os.getgid())']) {
				const r = await execPy(h, `import os\n${code}`);
				assert.equal(r.sc.status, 'error', show(r.text));
				assert.equal(r.sc.error.type, 'PermissionError', show(r.sc.error));
			}
			const r = await execPy(h, 'import os\nos.chmod("data.csv", 0o600)');
			assert.equal(r.sc.error.denied_by, 'fs_write', show(r.sc.error));
			assert.equal(meta(path.join(root, 'data.csv')), data_meta);
			assert.deepEqual(os.platform() === 'linux' ? fs.readdirSync(root).sort() : [], ['data.csv', 'workspace']);
		});

		test('scratch space is private; no unix socket, no SysV IPC; host /tmp hidden', { timeout: 60000 }, async () => {
			const r = await execPy(h, [
				'import tempfile, socket, ctypes, os',
				'libc = ctypes.CDLL(None, use_errno=True)',
				'fd, p = tempfile.mkstemp(); os.write(fd, b"x"); os.close(fd)',
				'out = [tempfile.gettempdir()]',
				'for f in (lambda: socket.socket(socket.AF_UNIX), lambda: open("/tmp/psm-host-probe", "w")):',
				'    try: f(); out.append("allowed")',
				'    except OSError as e: out.append(e.errno)',
				'out.append(libc.syscall(29, 0, 4096, 0o1600))',
				'out',
			].join('\n'));
			assert.equal(r.sc.status, 'ok', show(r.text));
			const [tmp, sock, hostTmp, shm] = JSON.parse(r.sc.result.replace(/'/g, '"'));
			assert.match(tmp, /^\/tmp\/psm-scratch-/);
			assert.notEqual(sock, 'allowed');
			assert.notEqual(hostTmp, 'allowed');
			assert.equal(shm, -1);
			assert.ok(!fs.existsSync('/tmp/psm-host-probe'));
		});

		// glibc's named semaphores live in /dev/shm, the host's here: Pool
		// and every lock failed with PermissionError.  They are unnamed,
		// in pages the forked children share: nothing appears in /dev/shm.
		test('multiprocessing works: Pool, locks, semaphores, queues, events, ProcessPoolExecutor; nothing in /dev/shm', { timeout: 120000 }, async () => {
			const shmBefore = fs.readdirSync('/dev/shm').sort();
			const r = await execPy(h, [
				'import multiprocessing as mp, concurrent.futures as cf, threading, time',
				'def sq(x): return x * x',
				'with mp.Pool(2) as p: pooled = p.map(sq, range(20))',
				'with cf.ProcessPoolExecutor(2) as ex: futs = sorted(ex.map(sq, range(5)))',
				'q, ev, lk = mp.Queue(), mp.Event(), mp.Lock()',
				'def child(q, ev, lk):',
				'    with lk: q.put("hello from %d" % mp.current_process().pid)',
				'    ev.set()',
				'pr = mp.Process(target=child, args=(q, ev, lk)); pr.start()',
				'got = q.get(timeout=20); pr.join(20)',
				'out = [pooled == [i * i for i in range(20)], futs == [0, 1, 4, 9, 16], got.startswith("hello"), ev.wait(5), pr.exitcode]',
				'rl = mp.RLock(); rl.acquire(); rl.acquire(); rl.release(); rl.release()',
				'try: rl.release(); out.append("released")',
				'except AssertionError: out.append("not owned")',
				'l = mp.Lock(); l.acquire(); out.append(l.acquire(timeout=0.2)); l.release()',
				'try: l.release(); out.append("released")',
				'except ValueError as e: out.append("too many")',
				's = mp.BoundedSemaphore(2); s.acquire(); s.acquire(); out.append(s.acquire(False)); s.release(); s.release()',
				't0 = time.monotonic(); sem = mp.Semaphore(0); out.append(sem.acquire(timeout=0.3)); out.append(time.monotonic() - t0 >= 0.25)',
				'try: mp.get_context("spawn").Lock()',
				'except RuntimeError as e: out.append("start method, fork" in str(e))',
				'out',
			].join('\n'), { timeout_s: 90 });
			assert.equal(r.sc.status, 'ok', show(r.text));
			assert.equal(r.sc.result, "[True, True, True, True, 0, 'not owned', False, 'too many', False, False, True, True]", show(r.text));
			// Seen from outside: no semaphore file appeared on the host.
			assert.deepEqual(fs.readdirSync('/dev/shm').sort().filter((f) => !shmBefore.includes(f) && f.startsWith('sem.')), []);
		});

		test('a process the code leaves running, and the scratch dir, end with the server', { timeout: 60000 }, async () => {
			const tag = `psm-left-${who}-${process.pid}`;
			const r = await execPy(h, [
				'import os, time',
				'if os.fork() == 0:',
				'    os.setsid()',
				`    import sys; sys.argv[0] = "${tag}"`,
				'    if os.fork() == 0:',
				`        open("workspace/${tag}", "w").close()`,
				'        time.sleep(300)',
				'    os._exit(0)',
				'time.sleep(0.5)',
			].join('\n'), { session: 'leaver' });
			assert.equal(r.sc.status, 'ok', show(r.text));
			const scratch = (await execPy(h, 'import tempfile\ntempfile.gettempdir()')).sc.result.replace(/'/g, '');
			assert.match(scratch, /^\/tmp\/psm-scratch-/);
			assert.ok(fs.existsSync(scratch));
			await h.close();
			h = null;
			await sleep(500);
			assert.ok(!fs.existsSync(scratch), `${scratch} removed with the server`);
			const left = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
				try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--zygote-fd') && fs.readFileSync(`/proc/${p}/environ`, 'utf8').includes(root); } catch { return false; }
			});
			assert.deepEqual(left, [], 'no sandbox process outlives the server');
		});
	});
}

describe('--check under Docker\'s rules', () => {
	test('names the mode and each layer, changes nothing, exit 0', { timeout: 60000 }, async () => {
		const root = project('nsfree-check');
		const ws = path.join(root, 'workspace');
		const owner = fs.statSync(ws).uid;
		const r = spawnSync(DOCKERRUN, [BIN, '--check', '--root', root], { encoding: 'utf8', timeout: 60000 });
		assert.equal(r.status, 0, r.stdout + r.stderr);
		assert.match(r.stdout, /mode: Landlock \+ seccomp/);
		assert.match(r.stdout, /landlock\s+applied/);
		assert.match(r.stdout, /what this mode does not give: \/proc shows a cell only its session's own process/);
		assert.match(r.stdout, /to get the namespace mode instead: .*seccomp=unconfined.*apparmor/i);
		assert.equal(fs.statSync(ws).uid, owner, 'the workspace keeps its owner');
	});

	test('without Landlock either: NOT enforced, says what to do, exit 1', { timeout: 60000 }, async () => {
		const root = project('nsfree-check-nolandlock');
		const r = spawnSync(DOCKERRUN, ['--no-landlock', BIN, '--check', '--root', root], { encoding: 'utf8', timeout: 60000 });
		assert.equal(r.status, 1, r.stdout + r.stderr);
		assert.match(r.stdout, /NOT enforce/);
		assert.match(r.stdout, /remedy: .*Landlock: a kernel of 5\.13/);
	});
});

describe('the demo scenario under Docker\'s rules, the server as pid 1', { skip: !AS_ROOT && 'needs root to make a pid namespace' }, () => {
	test('demo/demo.mjs end to end', { timeout: 240000 }, async () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-nsfree-demo-'));
		fs.chmodSync(dir, 0o755); // the sandbox's uid (nobody) must reach the project
		const wrapper = path.join(dir, 'server');
		// A new pid namespace (and its own /proc) made as root, then the
		// container's rules, then the server: it is pid 1 there.
		fs.writeFileSync(wrapper, `#!/bin/sh\nexec unshare --pid --fork --mount-proc --kill-child "${DOCKERRUN}" "${BIN}" "$@"\n`);
		fs.chmodSync(wrapper, 0o755);
		const r = spawnSync('node', [path.join(REPO, 'demo/demo.mjs'), '--bin', wrapper, '--project', path.join(dir, 'project')],
			{ encoding: 'utf8', timeout: 230000, env: { ...process.env, NO_COLOR: '1' } });
		fs.rmSync(dir, { recursive: true, force: true });
		assert.equal(r.status, 0, (r.stdout + r.stderr).slice(-3000));
	});
});
