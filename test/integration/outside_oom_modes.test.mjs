// The OOM killer in a small memory cgroup (outside_oom.test.mjs says how)
// in the jail's other mode and as nobody: without namespaces (Landlock and
// seccomp under a container runtime's default rules, build/helpers/
// dockerrun) as root and as nobody, whose server raises the copy's and the
// saver's oom_score_adj as with namespaces as root (without namespaces a
// server run by nobody keeps its sessions dumpable, so their /proc files
// are its uid's); and as nobody with namespaces, whose server cannot (the
// processes below it are not dumpable, so their /proc files are root's,
// and the sandbox may not write its own): every score stays as it came,
// and in a rewrite the kernel takes the session, which is rolled back to
// its copy.  In each, the server's oom_score is below the sandbox's.
// Needs root (a memory cgroup to write, setpriv).
import { test, describe, after } from 'node:test';

import { oomCase, REWRITE, NEW_ARRAY, REWRITE_UNRAISED } from './oom_lib.mjs';

const COMBOS = [
	{ mode: 'no namespaces', who: 'root', raised: true, cases: [
		['a large rewrite: the kernel takes the copy, the call goes on, a new copy is taken', REWRITE],
		['a large new array: the kernel takes the session, which is rolled back to its copy', NEW_ARRAY]] },
	// As nobody the new array ends as it does as root (nothing is raised
	// there either way): the rewrite only.  The saver's score (about 7 s
	// more): as nobody without namespaces, as in the pod spec (as root,
	// outside_oom.test.mjs).
	{ mode: 'no namespaces', who: 'nobody', raised: true, saver: true, cases: [
		['a large rewrite: the kernel takes the copy, the call goes on, a new copy is taken', REWRITE]] },
	{ mode: 'namespaces', who: 'nobody', raised: false, cases: [
		['a large rewrite, no score raised: the kernel takes the session, which is rolled back to its copy', REWRITE_UNRAISED]] },
];

for (const combo of COMBOS)
	describe(`the OOM killer in a small memory cgroup: ${combo.mode}, as ${combo.who}`, () => {
		const cgs = [];
		after(() => { for (const c of cgs) c.cleanup(); });
		for (const [title, c] of combo.cases)
			test(title, { timeout: 180000 }, (t) => oomCase(t, cgs, combo, c, { raised: combo.raised, saver: combo.saver }));
	});
