// deploy/kubernetes/agent-pod.yaml under `podman kube play`, as shipped: the
// restricted Pod Security Standard holds in the agent's container, the
// init container's --check let it start, and the server started in that
// container (podman exec -i, as `kubectl exec -i` would) answers the official
// MCP SDK client with the policy enforced.  Then the agent workload of bench/
// runs in it, and the pod's memory and CPU are measured from its cgroup (the
// numbers docs/CONTAINERS.md gives), checked against the manifest's limit,
// and the jail's escape suite (test/jail/) runs inside the pod.
//
// Podman's RuntimeDefault seccomp profile allows unshare, so the jail runs
// in its namespace mode there; Kubernetes' runtimes (containerd, CRI-O) do
// not.  The same manifest is played a second time with only a seccomp
// annotation added, naming a profile made from podman's own with what
// containerd's default refuses (unshare, setns, mount and the mount API,
// clone with a namespace flag, clone3): there the jail runs as Landlock +
// seccomp, and everything above is checked again.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

import { execPy, show, sleep } from '../integration/lib.mjs';
import { podman, startInContainer, assertCheck, assertServes, VERSION, CANARY, REPO } from './lib.mjs';

const MANIFEST = path.join(REPO, 'deploy/kubernetes/agent-pod.yaml');
const WORK = path.join(REPO, 'build/podtest');
const POD = 'python-sandbox-agent';
const CTR = `${POD}-agent`;
const PROJECT = '/work/project';
const sh = (script, opts) => podman(['exec', CTR, 'sh', '-c', script], opts);
const exists = (rel) => podman(['exec', CTR, 'test', '-e', path.join(PROJECT, rel)], { ok: false }).status === 0;

/** The container's cgroup counters (v1 or v2): memory in bytes, CPU in ns. */
function cgroup() {
	const rel = podman(['inspect', '-f', '{{.State.CgroupPath}}', CTR]).stdout.trim();
	const v2 = fs.existsSync('/sys/fs/cgroup/cgroup.controllers');
	const read = (p) => fs.readFileSync(p, 'utf8').trim();
	const stat = (p) => Object.fromEntries(read(p).split('\n').map((l) => l.split(' ')).map(([k, v]) => [k, Number(v)]));
	if (v2) {
		const d = path.join('/sys/fs/cgroup', rel);
		return {
			resetPeak: () => fs.writeFileSync(path.join(d, 'memory.peak'), '0'),
			peak: () => Number(read(path.join(d, 'memory.peak'))),
			anon: () => { const s = stat(path.join(d, 'memory.stat')); return s.anon + s.shmem; },
			cpu: () => stat(path.join(d, 'cpu.stat')).usage_usec * 1000,
			limit: () => Number(read(path.join(d, 'memory.max'))),
		};
	}
	const m = path.join('/sys/fs/cgroup/memory', rel), c = path.join('/sys/fs/cgroup/cpuacct', rel);
	return {
		resetPeak: () => fs.writeFileSync(path.join(m, 'memory.max_usage_in_bytes'), '0'),
		peak: () => Number(read(path.join(m, 'memory.max_usage_in_bytes'))),
		anon: () => { const s = stat(path.join(m, 'memory.stat')); return s.total_rss + s.total_shmem; },
		cpu: () => Number(read(path.join(fs.existsSync(c) ? c : path.join('/sys/fs/cgroup/cpu,cpuacct', rel), 'cpuacct.usage'))),
		limit: () => Number(read(path.join(m, 'memory.limit_in_bytes'))),
	};
}
const MB = (b) => `${(b / 1048576).toFixed(0)} MB`;

/** Podman's default seccomp profile less what containerd's RuntimeDefault
 * (moby's profile) refuses a container without CAP_SYS_ADMIN: the manifest
 * played under it, as a Kubernetes node would run it. */
function containerdLikeVariant() {
	const prof = JSON.parse(fs.readFileSync('/usr/share/containers/seccomp.json', 'utf8'));
	const refused = ['unshare', 'setns', 'mount', 'umount', 'umount2', 'pivot_root', 'fsopen', 'fsmount',
		'fsconfig', 'fspick', 'move_mount', 'open_tree', 'mount_setattr'];
	const gone = new Set([...refused, 'clone', 'clone3']);
	prof.syscalls = prof.syscalls.map((r) => ({ ...r, names: r.names.filter((n) => !gone.has(n)) })).filter((r) => r.names.length);
	prof.syscalls.push(
		// clone without CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
		{ names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 0x7E020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] },
		{ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 },
		{ names: refused, action: 'SCMP_ACT_ERRNO', errnoRet: 1 });
	fs.mkdirSync(WORK, { recursive: true });
	fs.writeFileSync(path.join(WORK, 'containerd-like.json'), JSON.stringify(prof));
	const text = fs.readFileSync(MANIFEST, 'utf8');
	const variant = text.replace(/^metadata:\n/m, 'metadata:\n  annotations:\n    seccomp.security.alpha.kubernetes.io/pod: localhost/containerd-like.json\n');
	assert.notEqual(variant, text);
	fs.writeFileSync(path.join(WORK, 'agent-pod-containerd-like.yaml'), variant);
	return { manifest: path.join(WORK, 'agent-pod-containerd-like.yaml'), playArgs: ['--seccomp-profile-root', WORK] };
}

