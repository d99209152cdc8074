// What reaches the model in an execute_python reply: the exception line
// always (folded and head-and-tail tracebacks), through the SDK client.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';

import { startClient, newProject, execPy, callTool, writeFile, RawServer, jsonResult, show, BIN, REPO } from './lib.mjs';

const SKILL = fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8');

/** A project whose SKILL.md has some text replaced; returns [root, skillPath]. */
export function projectWith(tag, replacements) {
	const root = newProject(tag);
	let text = SKILL;
	for (const [from, to] of replacements) {
		assert.ok(text.includes(from), `SKILL.md has ${from}`);
		text = text.replace(from, to);
	}
	return [root, writeFile(root, 'policy/SKILL.md', text)];
}

/** The lines of the error section, without trailing blank lines. */
function errorLines(r) {
	const e = r.sections.error;
	assert.ok(e, `an error section: ${show(r.text)}`);
	const lines = e.split('\n');
	while (lines.length && lines[lines.length - 1] === '') lines.pop();
	return lines;
}

describe('tracebacks', () => {
	let h;
	before(async () => { h = await startClient(newProject('tb'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('deep recursion: frames fold as CPython folds them, RecursionError is the last line', async () => {
		const r = await execPy(h, 'import sys\nsys.setrecursionlimit(5000)\ndef f(n):\n    return f(n+1)\nf(0)');
		assert.equal(r.head.status, 'error', show(r.text));
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^RecursionError: maximum recursion depth exceeded/, show(r.text));
		assert.match(r.sections.error, /\[Previous line repeated \d{3,} more times\]/, show(r.text));
		assert.ok(r.text.length < 2000, `the reply is short once folded: ${r.text.length} chars`);
		assert.equal(r.sc.error.type, 'RecursionError');
		assert.match(r.sc.error.traceback, /RecursionError: maximum recursion depth exceeded\n?$/);
	});

	test('mutual recursion through a library frame folds as a repeated block', async () => {
		const code = [
			'import copy',
			'class Node:',
			'    def __deepcopy__(self, memo):',
			'        return copy.deepcopy(Node(), memo)',
			'copy.deepcopy(Node())',
		].join('\n');
		const r = await execPy(h, code);
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^RecursionError: /, show(r.text));
		assert.match(r.sections.error, /\[Previous \d lines repeated \d+ more times\]/, show(r.text));
		assert.ok(r.text.length < 3000, `folded: ${r.text.length} chars`);
	});
});

describe('tracebacks under a small max_output_chars', () => {
	let h;
	before(async () => {
		const [root, skill] = projectWith('tbsmall', [['max_output_chars: 8000', 'max_output_chars: 1500']]);
		h = await startClient(root, { structured: true, args: ['--skill', skill] });
	});
	after(async () => { await h?.close(); });

	test('a long traceback of distinct frames keeps its head and its tail; the exception line is last', async () => {
		// 300 distinct functions calling each other: nothing to fold.
		const defs = [];
		for (let i = 0; i < 300; i++) defs.push(`def g${i}():\n    return g${i + 1}()`);
		defs.push('def g300():\n    raise ValueError("the bottom was reached")');
		const r = await execPy(h, defs.join('\n') + '\ng0()');
		const lines = errorLines(r);
		assert.equal(lines[lines.length - 1], 'ValueError: the bottom was reached', show(r.text));
		assert.equal(lines[0], 'Traceback (most recent call last):', 'the head is kept');
		assert.match(r.sections.error, /omitted|cut/, 'a marker says what was left out');
		assert.match(r.sections.error, /in g299/, 'the tail frames are kept');
		assert.ok(r.sections.error.length < 2500, `about max_output_chars: ${r.sections.error.length}`);
	});

	test('a refusal: the exception line, then denied_by and the hint, end the section', async () => {
		const defs = [];
		for (let i = 0; i < 200; i++) defs.push(`def w${i}():\n    return w${i + 1}()`);
		defs.push('def w200():\n    open("not-in-workspace.txt", "w")');
		const r = await execPy(h, defs.join('\n') + '\nw0()');
		const lines = errorLines(r);
		const n = lines.length;
		assert.match(lines[n - 3], /^(PermissionError|OSError): /, show(r.text));
		assert.equal(lines[n - 2], 'denied_by: fs_write');
		assert.match(lines[n - 1], /denied by the sandbox policy/);
	});

	test('a huge exception message keeps its type at the start of the last line', async () => {
		const r = await execPy(h, 'raise KeyError("k" * 50000)');
		const lines = errorLines(r);
		assert.match(lines[lines.length - 1], /^KeyError: 'kkkk.*omitted.*kkkk'$/, show(r.text));
		assert.ok(r.text.length < 4000, `bounded: ${r.text.length}`);
	});
});

const MAKE_FILES = [
	'import matplotlib.pyplot as plt, pandas as pd',
	'pd.DataFrame({"a": [1, 2, 3]}).to_csv("workspace/outputs/t.csv", index=False)',
	'plt.plot([1, 2, 3]); plt.savefig("workspace/outputs/p.png")',
].join('\n');

describe('an SDK client that asks for protocol 2024-11-05', () => {
	let h;
	before(async () => { h = await startClient(newProject('v2024'), { structured: true, protocolVersion: '2024-11-05' }); });
	after(async () => { await h?.close(); });

	test('tools/list: no outputSchema, title or annotations', () => {
		for (const t of h.tools) {
			assert.equal(t.outputSchema, undefined, `${t.name}: ${show(t)}`);
			assert.equal(t.title, undefined, t.name);
			assert.equal(t.annotations, undefined, t.name);
			assert.ok(t.inputSchema && t.description, t.name);
		}
	});

	test('execute_python: no structuredContent, no resource_link; links are lines of text, images stay', async () => {
		const r = await execPy(h, MAKE_FILES);
		assert.equal(r.head.status, 'ok', show(r.text));
		assert.equal(r.res.structuredContent, undefined, show(r.res));
		assert.deepEqual(r.blocks.map((b) => b.type), ['text', 'image'], show(r.blocks.map((b) => b.type)));
		assert.match(r.text, /\nlinks:\n- t\.csv: file:\/\/\S+\/workspace\/outputs\/t\.csv \(text\/csv, \d+ bytes\)\n/, show(r.text));
	});

	test('list_artifacts and verify_outputs: the JSON stays in the text, no structuredContent', async () => {
		const la = await callTool(h, 'list_artifacts', {});
		assert.equal(la.structuredContent, undefined);
		assert.ok(JSON.parse(jsonResult(la).text).artifacts.length >= 2);
		const vo = await callTool(h, 'verify_outputs', { files: ['workspace/outputs/t.csv'] });
		assert.equal(vo.structuredContent, undefined);
		assert.equal(JSON.parse(jsonResult(vo).text).status, 'completed');
	});
});

describe('what each protocol version gets, on raw stdio', () => {
	for (const [v, annotations, structured] of [['2024-11-05', false, false], ['2025-03-26', true, false], ['2025-06-18', true, true], ['2025-11-25', true, true]]) {
		test(`${v}: annotations ${annotations}, outputSchema/title/structuredContent/resource_link ${structured}`, async () => {
			const srv = new RawServer(newProject('raw' + v), { structured: true });
			try {
				const init = await srv.initialize(v);
				assert.equal(init.result.protocolVersion, v);
				assert.equal('title' in init.result.serverInfo, structured, show(init.result.serverInfo));
				const tl = await srv.request('tools/list', {});
				for (const t of tl.result.tools) {
					assert.equal('annotations' in t, annotations, t.name);
					assert.equal('title' in t, structured, t.name);
					assert.equal('outputSchema' in t, structured, t.name);
				}
				const ex = await srv.callTool('execute_python', { code: 'open("workspace/outputs/n.txt", "w").write("x")' }, { timeout: 120000 });
				assert.equal('structuredContent' in ex.result, structured, show(ex.result));
				assert.equal(ex.result.content.some((b) => b.type === 'resource_link'), structured, show(ex.result.content));
				assert.equal(/\nlinks:\n- n\.txt: file:\/\//.test(ex.result.content[0].text), !structured, show(ex.result.content[0].text));
				const la = await srv.callTool('list_artifacts', {}, { timeout: 60000 });
				assert.equal('structuredContent' in la.result, structured);
				assert.equal(JSON.parse(la.result.content[0].text).count, 1);
				assert.deepEqual(srv.violations, []);
			} finally {
				srv.kill();
			}
		});
	}
});

describe('list_artifacts and verify_outputs declare an outputSchema that their replies meet', () => {
	let h;
	before(async () => { h = await startClient(newProject('oschema'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('real replies validate against the declared schemas (ajv); the text is the same JSON, compact', async () => {
		const ajv = new Ajv({ strict: false, allErrors: true });
		const schemas = Object.fromEntries(h.tools.map((t) => [t.name, t.outputSchema]));
		for (const name of ['list_artifacts', 'verify_outputs']) assert.equal(schemas[name]?.type, 'object', `${name} declares an outputSchema`);
		const r = await execPy(h, MAKE_FILES + '\nimport os, json\nos.symlink("/etc/passwd", "workspace/link")\njson.dump({"k": 1}, open("workspace/outputs/s.json", "w"))');
		assert.equal(r.head.status, 'ok', show(r.text));
		const calls = [
			['list_artifacts', {}],
			['list_artifacts', { include_hidden: true, pattern: '*.png' }],
			['verify_outputs', { files: ['workspace/outputs/p.png', { path: 'workspace/outputs/s.json', required_keys: ['k'] }] }],
			['verify_outputs', { files: ['workspace/outputs/missing.csv', 'workspace/link'], write_summary: false }],
			['verify_outputs', { files: ['workspace/outputs/t.csv'], session: 'never-ran' }],
		];
		for (const [name, args] of calls) {
			const res = await callTool(h, name, args);
			assert.equal(res.isError, false, show(res));
			const { sc, fromText, text } = jsonResult(res);
			const validate = ajv.compile(schemas[name]);
			assert.ok(validate(sc), `${name} ${JSON.stringify(args)}: ${show(validate.errors)}\n${show(sc)}`);
			assert.deepEqual(fromText, sc, 'the text carries the same JSON');
			assert.equal(text, JSON.stringify(sc), 'the text is compact JSON');
		}
	});

	test('the schemas are strict enough to fail on a wrong reply', () => {
		const ajv = new Ajv({ strict: false });
		const la = ajv.compile(h.tools.find((t) => t.name === 'list_artifacts').outputSchema);
		assert.equal(la({ artifacts: [{ path: 'x' }], count: 1, total_bytes: 1, truncated: false }), false);
		const vo = ajv.compile(h.tools.find((t) => t.name === 'verify_outputs').outputSchema);
		assert.equal(vo({ status: 'done', exit_code: 0, checks: [], failed: 0, summary_path: null }), false);
	});
});

describe('--images link', () => {
	let h;
	before(async () => { h = await startClient(newProject('imglink'), { structured: true, args: ['--images', 'link'] }); });
	after(async () => { await h?.close(); });

	test('a chart is announced in the text and as a resource_link, never as an image block', async () => {
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nplt.plot([3, 2]); plt.savefig("workspace/outputs/b.jpg")');
		assert.equal(r.head.status, 'ok', show(r.text));
		assert.equal(r.images.length, 0, show(r.blocks.map((b) => b.type)));
		const pngs = r.sc.artifacts.filter((a) => a.mime === 'image/png');
		assert.equal(pngs.length, 1, show(r.sc.artifacts));
		for (const a of r.sc.artifacts) {
			assert.ok(r.sections.artifacts.includes(a.path), `the text names ${a.path}`);
			assert.ok(r.links.some((l) => l.uri.endsWith('/' + a.path) && l.mimeType === a.mime), `a resource_link for ${a.path}: ${show(r.links)}`);
		}
		assert.ok(h.tools.find((t) => t.name === 'execute_python').description.includes('links'), 'the tool says how figures come back');
	});

	test('the same call without the flag returns the image inline', async () => {
		const h2 = await startClient(newProject('imginline'), { structured: true, args: ['--images', 'inline'] });
		try {
			const r = await execPy(h2, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()');
			assert.equal(r.images.length, 1, show(r.blocks.map((b) => b.type)));
			assert.equal(r.links.length, 0);
		} finally { await h2.close(); }
	});

	test('any other value is a usage error (exit 2) naming the two values', () => {
		const p = spawnSync(BIN, ['--root', newProject('imgbad'), '--images', 'none'], { input: '', encoding: 'utf8', timeout: 20000 });
		assert.equal(p.status, 2, show(p));
		assert.match(p.stderr, /--images must be inline or link, not 'none'/);
		assert.equal(p.stdout, '');
	});
});

describe('what each call used', () => {
	let h;
	before(async () => { h = await startClient(newProject('usage'), { structured: true }); });
	after(async () => { await h?.close(); });

	const usageOf = (r) => {
		const m = / · cpu (\d+) ms · peak (\d+) MB$/.exec(r.text.split('\n')[0]);
		assert.ok(m, `the status line ends with cpu and peak: ${r.text.split('\n')[0]}`);
		assert.equal(Number(m[1]), r.sc.cpu_ms);
		assert.equal(Number(m[2]), Math.round(r.sc.peak_mb));
		return { cpu: r.sc.cpu_ms, peak: r.sc.peak_mb };
	};

	test('peak memory is this call\'s, not the session\'s lifetime peak; CPU time is counted', async () => {
		const a = usageOf(await execPy(h, 'import numpy as np\na = np.ones(60_000_000)\na.sum()\ndel a'));
		assert.ok(a.peak >= 450, `480 MB were allocated: peak ${a.peak}`);
		const b = usageOf(await execPy(h, 'b = np.ones(20_000_000)\nb[::4096] = 2\nfloat(b.sum())'));
		assert.ok(b.peak >= 150 && b.peak < 400, `160 MB this call after 480 MB before: peak ${b.peak}`);
		const c = usageOf(await execPy(h, 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass'));
		assert.ok(c.cpu >= 500, `0.6 s of CPU: ${c.cpu} ms`);
		const d = usageOf(await execPy(h, 'import time\ntime.sleep(0.6)'));
		assert.ok(d.cpu < 400, `sleeping uses no CPU: ${d.cpu} ms`);
	});

	test('a child process the call forked counts', async () => {
		const code = [
			'import os, time',
			'pid = os.fork()',
			'if pid == 0:',
			'    t = time.process_time()',
			'    while time.process_time() - t < 0.8: pass',
			'    os._exit(0)',
			'os.waitpid(pid, 0)[1]',
		].join('\n');
		const r = await execPy(h, code);
		assert.equal(r.sc.result, '0', show(r.text));
		const u = usageOf(r);
		assert.ok(u.cpu >= 700, `the child's 0.8 s of CPU count: ${u.cpu} ms`);
	});

	test('a call stopped by its timeout says which limit and its value; what it used is measured', async () => {
		const r = await execPy(h, 'while True: pass', { timeout_s: 2 });
		assert.equal(r.head.status, 'timeout', show(r.text));
		assert.match(r.sections.error, /^denied_by: limits \(timeout_s: 2\)$/m, show(r.text));
		assert.equal(r.sc.error.limit, 'timeout_s: 2');
		const u = usageOf(r);
		assert.ok(u.cpu >= 100 && u.cpu <= r.sc.duration_ms + 100, `it spun until killed (the machine may be shared): ${u.cpu} ms of ${r.sc.duration_ms}`);
	});

	test('the outputSchema declares cpu_ms and peak_mb', () => {
		const props = h.tools.find((t) => t.name === 'execute_python').outputSchema.properties;
		assert.ok(props.cpu_ms && props.peak_mb, show(props));
	});
});

describe('a package that is not installed', () => {
	let h;
	before(async () => { h = await startClient(newProject('missing'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('the hint says it is not installed, what of the usual stack is, and how to add it', async () => {
		// The first of these that this machine lacks (each has a Debian package).
		const pick = await execPy(h, 'import importlib.util\n[m for m in ("xgboost", "cv2", "geopandas", "numba", "h5py", "tables") if importlib.util.find_spec(m) is None][:1]');
		const m = /'(\w+)'/.exec(pick.sc.result);
		assert.ok(m, `this machine lacks one of them: ${pick.sc.result}`);
		const deb = { xgboost: 'python3-xgboost', cv2: 'python3-opencv', geopandas: 'python3-geopandas', numba: 'python3-numba', h5py: 'python3-h5py', tables: 'python3-tables' }[m[1]];
		const r = await execPy(h, `import ${m[1]}`);
		assert.equal(r.sc.error.type, 'ModuleNotFoundError');
		const hint = r.sc.error.hint;
		assert.ok(hint, show(r.text));
		assert.match(hint, new RegExp(`^${m[1]} is not installed on this machine`));
		assert.match(hint, /Installed here: numpy \d[\w.+]*, pandas \d[\w.+]*, matplotlib \d/);
		assert.ok(hint.includes(deb), `names ${deb}: ${hint}`);
		assert.ok(hint.includes('--venv') && hint.includes(`${h.root}/.interpreter-venv`), hint);
		const lines = r.sections.error.trimEnd().split('\n');
		assert.equal(lines[lines.length - 1], hint, 'the hint ends the error section');
		assert.equal(lines[lines.length - 2], `ModuleNotFoundError: No module named '${m[1]}'`);
	});

	test('a name with no known Debian package points to --venv; a missing submodule of an installed package gets no hint', async () => {
		const r = await execPy(h, 'import surely_not_a_real_package_psm');
		assert.match(r.sc.error.hint, /^surely_not_a_real_package_psm is not installed on this machine.*--venv/);
		assert.ok(!r.sc.error.hint.includes('Debian package'), r.sc.error.hint);
		const sub = await execPy(h, 'import numpy.surely_not_a_submodule');
		assert.equal(sub.sc.error.type, 'ModuleNotFoundError');
		assert.equal(sub.sc.error.hint, undefined, show(sub.sc.error));
	});
});

describe('scripts/setup.sh --full', () => {
	// apt-get and dpkg-query replaced by stubs on PATH: every package is
	// "missing", and the stub records what would be installed.
	function run(args) {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'psm-setup-'));
		fs.writeFileSync(path.join(dir, 'dpkg-query'), '#!/bin/sh\necho not-installed\n', { mode: 0o755 });
		fs.writeFileSync(path.join(dir, 'apt-get'), `#!/bin/sh\necho "$@" >> ${dir}/log\n`, { mode: 0o755 });
		fs.writeFileSync(path.join(dir, 'sudo'), '#!/bin/sh\nexec "$@"\n', { mode: 0o755 });
		const p = spawnSync('sh', [path.join(REPO, 'scripts/setup.sh'), ...args], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, encoding: 'utf8' });
		let log = '';
		try { log = fs.readFileSync(path.join(dir, 'log'), 'utf8'); } catch { /* none */ }
		fs.rmSync(dir, { recursive: true, force: true });
		return { status: p.status, stderr: p.stderr, installed: (log.split('\n').find((l) => l.includes('install')) || '').split(/\s+/) };
	}
	const FULL = ['python3-scipy', 'python3-sklearn', 'python3-statsmodels', 'python3-seaborn', 'python3-sympy', 'python3-openpyxl'];

	test('the default installs none of the full stack; --full adds all six', () => {
		const plain = run([]);
		assert.equal(plain.status, 0, plain.stderr);
		assert.ok(plain.installed.includes('python3-numpy'), show(plain.installed));
		for (const p of FULL) assert.ok(!plain.installed.includes(p), `${p} without --full`);
		const full = run(['--full']);
		assert.equal(full.status, 0, full.stderr);
		for (const p of [...FULL, 'python3-numpy']) assert.ok(full.installed.includes(p), `${p} with --full: ${show(full.installed)}`);
	});

	test('an unknown option is refused (exit 2)', () => {
		const r = run(['--ful']);
		assert.equal(r.status, 2);
		assert.match(r.stderr, /unknown option --ful/);
	});
});

describe('a relative write into the read-only project root', () => {
	let h;
	before(async () => { h = await startClient(newProject('relwrite'), { structured: true }); });
	after(async () => { await h?.close(); });

	for (const [what, code, want] of [
		['open("ans.png")', 'open("ans.png", "wb").write(b"x")', 'workspace/ans.png'],
		['plt.savefig("ans.png") (library frames in between)', 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig("ans.png")', 'workspace/ans.png'],
		['df.to_csv("train.csv")', 'import pandas as pd\npd.DataFrame({"a": [1]}).to_csv("train.csv")', 'workspace/train.csv'],
		['os.makedirs("results/run1") (refused at its first folder)', 'import os\nos.makedirs("results/run1")', 'workspace/results'],
	]) {
		test(`${what}: the hint names the exact path to write instead`, async () => {
			const r = await execPy(h, code);
			assert.equal(r.sc.error?.denied_by, 'fs_write', show(r.text));
			assert.ok(r.sc.error.hint.includes(`write ${want} instead`), r.sc.error.hint);
			assert.ok(!fs.existsSync(path.join(h.root, want.replace('workspace/', ''))), 'nothing was written in the root');
		});
	}

	test('SKILL.md tells the model to give every file its workspace path', () => {
		const body = SKILL.split('\n---\n').slice(1).join('\n---\n');
		assert.match(body, /never a bare name such as `ans\.png`/);
	});
});

describe('the project venv (ROOT/.interpreter-venv)', () => {
	// Made offline: python3 -m venv (no --system-site-packages; it brings
	// pip), then its own pip installs a tiny wheel built here.
	const root = newProject('pvenv');
	const venv = path.join(root, '.interpreter-venv');
	let made;
	before(() => {
		made = spawnSync('/usr/bin/python3', ['-m', 'venv', venv], { encoding: 'utf8', timeout: 120000 });
		const build = [
			'import base64, hashlib, sys, zipfile',
			'files = {"psm_local_probe/__init__.py": "MAGIC = \\"local-probe-ok\\"\\n",',
			'         "psm_local_probe-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: psm-local-probe\\nVersion: 0.1\\n",',
			'         "psm_local_probe-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: psm-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}',
			'rec = "".join("%s,sha256=%s,%d\\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(d.encode()).digest()).rstrip(b"=").decode(), len(d)) for n, d in files.items())',
			'files["psm_local_probe-0.1.dist-info/RECORD"] = rec + "psm_local_probe-0.1.dist-info/RECORD,,\\n"',
			'with zipfile.ZipFile(sys.argv[1], "w") as z:',
			'    for n, d in files.items(): z.writestr(n, d)',
		].join('\n');
		const whl = path.join(root, 'psm_local_probe-0.1-py3-none-any.whl');
		const b = spawnSync('/usr/bin/python3', ['-c', build, whl], { encoding: 'utf8' });
		assert.equal(b.status, 0, b.stderr);
		const pip = spawnSync(path.join(venv, 'bin/pip'), ['install', '--no-index', '--no-deps', '--disable-pip-version-check', whl], { encoding: 'utf8', timeout: 120000 });
		assert.equal(pip.status, 0, pip.stdout + pip.stderr);
		fs.rmSync(whl);
	});

	test('python3 -m venv worked', () => { assert.equal(made.status, 0, made.stderr); });

	test('used without --venv (said in --check and the log); its package imports next to the system stack; read-only', async () => {
		const chk = spawnSync(BIN, ['--root', root, '--check'], { encoding: 'utf8', timeout: 120000 });
		assert.match(chk.stdout, new RegExp(`^venv: ${venv} \\(default: ROOT/\\.interpreter-venv exists, read-only, Python 3\\.\\d+\\)$`, 'm'), chk.stdout);
		const h = await startClient(root, { structured: true });
		try {
			const r = await execPy(h, 'import psm_local_probe, numpy\npsm_local_probe.MAGIC');
			assert.equal(r.sc.result, "'local-probe-ok'", show(r.text));
			const w = await execPy(h, `open(${JSON.stringify(path.join(venv, 'pyvenv.cfg'))}, "a").write("x")`);
			assert.equal(w.sc.status, 'error', show(w.text));
			assert.ok(!fs.readFileSync(path.join(venv, 'pyvenv.cfg'), 'utf8').endsWith('x'), 'the venv is read-only');
			assert.match(h.stderr(), new RegExp(`venv: ${venv} \\(default`), 'the log says which venv');
		} finally { await h.close(); }
	});

	test('a venv made by another Python version is refused at start (exit 2) with what to do', () => {
		const other = newProject('pvenv-other');
		const ov = path.join(other, '.interpreter-venv');
		fs.mkdirSync(path.join(ov, 'lib/python3.99/site-packages'), { recursive: true });
		fs.writeFileSync(path.join(ov, 'pyvenv.cfg'), 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.99.1\n');
		for (const args of [['--root', other], ['--root', newProject('pvenv-flag'), '--venv', ov]]) {
			const p = spawnSync(BIN, args, { input: '', encoding: 'utf8', timeout: 20000 });
			assert.equal(p.status, 2, show(p));
			assert.match(p.stderr, /was made by Python 3\.99 \(pyvenv\.cfg\), but this server embeds Python 3\.\d+.*recreate it with python3\.\d+ -m venv/, p.stderr);
			assert.equal(p.stdout, '');
		}
	});
});

describe('--root that is no project directory', () => {
	for (const [what, args, env, want] of [
		['a literal ${workspaceFolder}', ['--root', '${workspaceFolder}'], {}, /--root '\$\{workspaceFolder\}' still holds an unexpanded \$\{\.\.\.\}.*write the project's absolute path instead/],
		['an unexpanded CLAUDE_PROJECT_DIR', [], { CLAUDE_PROJECT_DIR: '${PROJECT}/x' }, /CLAUDE_PROJECT_DIR '\$\{PROJECT\}\/x' still holds an unexpanded/],
		['a directory that does not exist', ['--root', '/nonexistent/psm-project'], {}, /--root '\/nonexistent\/psm-project' is not an existing directory: write the absolute path/],
	]) {
		test(`${what}: a usage error (exit 2) that says what to write`, () => {
			const p = spawnSync(BIN, args, { input: '', encoding: 'utf8', timeout: 20000, env: { PATH: process.env.PATH, ...env } });
			assert.equal(p.status, 2, show(p));
			assert.match(p.stderr, want);
			assert.equal(p.stdout, '');
		});
	}
});
