// The jail through the real server: refusals name the
// permission and say what to do instead; the trusted side never follows a
// symlink that sandboxed code planted in the workspace.  Every effect is
// checked from outside the sandbox.  (test/jail/ holds the full escape suite,
// driven without the MCP layer.)
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { spawnSync } from 'node:child_process';
import net from 'node:net';

import { BIN, SANITIZED, startClient, newProject, execPy, callTool, jsonResult, writeFile, show, sleep } from './lib.mjs';

const isLink = (p) => { try { return fs.lstatSync(p).isSymbolicLink(); } catch { return false; } };

describe('jail through MCP', () => {
	let h, root, outside;
	before(async () => {
		root = newProject('jail');
		outside = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'psm-outside-')));
		fs.chmodSync(outside, 0o755);
		writeFile(outside, 'secret.txt', 'TOP-SECRET-CANARY\n');
		writeFile(root, 'project.txt', 'project file\n');
		h = await startClient(root, { structured: true });
		await execPy(h, '"warm"'); // the session exists: refusals below keep its state
	});
	after(async () => {
		await h?.close();
		fs.rmSync(outside, { recursive: true, force: true });
	});

	const cases = [
		['a write outside the workspace', `open(${JSON.stringify('PROJECT/x.txt')}, "w").write("x")`, 'fs_write', /workspace/],
		['a TCP connection', 'import socket\nsocket.create_connection(("127.0.0.1", 9))', 'net_access', /network/],
		['a download', 'import urllib.request\nurllib.request.urlopen("http://example.com", timeout=5)', 'net_access', /workspace/],
		['a program', 'import subprocess\nsubprocess.run(["true"])', 'shell_exec', /Python/],
		['a file outside ROOT', `open(${JSON.stringify('OUTSIDE/secret.txt')}).read()`, 'fs_read', /workspace/],
	];
	for (const [what, code0, perm, hint] of cases) {
		test(`${what} is refused with denied_by ${perm} and a hint`, async () => {
			const code = code0.replace('PROJECT', root).replace('OUTSIDE', outside);
			const r = await execPy(h, code);
			assert.equal(r.sc.status, 'error', show(r.sc));
			assert.equal(r.sc.error.denied_by, perm, show(r.sc.error));
			assert.match(r.text, new RegExp(`denied_by: ${perm}`));
			assert.match(r.text, hint, r.text);
			assert.equal(r.sc.state, 'kept', 'a refusal is an exception: the state stays');
		});
	}

	test('nothing was written outside the workspace, the secret never reached the reply', async () => {
		assert.equal(fs.existsSync(path.join(root, 'x.txt')), false);
		const r = await execPy(h, `import os\nos.path.exists(${JSON.stringify(outside)})`);
		assert.equal(r.sc.result, 'False', 'directories outside ROOT are not even visible');
		assert.ok(!JSON.stringify(r.res).includes('TOP-SECRET-CANARY'));
	});

	test('/proc/self/status shows the kernel layers: NoNewPrivs 1, Seccomp 2, CapEff 0', async () => {
		const r = await execPy(h, 'import re\ns = open("/proc/self/status").read()\n[re.search(k + r":\\s*(\\S+)", s).group(1) for k in ("NoNewPrivs", "Seccomp", "CapEff")]');
		assert.equal(r.sc.result, "['1', '2', '0000000000000000']", show(r.sc));
	});

	test('host processes are invisible (the jail has its own pid namespace)', async () => {
		const r = await execPy(h, 'import os\nsorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:1]');
		assert.equal(r.sc.result, '[1]', 'the zygote is pid 1 of the jail');
		const n = await execPy(h, 'import os\nlen([p for p in os.listdir("/proc") if p.isdigit()])');
		assert.ok(Number(n.sc.result) < 10, `only the jail's processes: ${n.sc.result}`);
	});

	test('planted symlinks are never followed by the trusted side', async () => {
		// The sandbox cannot make symlinks (below); a link can still get
		// into the workspace some other way (a checkout, the user): planted
		// here from outside.
		fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'workspace/outputs/leak.txt'));
		fs.symlinkSync(outside, path.join(root, 'workspace/outdir'));
		fs.mkdirSync(path.join(root, 'workspace/.logs'), { recursive: true });
		fs.symlinkSync(path.join(outside, 'planted.log'), path.join(root, 'workspace/.logs/default-99.stdout.log'));
		// list_artifacts lists the links but reads nothing through them.
		const la = jsonResult(await callTool(h, 'list_artifacts', { include_hidden: true })).sc;
		const leak = la.artifacts.find((a) => a.path === 'workspace/outputs/leak.txt');
		assert.ok(leak, show(la));
		assert.equal(leak.sha256, null, 'no hash through a symlink');
		assert.ok(!la.artifacts.some((a) => a.path.startsWith('workspace/outdir/')), 'a symlinked directory is not entered');
		// verify_outputs refuses the link.
		const v = jsonResult(await callTool(h, 'verify_outputs', { files: ['workspace/outputs/leak.txt'], write_summary: false })).sc;
		assert.equal(v.checks[0].ok, false);
		assert.match(v.checks[0].detail, /link/i);
		// resources/read refuses it.
		await assert.rejects(h.client.readResource({ uri: `file://${root}/workspace/outputs/leak.txt` }), /-32002|not found/i);
		await assert.rejects(h.client.readResource({ uri: `file://${root}/workspace/outdir/secret.txt` }), /-32002|not found/i);
		// output_summary.json planted as a symlink to a file outside is replaced, not written through.
		fs.symlinkSync(path.join(outside, 'summary-target.json'), path.join(root, 'workspace/outputs/output_summary.json'));
		const v2 = jsonResult(await callTool(h, 'verify_outputs', { files: ['workspace/outputs/leak.txt'], require_success: false })).sc;
		assert.equal(v2.summary_path, 'workspace/outputs/output_summary.json');
		assert.equal(fs.existsSync(path.join(outside, 'summary-target.json')), false, 'nothing written outside');
		assert.equal(fs.lstatSync(path.join(root, 'workspace/outputs/output_summary.json')).isSymbolicLink(), false);
		// The secret never appears in any reply.
		assert.ok(!JSON.stringify([la, v, v2]).includes('TOP-SECRET-CANARY'));
	});

	test('a planted symlink where the next log goes is skipped, never followed', async () => {
		// The server names logs .logs/SESSION-CELL.stdout.log: plant the next one.
		const cell = (await execPy(h, '0', { session: 'lg' })).sc.execution_count;
		const next = `workspace/.logs/lg-${cell + 2}.stdout.log`;
		fs.mkdirSync(path.join(root, 'workspace/.logs'), { recursive: true });
		fs.symlinkSync(path.join(outside, 'via-log.txt'), path.join(root, next));
		const r = await execPy(h, 'print("z" * 40000)', { session: 'lg' });
		assert.ok(r.sc.full_output, show(r.sc));
		assert.notEqual(r.sc.full_output, next, 'the planted name is not used');
		assert.equal(fs.existsSync(path.join(outside, 'via-log.txt')), false, 'nothing written through the link');
		assert.equal(fs.lstatSync(path.join(root, r.sc.full_output)).isSymbolicLink(), false);
		assert.equal(fs.readFileSync(path.join(root, r.sc.full_output), 'utf8').length, 40001);
	});

	test('a reset session counts its cells from 1 again: earlier logs are kept, not overwritten', async () => {
		const a = await execPy(h, 'print("a" * 30000)', { session: 'lr', reset: true });
		const b = await execPy(h, 'print("b" * 30000)', { session: 'lr', reset: true });
		assert.equal(a.sc.execution_count, b.sc.execution_count);
		assert.notEqual(a.sc.full_output, b.sc.full_output);
		assert.ok(fs.readFileSync(path.join(root, a.sc.full_output), 'utf8').startsWith('aaa'));
		assert.ok(fs.readFileSync(path.join(root, b.sc.full_output), 'utf8').startsWith('bbb'));
	});

	test('what the host sees: no symlink, no setuid bit, no host unix socket; each refusal names its permission', async () => {
		const ws = path.join(root, 'workspace');
		const link = await execPy(h, 'import os\nos.symlink("/root/.ssh/id_rsa", "workspace/outputs/result.txt")');
		assert.equal(link.sc.error?.denied_by, 'fs_write', show(link.sc));
		assert.match(link.text, /symlink/);
		assert.equal(fs.existsSync(path.join(ws, 'outputs/result.txt')) || isLink(path.join(ws, 'outputs/result.txt')), false);

		const suid = await execPy(h, 'import os, shutil\nshutil.copyfile("/usr/bin/id", "workspace/c")\nos.chmod("workspace/c", 0o6755)');
		assert.equal(suid.sc.error?.denied_by, 'fs_write', show(suid.sc));
		assert.match(suid.text, /setuid/);
		assert.equal(fs.statSync(path.join(ws, 'c')).mode & 0o7000, 0, 'no setuid/setgid bit on the host');
		const wide = await execPy(h, 'import os\nos.chmod("workspace", 0o777)');
		assert.equal(wide.sc.error?.denied_by, 'fs_write', show(wide.sc));
		assert.equal(fs.statSync(ws).mode & 0o7777, 0o755, 'the workspace keeps its mode');

		// Ordinary copies keep working: a group-writable project file
		// (umask 002) is copied without its group write bit.
		writeFile(root, 'shared.csv', 'a,b\n1,2\n');
		fs.chmodSync(path.join(root, 'shared.csv'), 0o664);
		const cp = await execPy(h, 'import shutil\nshutil.copy("shared.csv", "workspace/s1.csv")\nshutil.copy2("shared.csv", "workspace/s2.csv")\nimport os\nos.makedirs("workspace/tree/a", exist_ok=True)\nshutil.copy("shared.csv", "workspace/tree/a/")\nshutil.copytree("workspace/tree", "workspace/tree2")\n"copied"');
		assert.equal(cp.sc.status, 'ok', show(cp.sc));
		for (const f of ['s1.csv', 's2.csv', 'tree2/a/shared.csv']) assert.equal(fs.statSync(path.join(ws, f)).mode & 0o7777, 0o644, f);

		// A host process listening on a unix socket inside ROOT.
		const sockPath = path.join(root, 'daemon.sock');
		let heard = 0;
		const srv = net.createServer((c) => { heard++; c.destroy(); });
		await new Promise((res) => srv.listen(sockPath, res));
		try {
			fs.chmodSync(sockPath, 0o777);
			const c = await execPy(h, `import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(${JSON.stringify(sockPath)})`);
			assert.equal(c.sc.error?.denied_by, 'net_access', show(c.sc));
			const mp = await execPy(h, 'import multiprocessing\nwith multiprocessing.Pool(2) as p:\n    r = p.map(abs, [-1, -2])\nr');
			assert.equal(mp.sc.result, '[1, 2]', show(mp.sc));
			await sleep(200);
			assert.equal(heard, 0, 'the host socket heard nothing');
		} finally { await new Promise((res) => srv.close(res)); }
	});

	test('secrets under ROOT are refused with denied_by fs_read; ROOT = the home directory is refused; a project under /tmp runs with its secrets hidden', { timeout: 90000 }, async (t) => {
		// Not under /tmp (that case is checked last).
		const sroot = fs.realpathSync(fs.mkdtempSync('/var/tmp/psm-secrets-'));
		fs.chmodSync(sroot, 0o755);
		t.after(() => fs.rmSync(sroot, { recursive: true, force: true }));
		writeFile(sroot, '.env', 'API_KEY=TOP-SECRET-CANARY\n');
		writeFile(sroot, '.ssh/id_rsa', 'TOP-SECRET-CANARY\n');
		writeFile(sroot, 'deep/er/server.pem', 'TOP-SECRET-CANARY\n');
		writeFile(sroot, 'deep/er/data.csv', 'a,b\n1,2\n');
		const s = await startClient(sroot, { structured: true });
		try {
			for (const f of ['.env', '.ssh/id_rsa', 'deep/er/server.pem']) {
				const r = await execPy(s, `open(${JSON.stringify(f)}).read()`);
				assert.equal(r.sc.error?.denied_by, 'fs_read', show(r.sc));
				assert.ok(!JSON.stringify(r.res).includes('TOP-SECRET-CANARY'));
			}
			const ok_ = await execPy(s, 'open("deep/er/data.csv").read()');
			assert.equal(ok_.sc.status, 'ok', show(ok_.sc));
		} finally { await s.close(); }
		// The same project started as the user's home directory.
		const hs = await startClient(sroot, { structured: true, env: { HOME: sroot } });
		try {
			const r = await execPy(hs, '1 + 1');
			assert.equal(r.res.isError, true);
			assert.match(r.text, /home directory, not a project/);
			assert.match(r.text, /--root/);
		} finally { await hs.close(); }
		// A project under /tmp (a CI checkout, mktemp -d: mode 0700), where
		// the jail's private /tmp covers it: it runs, the secrets hidden by
		// the mount tree itself, the rest readable.
		const troot = newProject('tmpsecrets', { privateDir: true });
		writeFile(troot, '.env', 'API_KEY=TOP-SECRET-CANARY\n');
		writeFile(troot, 'keys/server.pem', 'TOP-SECRET-CANARY\n');
		writeFile(troot, '.aws/credentials', 'TOP-SECRET-CANARY\n');
		writeFile(troot, 'data.csv', 'a,b\n1,2\n');
		const ts = await startClient(troot, { structured: true });
		try {
			for (const f of ['.env', 'keys/server.pem', '.aws/credentials', `${troot}/.env`]) {
				const r = await execPy(ts, `open(${JSON.stringify(f)}).read()`);
				assert.equal(r.sc.error?.denied_by, 'fs_read', show(r.sc));
				assert.ok(!JSON.stringify(r.res).includes('TOP-SECRET-CANARY'));
			}
			const r = await execPy(ts, 'import os\n(open("data.csv").read(), sorted(os.listdir(".")), open("workspace/w.txt", "w").write("ok"))');
			assert.equal(r.sc.status, 'ok', show(r.sc));
			assert.equal(r.sc.result, "('a,b\\n1,2\\n', ['.aws', '.env', 'data.csv', 'keys', 'workspace'], 2)");
			assert.equal(fs.readFileSync(path.join(troot, 'workspace/w.txt'), 'utf8'), 'ok');
		} finally { await ts.close(); }
	});

	test('ROOT = / is not a project: the server starts, execute_python refuses saying to pass --root, --check exits 1, nothing is created', { timeout: 60000 }, async () => {
		const before = fs.readdirSync('/tmp').filter((n) => n.startsWith('psm-scratch-not-a-project-'));
		const rs = await startClient('/', { structured: true });
		try {
			const r = await execPy(rs, 'open("/etc/hostname").read()');
			assert.equal(r.res.isError, true);
			assert.match(r.text, /whole file system\), not a project/);
			assert.match(r.text, /--root/);
		} finally { await rs.close(); }
		assert.ok(!fs.existsSync('/workspace'), 'no /workspace on the host');
		const after = fs.readdirSync('/tmp').filter((n) => n.startsWith('psm-scratch-not-a-project-'));
		assert.deepEqual(after, before, 'the stand-in directory is removed at exit');
		const c = spawnSync(BIN, ['--check', '--root', '/'], { encoding: 'utf8', timeout: 30000 });
		assert.equal(c.status, 1, c.stdout + c.stderr);
		assert.match(c.stdout, /not a project: start the server with --root/);
	});

	test('a fork bomb is bounded by max_processes (also as root) and the server stays up', { timeout: 90000 }, async () => {
		// A small policy so the bound is reached quickly: max_processes 8,
		// max_sessions 2.
		const broot = newProject('bomb');
		const skill = writeFile(broot, 'SKILL.md', fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8')
			.replace('max_processes: 64', 'max_processes: 8').replace('max_sessions: 8', 'max_sessions: 2'));
		const b = await startClient(broot, { structured: true, args: ['--skill', skill] });
		try {
			const r = await execPy(b, 'import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError as e:\n    err = e.errno\nn', { timeout_s: 60 });
			// Either the shared RLIMIT_NPROC refused the forks first (EAGAIN), or
			// the server's per-session count (more than max_processes) ended it.
			// Under AddressSanitizer each child also counts the sanitizer's
			// memory it shares with its parent (about 280 MB): the watchdog's sum
			// errs on the strict side, and eight of them pass memory_mb first.
			if (SANITIZED && r.sc.status === 'memory') {
				await b.client.ping();
				return;
			}
			assert.ok(['ok', 'crashed'].includes(r.sc.status), show(r.sc));
			await b.client.ping();
			if (r.sc.status === 'ok') {
				assert.ok(Number(r.sc.result) <= 8 * 2 + 16, `bounded by the policy: ${r.sc.result}`);
				const after_ = await execPy(b, 'err');
				// The call ended ok, so its state is kept: the checkpoint
				// after it found room once the sweep's zombies were reaped.
				assert.equal(after_.sc.result, '11', `EAGAIN kept: ${show(after_.sc)}`);
			} else {
				assert.match(r.sc.error.message, /max_processes/, show(r.sc));
				assert.equal(r.sc.error.denied_by, 'limits', show(r.sc));
			}
			// The children it left were ended with the call: forks work again.
			const again = await execPy(b, 'import os\npid = os.fork()\nif pid == 0: os._exit(0)\nos.waitpid(pid, 0)[1]');
			assert.equal(again.sc.result, '0', show(again.sc));
		} finally { await b.close(); }
	});

	test('fail closed: without the layers the policy needs, execute_python refuses and says why', { timeout: 60000 }, async () => {
		// PSM_JAIL_DISABLE is the jail's test hook: it can only remove layers,
		// as if the kernel lacked them.
		const froot = newProject('closed');
		const f = await startClient(froot, { structured: true, env: { PSM_JAIL_DISABLE: 'mountns,landlock' } });
		try {
			const r = await execPy(f, 'open("workspace/x.txt", "w").write("x")');
			assert.equal(r.res.isError, true);
			assert.match(r.text, /cannot enforce the policy/);
			assert.match(r.text, /--check/);
			assert.equal(fs.existsSync(path.join(froot, 'workspace/x.txt')), false, 'nothing ran');
			await f.client.ping();
		} finally { await f.close(); }
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});
