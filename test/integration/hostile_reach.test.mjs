// What a cell can reach of other processes and of the host's /tmp, through
// the real server, with namespaces and without them (dockerrun), the server
// run by root and by nobody.  Every effect is read from outside:
//   - the CPU affinity and nice value of a host process of the sandbox's
//     uid, of the server, of the zygote and of another session (before: a
//     cell pinned the server and a host process without namespaces, taskset
//     -p 3 -> 1, and the zygote and session B with them);
//   - the pidfds a session holds (before: os.pidfd_open(host_pid) worked
//     on any host process as nobody without namespaces);
//   - the listing of the server's /proc/PID/fd (before: listed from a cell
//     of a server run by nobody without namespaces);
//   - du of the private temp directory, and a tmpfs /tmp's use (before:
//     with max_workspace_mb 20, 400 MB written there and the call ok; on a
//     tmpfs /tmp, host memory held until the server ended).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { BIN, SANITIZED, startClient, newProject, writeFile, execPy, descendants, titleOf, sessionProcs, sleep, show, SKILL, reachableArgv } from './lib.mjs';

const AS_ROOT = process.getuid() === 0;
const NOBODY = 65534;
const NOBODY_ARGS = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups'];
const DOCKERRUN = path.join(path.dirname(BIN), 'helpers', 'dockerrun');
// Under AddressSanitizer an idle session takes about 280 MB.
const MEM = SANITIZED ? 1024 : 128;
const POLICY = SKILL.replace('max_workspace_mb: 4096', 'max_workspace_mb: 20').replace('memory_mb: 2048', `memory_mb: ${MEM}`);

/** Cpus_allowed_list and nice of pid, as the host sees them. */
function sched(pid) {
	const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
	const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
	const nice = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16];
	return `cpus ${/Cpus_allowed_list:\s*(\S+)/.exec(st)[1]} nice ${nice}`;
}

const cmdline = titleOf;
const below = (h, re) => descendants(h.pid).map((p) => p.pid).find((p) => re.test(cmdline(p)));
/** The host pid of the process below the server that the sandbox sees as
 *  pid (its innermost NSpid): a title would race with a checkpoint's fork,
 *  which carries the session's title for a moment. */
function hostPid(h, pid) {
	for (const p of descendants(h.pid)) {
		try {
			const ns = /^NSpid:\s*(.*)$/m.exec(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'))[1].trim().split(/\s+/);
			if (Number(ns[ns.length - 1]) === pid) return p.pid;
		} catch { /* gone */ }
	}
	return undefined;
}

/** The processes that the pidfds process pid holds name (root reads any
 *  process's descriptors): host pids, from fdinfo. */
function pidfdTargets(pid) {
	const out = [];
	for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
		try {
			if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) !== 'anon_inode:[pidfd]') continue;
			out.push(Number(/^Pid:\s*(-?\d+)/m.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'))[1]));
		} catch { /* closed meanwhile */ }
	}
	return out;
}

/** du -sk of dir, in MB (0 when it is gone). */
function duMb(dir) {
	const r = spawnSync('du', ['-sk', dir], { encoding: 'utf8' });
	return r.status === 0 ? Number(r.stdout.split('\t')[0]) / 1024 : 0;
}

// Writes `mb` MB to TMPDIR in chunks, slowly enough that the server's
// watch (every 250 ms) stops it long before the end.
const fillTmp = (mb, chunk = 4) => [
	'import os, tempfile, time',
	'd = tempfile.gettempdir()',
	`for i in range(${Math.ceil(mb / chunk)}):`,
	'    with open(os.path.join(d, "fill%d" % i), "wb") as f:',
	`        f.write(b"x" * (${chunk} << 20))`,
	'    time.sleep(0.05)',
	'd',
].join('\n');

