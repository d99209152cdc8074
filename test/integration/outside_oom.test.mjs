// The kernel's OOM killer in a memory cgroup too small for what a session
// does: the server runs in a cgroup of its own with a memory limit, a
// session holds a large array (its checkpoint copy shares it), and a call
// rewrites it in place, so that every page is copied and the cgroup fills.
// The kernel kills something; checked from outside: which process it took
// (by the titles of the processes that are gone), that the server lives,
// that the reply says what the session then holds (the next call reads the
// array back), that the copy's oom_score_adj is raised while the
// session's and the zygote's are not (a session resumed from its copy
// included; a cell cannot change its own), and that the server's
// oom_score is below the sandbox's; once, the saver's score too.  With
// namespaces, as root; the other jail mode and nobody:
// outside_oom_modes.test.mjs (a file of its own, run beside this one).  Needs root and a memory cgroup to write
// (cgroup v2's memory.max, or v1's memory.limit_in_bytes), as the CI
// machine has.
import { test, describe, after } from 'node:test';

import { oomCase, REWRITE, NEW_ARRAY } from './oom_lib.mjs';

const CASES = [
	{ title: 'a large rewrite: the kernel takes the copy, the call goes on, a new copy is taken', c: REWRITE, saver: true },
	{ title: 'a large new array: the kernel takes the session, which is rolled back to its copy', c: NEW_ARRAY },
];

describe('the OOM killer in a small memory cgroup', () => {
	const cgs = [];
	after(() => { for (const c of cgs) c.cleanup(); });
	for (const { title, c, saver } of CASES)
		test(title, { timeout: 180000 }, (t) => oomCase(t, cgs, { mode: 'namespaces', who: 'root' }, c, { saver }));
});