function podSuite(label, { manifest, playArgs = [], mode, jailMode, measure }) {
describe(`the agent pod under podman kube play: ${label}`, () => {
	before(async () => {
		const text = fs.readFileSync(manifest, 'utf8');
		const images = [...text.matchAll(/^\s+image: (\S+)$/gm)].map((m) => m[1]);
		assert.deepEqual([...new Set(images)], [`localhost/python-sandbox-mcp:${VERSION}`],
			'the manifest names this version\'s image (scripts/release.sh updates it)');
		podman(['kube', 'play', '--replace', ...playArgs, manifest], { timeout: 300000 });
		for (let i = 0; i < 600; i++) {
			if (podman(['inspect', '-f', '{{.State.Status}}', CTR], { ok: false }).stdout.trim() === 'running') return;
			await sleep(100);
		}
		throw new Error(`${CTR} is not running: ${podman(['ps', '-a', '--pod'], { ok: false }).stdout}`);
	});
	after(() => { podman(['kube', 'down', manifest], { ok: false }); });

	test('the agent container runs under the restricted profile', () => {
		const cfg = JSON.parse(podman(['inspect', CTR]).stdout)[0];
		assert.equal(cfg.HostConfig.ReadonlyRootfs, true, 'readOnlyRootFilesystem');
		assert.deepEqual(cfg.HostConfig.CapAdd || [], [], 'no capability added');
		assert.ok((cfg.HostConfig.SecurityOpt || []).includes('no-new-privileges'), 'allowPrivilegeEscalation false');
		assert.equal(cfg.Config.User, '1000:1000', 'runAsUser, runAsGroup');
		// From inside, as the kernel sees the container's first process.
		const st = sh('id -u; grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/1/status; touch /usr/x 2>&1; true').stdout;
		assert.match(st, /^1000$/m);
		assert.match(st, /^CapEff:\s+0+$/m, 'every capability dropped');
		assert.match(st, /^CapBnd:\s+0+$/m);
		assert.match(st, /^NoNewPrivs:\s+1$/m);
		assert.match(st, /^Seccomp:\s+2$/m, 'the runtime\'s default seccomp filter');
		assert.match(st, /Read-only file system/);
	});

	test('--check in the pod names the mode and finds the policy enforced', () => {
		const { mode: named } = assertCheck(podman(['exec', CTR, 'python-sandbox-mcp', '--check', '--root', PROJECT], { ok: false }));
		console.log(`# pod (${label}): mode ${named}`);
		assert.match(named, mode);
	});

	test('the escape suite passes inside the pod, as its user', { timeout: 600000 }, () => {
		// The suite and its helpers (built from this tree, the same code as
		// the package), copied into the pod's /tmp volume.
		const tar = spawnSync('tar', ['-c', '-C', path.join(REPO, 'test'), 'jail', '-C', path.join(REPO, 'build'), 'helpers/jailrun', 'helpers/dockerrun'], { maxBuffer: 256 << 20 });
		assert.equal(tar.status, 0, String(tar.stderr));
		sh('rm -rf /tmp/psm-escape && mkdir /tmp/psm-escape');
		podman(['exec', '-i', CTR, 'tar', '-x', '-C', '/tmp/psm-escape'], { input: tar.stdout });
		const r = podman(['exec', ...(jailMode ? ['-e', `PSM_JAIL_MODE=${jailMode}`] : []), CTR,
			'bash', '/tmp/psm-escape/jail/run.sh', '/tmp/psm-escape/helpers'], { ok: false, timeout: 600000 });
		const last = r.stdout.trim().split('\n').pop();
		console.log(`# pod (${label}): escape suite ${last}`);
		assert.equal(r.status, 0, r.stdout.split('\n').filter((l) => /^FAIL|^     \|/.test(l)).join('\n') + r.stderr);
		assert.match(last, /^\d+ passed, 0 failed$/);
	});

	describe('the server in the pod, through the official SDK', () => {
		let h, cg, idle;
		before(async () => {
			sh(`printf 'TOKEN=${CANARY}\\n' > ${PROJECT}/.env && printf '${CANARY}\\n' > /home/agent/secret.txt`);
			cg = cgroup();
			idle = { anon: cg.anon() };
			h = await startInContainer(['exec', '-i', '-e', `PSM_CANARY=${CANARY}`, CTR, 'python-sandbox-mcp'], PROJECT);
		});
		after(async () => { await h?.close(); });

		test('execute_python answers with every permission of the policy enforced', { timeout: 180000 }, async () => {
			await assertServes(h, PROJECT, exists, '/home/agent/secret.txt');
		});

		if (measure) test('the agent workload of bench/ fits the manifest\'s resources (measured)', { timeout: 600000 }, async () => {
			// The tasks and their data, as bench/agent_tasks.py makes them
			// (Debian's python3, with openpyxl for the Excel input), copied
			// into the pod's project volume.
			const data = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-pod-data-'));
			const py = spawnSync('/usr/bin/python3', ['-c', [
				'import sys, json; sys.path.insert(0, "bench"); import agent_tasks as t',
				't.make_data(sys.argv[1]); print(json.dumps(t.TASKS))'].join('\n'), data], { cwd: REPO, encoding: 'utf8' });
			const tar = spawnSync('tar', ['-C', data, '-c', 'workspace'], { maxBuffer: 256 << 20 });
			fs.rmSync(data, { recursive: true, force: true });
			assert.equal(py.status, 0, py.stderr);
			assert.equal(tar.status, 0);
			const tasks = JSON.parse(py.stdout);
			podman(['exec', '-i', CTR, 'tar', '-x', '-C', PROJECT], { input: tar.stdout });

			const serverIdle = cg.anon();
			cg.resetPeak();
			const cpu0 = cg.cpu(), t0 = Date.now();
			let ok = 0, missing = 0;
			const failed = [];
			for (const [name, code] of tasks) {
				const r = await execPy(h, code, {}, { timeout: 120000 });
				if (r.sc.status === 'ok') ok++;
				// scipy, sklearn, statsmodels, seaborn, sympy, openpyxl: the
				// --full stack, which the image leaves to EXTRA.
				else if (/ModuleNotFoundError/.test(r.sc.error?.type || '') || /No module named|Missing optional dependency/.test(r.sc.error?.message || '')) missing++;
				else failed.push(`${name}: ${show(r.sc.error)}`);
			}
			const cpu = cg.cpu() - cpu0, wall = Date.now() - t0;
			const peak = cg.peak(), anonEnd = cg.anon();
			// Idle: after the background save of the last call has settled.
			await sleep(5000);
			const cpuIdle0 = cg.cpu();
			await sleep(10000);
			const idleCpu = cg.cpu() - cpuIdle0;
			const limit = cg.limit();
			console.log(`# pod: ${tasks.length} tasks, ${ok} ok, ${missing} need a module the image does not have (scipy, sklearn, openpyxl, ...), ${failed.length} failed`);
			console.log(`# pod: memory before the server ${MB(idle.anon)}, server + zygote + session idle ${MB(serverIdle)}, peak during the workload ${MB(peak)} (page cache included), anon+shmem at the end ${MB(anonEnd)}; limit ${MB(limit)}`);
			console.log(`# pod: CPU ${(cpu / 1e6).toFixed(0)} ms over ${wall} ms of wall clock (${(cpu / 1e6 / Math.max(ok, 1)).toFixed(0)} ms per task, ${(cpu / 1e6 / wall).toFixed(2)} cores busy); idle 10 s: ${(idleCpu / 1e6).toFixed(1)} ms`);
			assert.deepEqual(failed, [], 'every task with its modules installed succeeds');
			assert.ok(ok >= 20, `most tasks run on the image's stack: ${ok}`);
			assert.ok(peak < limit, `the workload's peak ${MB(peak)} stays under the manifest's limit ${MB(limit)}`);
			assert.ok(idleCpu / 1e6 < 200, `an idle server costs nothing: ${(idleCpu / 1e6).toFixed(1)} ms of CPU in 10 s`);
		});
	});
});
}

podSuite('as shipped (podman\'s RuntimeDefault)', { manifest: MANIFEST, mode: /^namespaces$/, measure: true });
podSuite('under a containerd-like RuntimeDefault', { ...containerdLikeVariant(), mode: /^Landlock \+ seccomp/, jailMode: 'nsfree', measure: true });