for (const [mode, pre] of [['namespaces', []], ['no namespaces', [DOCKERRUN]]]) {
	for (const who of AS_ROOT ? ['root', 'nobody'] : ['user']) {
		describe(`other processes and the host's /tmp, ${mode}, the server run by ${who}`, () => {
			const nsfree = mode === 'no namespaces';
			let h, root, hostSleep, zyg, sessB, pidB;
			before(async () => {
				root = newProject(`reach-${nsfree ? 'nsfree' : 'ns'}-${who}`);
				const skill = writeFile(root, 'policy/SKILL.md', POLICY);
				fs.mkdirSync(path.join(root, 'workspace'));
				if (who === 'nobody') spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root]);
				// A host process of the sandbox's own uid.
				hostSleep = AS_ROOT ? spawn('setpriv', [...NOBODY_ARGS, 'sleep', '600']) : spawn('sleep', ['600']);
				// nobody runs copies it can reach (the checkout may be private).
				const argv = who === 'nobody' ? reachableArgv(pre) : [...pre, BIN];
				const launch = who === 'nobody' ? { command: 'setpriv', commandArgs: [...NOBODY_ARGS, ...argv] }
					: { command: argv[0], commandArgs: argv.slice(1) };
				h = await startClient(root, { structured: true, args: ['--skill', skill], ...launch });
				const b = await execPy(h, 'import os\nos.getpid()', { session: 'b' }, { timeout: 120000 });
				assert.equal(b.sc.status, 'ok', show(b.sc));
				pidB = Number(b.sc.result);
				zyg = below(h, /^python-sandbox-mcp: zygote/);
				sessB = hostPid(h, pidB);
				assert.ok(zyg && sessB, `the zygote ${zyg} and session b ${sessB} among ${JSON.stringify(descendants(h.pid))}`);
				if (nsfree) assert.match(h.stderr(), /jail mode: Landlock \+ seccomp/);
			});
			after(async () => { await h?.close(); hostSleep?.kill(); });

			test('no cell changes the affinity or priority of the server, the zygote, another session or a host process; its own it may', { timeout: 60000 }, async () => {
				const targets = { host: hostSleep.pid, server: h.pid, zygote: nsfree ? zyg : 1, session_b: pidB };
				const outside = [hostSleep.pid, h.pid, zyg, sessB];
				const beforeState = outside.map(sched);
				const r = await execPy(h, [
					'import os',
					`targets = ${JSON.stringify(targets)}`,
					'out = {}',
					'for name, pid in targets.items():',
					'    for what, fn in (("affinity", lambda: os.sched_setaffinity(pid, {0})), ("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))):',
					'        try:',
					'            fn(); out[name + " " + what] = "CHANGED"',
					'        except OSError as e:',
					'            out[name + " " + what] = type(e).__name__',
					'cpus = os.sched_getaffinity(0)',
					'os.sched_setaffinity(0, {min(cpus)}); os.sched_setaffinity(os.getpid(), cpus)',
					'out["own"] = os.sched_getaffinity(0) == cpus',
					'out',
				].join('\n'), { session: 'a' });
				assert.equal(r.sc.status, 'ok', show(r.sc));
				assert.doesNotMatch(r.sc.result, /CHANGED/, r.sc.result);
				assert.match(r.sc.result, /'own': True/);
				assert.deepEqual(outside.map(sched), beforeState, 'seen from outside: nothing changed');
				// The sandbox runs below the server's priority (a cell's busy
				// processes must not starve the watchdog), and stays there.
				const niceOf = (pid) => Number(sched(pid).split(' nice ')[1]);
				assert.equal(niceOf(sessB), Math.min(19, niceOf(h.pid) + 5), `session ${sched(sessB)}, server ${sched(h.pid)}`);
				assert.equal(niceOf(zyg), niceOf(sessB), `zygote ${sched(zyg)}`);
				const e = await execPy(h, `import os\nos.sched_setaffinity(${nsfree ? h.pid : 1}, {0})`, { session: 'a' });
				assert.match(e.sc.error?.message || '', /of another process is refused in this sandbox/, show(e.sc));
			});

			test('pidfd_open of any process is refused; the session holds no pidfd', { timeout: 60000 }, async () => {
				const r = await execPy(h, [
					'import os',
					'held, out = [], []',
					`for pid in (${hostSleep.pid}, ${nsfree ? zyg : 1}, ${pidB}, os.getpid()):`,
					'    try:',
					'        held.append(os.pidfd_open(pid)); out.append("OPENED")',
					'    except OSError as e:',
					'        out.append(type(e).__name__)',
					'out, os.getpid()',
				].join('\n'), { session: 'a' });
				const [out, me] = JSON.parse(r.sc.result.replace(/'/g, '"').replace(/^\(/, '[').replace(/\)$/, ']'));
				assert.deepEqual(out, ['PermissionError', 'PermissionError', 'PermissionError', 'PermissionError'], show(r.sc));
				if (AS_ROOT) {
					// The only pidfd a session may hold is its new
					// checkpoint's (a child, from clone(CLONE_PIDFD)), while
					// it takes it after the reply.
					const sa = hostPid(h, me);
					assert.ok(sa, `session a (${me}) below the server`);
					const held = pidfdTargets(sa);
					for (const p of held) assert.ok(p === -1 || ![hostSleep.pid, zyg, sessB, h.pid].includes(p), `the session holds a pidfd of ${p}: ${cmdline(p)}`);
				}
			});

			// A server run by nobody now starts its zygote in a user
			// namespace it owns, so that it may read its sessions'
			// smaps_rollup: one session must still read nothing of another
			// (not dumpable, no capability in that namespace, a Landlock
			// domain each), in every mode.
			test('a session reads nothing of another session\'s /proc: mem, environ, maps, smaps_rollup, fd', { timeout: 60000 }, async () => {
				const canary = `psm-canary-${process.pid}`;
				const b = await execPy(h, `import os\nos.environ["PSM_CANARY"] = "${canary}"\nheld = "${canary}" * 1000\nos.getpid()`, { session: 'b' });
				assert.equal(Number(b.sc.result), pidB, show(b.sc));
				// Seen from outside: the target is alive, and what the cell
				// tries to read is there for a reader allowed to.
				if (AS_ROOT) assert.match(fs.readFileSync(`/proc/${sessB}/smaps_rollup`, 'utf8'), /Pss_Anon/);
				// Without namespaces a server not run by root keeps its
				// sessions dumpable, so that it may read them (their /proc
				// files are then their uid's, not root's): the attack is
				// tried on such a session, kept out by its Landlock domain.
				if (nsfree && who !== 'root')
					assert.equal(fs.statSync(`/proc/${sessB}/mem`).uid, AS_ROOT ? NOBODY : process.getuid(), 'session b is dumpable');
				const r = await execPy(h, [
					'import os',
					`b = ${pidB}`,
					'out = {}',
					'for f in ("mem", "environ", "maps", "smaps_rollup", "smaps", "pagemap"):',
					'    fh = None',
					'    try:',
					'        fh = open("/proc/%d/%s" % (b, f), "rb"); out[f] = "READ %d" % len(fh.read(65536))',
					'    except OSError as e: out[f] = ("OPENED " if fh else "") + type(e).__name__',
					'    if fh: fh.close()',
					'for f in ("fd", "fdinfo", "map_files"):',
					'    try: out[f] = "LISTED %d" % len(os.listdir("/proc/%d/%s" % (b, f)))',
					'    except OSError as e: out[f] = type(e).__name__',
					'for f in ("fd/0", "fd/3", "exe", "cwd", "root"):',
					'    try: out[f] = "LINK " + os.readlink("/proc/%d/%s" % (b, f))',
					'    except OSError as e: out[f] = type(e).__name__',
					'own = len(open("/proc/self/smaps_rollup").read()) > 0 and len(os.listdir("/proc/self/fd")) > 0',
					'out, own',
				].join('\n'), { session: 'a' });
				assert.equal(r.sc.status, 'ok', show(r.sc));
				assert.doesNotMatch(r.sc.result, /READ|OPENED|LISTED|LINK/, r.sc.result);
				assert.match(r.sc.result, /, True\)$/, 'the cell reads its own /proc: ' + r.sc.result);
				assert.ok(!JSON.stringify(r.res).includes(canary), 'the canary is not in the reply');
				// Still alive and unchanged, seen from outside.
				assert.ok(fs.existsSync(`/proc/${sessB}`), 'session b is alive');
			});

			// The copy a rollback would go back to: a cell must not read it
			// (without namespaces, as nobody, it is dumpable like its
			// session; Landlock's file rules and seccomp keep it out).
			test('a cell reads nothing of its own session\'s checkpoint copy', { timeout: 60000 }, async () => {
				assert.equal((await execPy(h, 'x = 1', { session: 'a' })).sc.status, 'ok');
				// The copy may be replaced by the one taken after a call (a
				// slow build takes it late): a try whose copy is gone by the
				// end of the cell is made again with the newest copy.
				let copy, r;
				for (let attempt = 0; attempt < 5; attempt++) {
					copy = undefined;
					for (let i = 0; i < 100 && !copy; i++, await sleep(50))
						copy = sessionProcs(h.pid, 'a').checkpoints.sort((x, y) => y.cell - x.cell)[0]?.pid;
					assert.ok(copy, `a checkpoint of session a among ${JSON.stringify(descendants(h.pid))}`);
					const ns = /^NSpid:\s*(.*)$/m.exec(fs.readFileSync(`/proc/${copy}/status`, 'utf8'))[1].trim().split(/\s+/);
					r = await execPy(h, [
						`c = ${ns[ns.length - 1]}`,
						'out = {}',
						'for f in ("mem", "environ", "smaps_rollup", "maps"):',
						'    try: out[f] = "READ %d" % len(open("/proc/%d/%s" % (c, f), "rb").read(4096))',
						'    except OSError as e: out[f] = type(e).__name__',
						'import ctypes',
						'class iov(ctypes.Structure): _fields_ = [("b", ctypes.c_void_p), ("n", ctypes.c_size_t)]',
						'buf = ctypes.create_string_buffer(64)',
						'l, rm = iov(ctypes.addressof(buf), 64), iov(id(out), 64)',
						'libc = ctypes.CDLL(None, use_errno=True)',
						'n = libc.process_vm_readv(c, ctypes.byref(l), 1, ctypes.byref(rm), 1, 0)',
						'out["process_vm_readv"] = "READ" if n > 0 else ctypes.get_errno()',
						'out',
					].join('\n'), { session: 'a' });
					assert.equal(r.sc.status, 'ok', show(r.sc));
					assert.doesNotMatch(r.sc.result, /READ/, r.sc.result);
					if (!/FileNotFoundError/.test(r.sc.result)) break;
					await sleep(200);
				}
				// Refused, not missing: the pid named the copy.
				assert.match(r.sc.result, /'mem': 'PermissionError'/, r.sc.result);
			});

			test('the server\'s /proc/PID/fd cannot be listed from a cell', { timeout: 60000 }, async () => {
				const r = await execPy(h, [
					'import os',
					'out = []',
					`for p in ("/proc/${h.pid}/fd", "/proc/${h.pid}/fdinfo", "/proc/${h.pid}/task/${h.pid}/fd"):`,
					'    try:',
					'        out.append(len(os.listdir(p)))',
					'    except OSError as e:',
					'        out.append(type(e).__name__)',
					'out',
				].join('\n'), { session: 'a' });
				assert.doesNotMatch(r.sc.result, /\d/, `listed: ${r.sc.result}`);
			});

			test('the private temp directory is bounded: 400 MB there is stopped (max_workspace_mb 20 without namespaces, the tmpfs cap with them)', { timeout: 120000 }, async () => {
				// Where TMPDIR is (the jail sets it after the exec: not in environ).
				const tmpdir = (await execPy(h, 'import tempfile\ntempfile.gettempdir()', { session: 'fill' })).sc.result.slice(1, -1);
				if (nsfree) assert.match(tmpdir, /^\/(var\/)?tmp\/psm-scratch-/);
				const r = await execPy(h, fillTmp(400), { session: 'fill' });
				assert.notEqual(r.sc.status, 'ok', show(r.sc));
				if (nsfree) {
					assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state, r.sc.error?.denied_by], ['limits', 153, 'rolled_back', 'limits'], show(r.sc));
					assert.match(r.sc.error.message, /TMPDIR, which counts too/);
					const du = duMb(tmpdir);
					assert.ok(du > 20 && du < 400, `du of ${tmpdir}: ${du} MB (stopped before the end)`);
				} else {
					assert.match(r.sc.error?.message || '', /No space left on device/, show(r.sc));
				}
				const pid = h.pid;
				await h.close();
				h = null;
				if (nsfree) {
					// close() returns once the client's end is shut; the server
					// removes the directory on its way out, after its sessions end.
					for (let i = 0; i < 200 && (fs.existsSync(tmpdir) || fs.existsSync(`/proc/${pid}`)); i++)
						await sleep(50);
					assert.equal(fs.existsSync(tmpdir), false, 'removed with the server');
				}
			});
		});
	}
}

