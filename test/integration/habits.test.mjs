// What a data scientist's habits meet in the sandbox, through the official
// SDK client: joblib's n_jobs, a chart saved with fig.savefig, a wide
// DataFrame, np/pd/plt without an import, a line of IPython.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, writeFile, show } from './lib.mjs';

function outputsFigures(root) {
	const d = path.join(root, 'workspace/outputs');
	return fs.existsSync(d) ? fs.readdirSync(d).filter((f) => /figure-/.test(f)) : [];
}

describe('a data scientist\'s habits', () => {
	let h, root;
	before(async () => {
		root = newProject('habits');
		h = await startClient(root, { structured: true });
	});
	after(async () => { await h?.close(); });

	test('np, pd and plt are bound in a new session, as the tool description says', { timeout: 120000 }, async () => {
		assert.match(h.tools.find((t) => t.name === 'execute_python').description, /preloaded as np, pd and plt/);
		const r = await execPy(h, 'import sys\nprint(np.__name__, pd.__name__, plt.__name__, "joblib" in sys.modules)', { session: 'bound' }, { timeout: 120000 });
		assert.equal(r.sc?.status, 'ok', show(r.text));
		// joblib is not imported for a cell that does not use it.
		assert.equal(r.sc.stdout, 'numpy pandas matplotlib.pyplot False\n');
	});

	test('joblib with n_jobs runs in threads, without noise; loky by name is refused with the way out', { timeout: 120000 }, async () => {
		const r = await execPy(h, 'import joblib, os\nfrom math import factorial\n'
			+ 'print(joblib.Parallel(n_jobs=2)(joblib.delayed(factorial)(i) for i in range(6)))\n'
			+ 'print(joblib.Parallel(n_jobs=-1)(joblib.delayed(os.getpid)() for i in range(4)) == [os.getpid()] * 4)', { session: 'jl' });
		assert.equal(r.sc?.status, 'ok', show(r.text));
		assert.equal(r.sc.stdout, '[1, 1, 2, 6, 24, 120]\nTrue\n', show(r.text));
		assert.equal(r.sc.stderr ?? '', '', show(r.text));
		const loky = await execPy(h, 'with joblib.parallel_backend("loky"):\n    joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(-i) for i in range(4))', { session: 'jl' });
		assert.equal(loky.sc?.status, 'error', show(loky.text));
		assert.equal(loky.sc.error.denied_by, 'shell_exec', show(loky.sc.error));
		assert.match(loky.sc.error.hint, /parallel_backend\("threading"\)/, loky.sc.error.hint);
		assert.doesNotMatch(loky.text, /Bad file descriptor|forked by this cell/, show(loky.text));
		// joblib's multiprocessing backend needs loky's resource tracker,
		// a new program too: refused the same way.
		const mp = await execPy(h, 'with joblib.parallel_backend("multiprocessing"):\n    joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(-i) for i in range(4))', { session: 'jl' });
		assert.equal(mp.sc?.error?.denied_by, 'shell_exec', show(mp.text));
		assert.match(mp.sc.error.hint, /loky and multiprocessing backends start new programs; use threads/, mp.sc.error.hint);
		assert.doesNotMatch(mp.text, /Bad file descriptor|forked by this cell/, show(mp.text));
		// The session goes on, its default still threads.
		const again = await execPy(h, 'joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(-i) for i in range(3))', { session: 'jl' });
		assert.equal(again.sc?.result, '[0, 1, 2]', show(again.text));
	});

	test('a chart saved by fig.savefig, by any route, comes back once', { timeout: 60000 }, async () => {
		const before = outputsFigures(root).length;
		const r = await execPy(h, 'import matplotlib.pyplot as plt\n'
			+ 'fig, ax = plt.subplots(); ax.plot([1, 2, 3]); fig.savefig("workspace/v1.png")\n'
			+ 'fig, ax = plt.subplots(); ax.plot([3, 1]); fig.savefig("workspace/v2.png", dpi=150, bbox_inches="tight")\n'
			+ 'fig, ax = plt.subplots(); ax.bar([1, 2], [3, 4]); fig.savefig("workspace/v3.png", facecolor="white", edgecolor="red")\n'
			+ 'fig, ax = plt.subplots(); ax.plot([2, 2]); fig.tight_layout(); plt.savefig("workspace/v4.png")', { session: 'fig' });
		assert.equal(r.sc?.status, 'ok', show(r.text));
		assert.equal(r.images.length, 4, show(r.text));
		assert.deepEqual(outputsFigures(root).slice(before), [], 'no second copy under outputs/');
		// Changed after its save: the end of the cell saves it as it is now.
		const changed = await execPy(h, 'fig, ax = plt.subplots(); ax.plot([1, 2]); fig.savefig("workspace/v5.png")\nax.set_title("after the save");', { session: 'fig' });
		assert.equal(changed.images.length, 2, show(changed.text));
		assert.equal(outputsFigures(root).length, before + 1);
	});

	test('a cell that raised after plt.subplots() returns no empty chart; one with a plot still returns it', { timeout: 60000 }, async () => {
		const before = outputsFigures(root).length;
		const empty = await execPy(h, 'fig, ax = plt.subplots()\nraise ValueError("no data yet")', { session: 'fig' });
		assert.equal(empty.sc?.status, 'error', show(empty.text));
		assert.equal(empty.images.length, 0, show(empty.text));
		assert.equal(outputsFigures(root).length, before);
		const drawn = await execPy(h, 'fig, ax = plt.subplots(); ax.plot([1, 3])\nraise ValueError("after the plot")', { session: 'fig' });
		assert.equal(drawn.images.length, 1, show(drawn.text));
	});

	test('a DataFrame\'s repr uses the reply\'s room: describe() of 16 columns shows all 16', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'df = pd.DataFrame(np.arange(16 * 40).reshape(40, 16) * 1.5, columns=[f"column_{i}" for i in range(16)])\ndf.describe()', { session: 'wide' });
		assert.equal(r.sc?.status, 'ok', show(r.text));
		for (let i = 0; i < 16; i++) assert.ok(r.sc.result.includes(`column_${i}`), `column_${i} missing:\n${r.sc.result}`);
		assert.doesNotMatch(r.sc.result, /\.\.\./);
		// A frame too long for the reply loses rows the way pandas elides
		// them (the shape said), not a cut through its middle.
		const big = await execPy(h, 'pd.DataFrame(np.arange(20 * 60).reshape(60, 20) * 1.5, columns=[f"c{i}" for i in range(20)])', { session: 'wide' });
		assert.ok(!/omitted/.test(big.text), show(big.text));
		assert.match(big.sc.result, /c19/);
		assert.match(big.sc.result, /\n59 +1770\.0 .*\n\n\[60 rows x 20 columns\]$/, big.sc.result);
	});

	test('%matplotlib and !pip say what they are and what to do instead', { timeout: 60000 }, async () => {
		const magic = await execPy(h, '%matplotlib inline', { session: 'ipy' });
		assert.equal(magic.sc?.error?.type, 'SyntaxError', show(magic.text));
		assert.match(magic.sc.error.hint, /IPython magics \(%matplotlib\) are not available.*outputs\//, magic.sc.error.hint);
		const pip = await execPy(h, 'import os\n!pip install -q polars', { session: 'ipy' });
		assert.equal(pip.sc?.error?.type, 'SyntaxError', show(pip.text));
		assert.match(pip.sc.error.hint, /cannot install packages.*To add polars: .*--venv/, pip.sc.error.hint);
		const ls = await execPy(h, '!ls workspace', { session: 'ipy' });
		assert.match(ls.sc.error.hint, /shell_exec: false.*os\.listdir/, ls.sc.error.hint);
		// A SyntaxError of plain Python has no such hint.
		const plain = await execPy(h, 'x = = 1', { session: 'ipy' });
		assert.equal(plain.sc.error.hint, undefined, show(plain.sc.error));
	});
});