// A host whose /tmp is a tmpfs (Debian 13, Fedora, Arch): the private temp
// directory is memory there, counted toward memory_mb.  The server runs in
// a mount namespace of its own with a tmpfs on /tmp (as root, then nobody).
if (AS_ROOT) {
	for (const who of ['root', 'nobody']) {
		describe(`a tmpfs /tmp without namespaces, the server run by ${who}`, () => {
			let h, root;
			before(async () => {
				root = fs.realpathSync(fs.mkdtempSync('/var/tmp/psm-reach-tmpfs-'));
				fs.chmodSync(root, 0o755);
				process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
				const skill = writeFile(root, 'policy/SKILL.md', SKILL.replace('memory_mb: 2048', `memory_mb: ${MEM}`));
				fs.mkdirSync(path.join(root, 'workspace'));
				if (who === 'nobody') spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, root]);
				// Copies outside /tmp, which the tmpfs covers (the checkout may
				// lie below it), and that nobody can reach.
				const server = who === 'nobody' ? ['setpriv', ...NOBODY_ARGS, ...reachableArgv([DOCKERRUN])] : reachableArgv([DOCKERRUN]);
				h = await startClient(root, {
					structured: true, args: ['--skill', skill], command: 'unshare',
					commandArgs: ['-m', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=4g,mode=1777 psm-test /tmp && exec "$@"', 'sh', ...server],
				});
			});
			after(async () => { await h?.close(); });

			test(`${MEM + 300} MB written to TMPDIR under memory_mb ${MEM}: stopped with status memory`, { timeout: 120000 }, async () => {
				assert.equal((await execPy(h, 'kept = 7', {}, { timeout: 100000 })).sc.status, 'ok');
				// The private temp directory's path, asked before it is
				// filled: what the fill leaves there is memory that counts
				// toward any session's memory_mb once a watch of the
				// workspace has walked it, so a call made after it may be
				// stopped too (it was, under the full suite's load).
				const tmpdir = (await execPy(h, 'import tempfile\ntempfile.gettempdir()', { session: 'x' })).sc.result.slice(1, -1);
				// A cell timeout of its own past the default 30 s: under the
				// sanitizers and the full suite's load the fill ran slower
				// than that (5.5 s of CPU in 30 s, its files not yet past
				// the limit beside the session's 531 MB) and ended as a
				// timeout before it had written enough to be stopped.
				const r = await execPy(h, fillTmp(MEM + 300, 16), { timeout_s: 90 }, { timeout: 100000 });
				if (who === 'root') {
					// Root under a container's rules cannot count its
					// checkpoint's own pages, and the interpreter with its
					// copy could be over memory_mb 128: the copy is given up
					// for the call, which says so, and never claims a rollback.
					assert.deepEqual([r.sc.status, r.sc.exit_code], ['memory', 137], show(r.sc));
					assert.notEqual(r.sc.state, 'rolled_back', show(r.sc));
					assert.match(r.sc.error.message, /given up during the call/, show(r.sc));
				} else {
					assert.deepEqual([r.sc.status, r.sc.exit_code, r.sc.state], ['memory', 137, 'rolled_back'], show(r.sc));
					assert.match(r.sc.error.message, /files in \/tmp/);
				}
				const zyg = below(h, /^python-sandbox-mcp: zygote/);
				const dir = `/proc/${zyg}/root${tmpdir}`;
				const du = duMb(dir);
				assert.ok(du < MEM + 300, `the tmpfs holds ${du} MB (stopped before the end)`);
				if (who === 'nobody') {
					// What the fill left is emptied from outside first: it
					// would count toward this call's memory_mb too.
					for (const f of fs.readdirSync(dir)) fs.rmSync(path.join(dir, f), { recursive: true, force: true });
					assert.equal((await execPy(h, 'kept')).sc.result, '7');
				}
			});

			test(`what a call left in TMPDIR over memory_mb is charged to the next call however short it is, and a call that removes it is not`, { timeout: 120000 }, async () => {
				// The files lie there before the call: written from outside,
				// as a call stopped by the watchdog leaves them.  The next
				// call is shorter than the workspace watch's first walk
				// (250 ms), which used to be the only count of them, so it
				// ended ok whatever the directory held.
				// What the test before left there (the server run by root)
				// is emptied first, from outside.
				const zyg = below(h, /^python-sandbox-mcp: zygote/);
				for (const d of fs.readdirSync(`/proc/${zyg}/root/tmp`).filter((n) => n.startsWith('psm-scratch-')))
					for (const f of fs.readdirSync(`/proc/${zyg}/root/tmp/${d}`)) fs.rmSync(`/proc/${zyg}/root/tmp/${d}/${f}`, { recursive: true, force: true });
				const tmpdir = (await execPy(h, 'import tempfile\ntempfile.gettempdir()', { session: 'left' })).sc.result.slice(1, -1);
				assert.equal((await execPy(h, 'kept = 8', { session: 'left' })).sc.status, 'ok');
				const dir = `/proc/${zyg}/root${tmpdir}`;
				const file = path.join(dir, 'left-over');
				const fd = fs.openSync(file, 'w');
				const chunk = Buffer.alloc(16 << 20, 120);
				for (let i = 0; i < MEM / 16 + 1; i++) fs.writeSync(fd, chunk);
				fs.closeSync(fd);
				const r = await execPy(h, '1+1', { session: 'left' });
				assert.equal(r.sc.status, 'memory', show(r.sc));
				assert.match(r.sc.error.message, /MB (of it )?files in \/tmp, \/dev\/shm or TMPDIR, which a rollback does not remove: delete those you do not need in the next cell/, show(r.sc));
				// Removing them is a call like any other: judged by what it
				// leaves, not by what it removed.
				const rm = await execPy(h, `import os\nos.remove(${JSON.stringify(path.join(tmpdir, 'left-over'))})\nkept`, { session: 'left' });
				assert.equal(rm.sc.status, 'ok', show(rm.sc));
				if (who === 'nobody') assert.equal(rm.sc.result, '8', show(rm.sc));
				assert.equal(fs.existsSync(file), false);
				assert.equal((await execPy(h, '1+1', { session: 'left' })).sc.status, 'ok');
			});
		});
	}
}