describe('the workspace in a git repository', () => {
	test('git status lists none of the server\'s own files; a .gitignore of the user\'s is kept', { timeout: 120000 }, async () => {
		const { spawnSync } = await import('node:child_process');
		const git = (root, ...a) => spawnSync('git', ['-C', root, ...a], { encoding: 'utf8', env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
		const root = newProject('gitws');
		assert.equal(git(root, 'init', '-q').status, 0);
		const h = await startClient(root, { structured: true, args: ['--log-level', 'info'] });
		try {
			// A long output (a log under .logs) and a saved session (.sessions).
			const r = await execPy(h, 'for i in range(3000):\n    print("line", i)\nkept = 1');
			assert.ok(r.sc.full_output, show(r.text));
			for (let i = 0; i < 600 && !/state saved \(/.test(h.stderr()); i++) await new Promise((res) => setTimeout(res, 100));
			assert.ok(fs.existsSync(path.join(root, 'workspace/.sessions/default/state.snap')), 'a snapshot was saved');
		} finally { await h.close(); }
		const st = git(root, 'status', '--porcelain', '--untracked-files=all');
		assert.equal(st.status, 0, st.stderr);
		assert.deepEqual(st.stdout.trim().split('\n'), ['?? workspace/.gitignore'], st.stdout);
		// The user's own is never overwritten.
		const mine = newProject('gitws-mine');
		writeFile(mine, 'workspace/.gitignore', 'mine\n');
		const h2 = await startClient(mine, { structured: true });
		try { await execPy(h2, '1'); } finally { await h2.close(); }
		assert.equal(fs.readFileSync(path.join(mine, 'workspace/.gitignore'), 'utf8'), 'mine\n');
		// A symlink planted there (by a cell of an earlier run) is never
		// written through: neither to a file outside nor to a new one.
		const planted = newProject('gitws-planted');
		const outside = newProject('gitws-outside');
		fs.writeFileSync(path.join(outside, 'victim'), 'untouched\n');
		fs.mkdirSync(path.join(planted, 'workspace'));
		fs.symlinkSync(path.join(outside, 'victim'), path.join(planted, 'workspace/.gitignore'));
		const dangling = newProject('gitws-dangling');
		fs.mkdirSync(path.join(dangling, 'workspace'));
		fs.symlinkSync(path.join(outside, 'made-by-the-server'), path.join(dangling, 'workspace/.gitignore'));
		for (const root of [planted, dangling]) {
			const hp = await startClient(root, { structured: true });
			try { await execPy(hp, '1'); } finally { await hp.close(); }
			assert.ok(fs.lstatSync(path.join(root, 'workspace/.gitignore')).isSymbolicLink());
		}
		assert.equal(fs.readFileSync(path.join(outside, 'victim'), 'utf8'), 'untouched\n');
		assert.ok(!fs.existsSync(path.join(outside, 'made-by-the-server')), 'no file made through a dangling link');
	});
});

