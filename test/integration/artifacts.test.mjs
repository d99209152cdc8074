// The artifacts of a call (images inline, other files as resource_link)
// and list_artifacts.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, execPy, callTool, jsonResult, writeFile, fileUri, pngInfo, show } from './lib.mjs';

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('artifacts of execute_python', () => {
	let h, root;
	before(async () => { root = newProject('art'); h = await startClient(root, { structured: true }); });
	after(async () => { await h?.close(); });

	test('plt.plot + plt.show() returns an image/png block; the file is under workspace/outputs/', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title("show test")\nplt.show()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.images.length, 1, `one image block expected: ${show(r.blocks)}`);
		const img = r.images[0];
		assert.equal(img.mimeType, 'image/png');
		assert.match(img.data, /^[A-Za-z0-9+/]+={0,2}$/, 'valid base64');
		const png = Buffer.from(img.data, 'base64');
		const info = pngInfo(png);
		assert.ok(info && info.width > 10 && info.height > 10, 'a whole PNG (signature, IHDR, IEND)');
		assert.ok(png.length < 256 * 1024, `images stay under 256 KiB: ${png.length}`);
		const pngs = r.sc.artifacts.filter((a) => a.mime === 'image/png');
		assert.equal(pngs.length, 1, show(r.sc.artifacts));
		assert.match(pngs[0].path, /^workspace\/outputs\/[^/]+\.png$/);
		assert.equal(pngs[0].change, 'created');
		const onDisk = path.join(root, pngs[0].path);
		assert.ok(fs.statSync(onDisk).isFile(), `${onDisk} exists`);
		assert.equal(pngs[0].bytes, fs.statSync(onDisk).size);
		assert.ok(r.sections.artifacts?.includes(pngs[0].path), `the text lists the artifact: ${r.text}`);
		const kinds = r.blocks.map((b) => b.type);
		assert.equal(kinds[0], 'text');
		assert.deepEqual(kinds.slice(1), kinds.slice(1).sort((a, b) => (a === 'image' ? 0 : 1) - (b === 'image' ? 0 : 1)), `text, then images, then links: ${kinds}`);
	});

	test('plt.show() with two open figures returns two images; nothing waits for a display', { timeout: 60000 }, async () => {
		const t0 = performance.now();
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nfor k in range(2):\n    plt.figure()\n    plt.bar([1, 2], [k + 1, 2])\nplt.show()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.equal(r.images.length, 2, show(r.blocks));
		assert.ok(performance.now() - t0 < 30000);
		const again = await execPy(h, 'len(plt.get_fignums())');
		assert.equal(again.images.length, 0, 'figures already shown are not returned again');
	});

	test('an image saved with savefig is returned inline too', async () => {
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1])\nfig.savefig("workspace/outputs/saved.png")\nplt.close(fig)');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const a = r.sc.artifacts.find((x) => x.path === 'workspace/outputs/saved.png');
		assert.ok(a, show(r.sc.artifacts));
		assert.equal(a.change, 'created');
		assert.equal(r.images.length, 1, show(r.blocks));
		assert.ok(pngInfo(Buffer.from(r.images[0].data, 'base64')));
	});

	test('savefig then plt.show(): the chart comes back once; changed after the save, it is shown again', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.savefig("workspace/outputs/rev.png")\nplt.show()');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		assert.deepEqual(r.sc.artifacts.map((a) => a.path), ['workspace/outputs/rev.png'], show(r.sc.artifacts));
		assert.equal(r.images.length, 1, show(r.blocks.map((b) => b.type)));
		const m = await execPy(h, 'plt.plot([3, 1, 2])\nplt.savefig("workspace/outputs/rev2.png")\nplt.title("changed after the save")\nplt.show()');
		assert.equal(m.sc.artifacts.length, 2, show(m.sc.artifacts));
		assert.equal(m.images.length, 2);
		// Saved to a buffer or outside the workspace: the model has not seen it.
		const b = await execPy(h, 'import io\nplt.plot([1, 2])\nplt.savefig(io.BytesIO(), format="png")\nplt.savefig("/tmp/x.png")\nplt.show()');
		assert.equal(b.images.length, 1, show(b.sc.artifacts));
		assert.match(b.sc.artifacts[0].path, /figure-/);
	});

	test('plt.show() in a new session never overwrites another session\'s figure', { timeout: 60000 }, async () => {
		const code = 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()';
		const a = await execPy(h, code, { session: 'figs-a' });
		const b = await execPy(h, code, { session: 'figs-a', reset: true });
		const [pa, pb] = [a, b].map((r) => r.sc.artifacts.filter((x) => x.mime === 'image/png').map((x) => x.path));
		assert.equal(pa.length, 1, show(a.sc.artifacts));
		assert.equal(pb.length, 1, show(b.sc.artifacts));
		assert.notEqual(pb[0], pa[0], 'a new name, not the earlier session\'s file');
		assert.equal(b.sc.artifacts[0].change, 'created', show(b.sc.artifacts));
		// And in the default session of a new server over the same workspace.
		const h2 = await startClient(root, { structured: true, args: ['--log-level', 'warning'] });
		try {
			const before = fs.readdirSync(path.join(root, 'workspace/outputs')).filter((n) => n.startsWith('figure-'));
			const c = await execPy(h2, code, { reset: true });
			const pc = c.sc.artifacts.filter((x) => x.mime === 'image/png');
			assert.equal(pc.length, 1, show(c.sc.artifacts));
			assert.equal(pc[0].change, 'created', show(pc));
			assert.ok(!before.includes(path.basename(pc[0].path)), `${pc[0].path} was there: ${before}`);
		} finally { await h2.close(); }
	});

	test('a large PNG is downscaled below 256 KiB in the reply; the file keeps its size', { timeout: 180000 }, async () => {
		const code = 'import numpy as np, matplotlib.pyplot as plt\nfig = plt.figure(figsize=(20, 20), dpi=150)\nplt.imshow(np.random.rand(600, 600), interpolation="nearest")\nfig.savefig("workspace/outputs/big.png")\nplt.close(fig)\nimport os\nos.path.getsize("workspace/outputs/big.png")';
		const r = await execPy(h, code, { timeout_s: 160 }, { timeout: 170000 }); // rendering 3000x3000 is slow on a loaded machine
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const size = Number(r.sc.result);
		assert.ok(size > 256 * 1024, `the test image should be large: ${size}`);
		assert.equal(r.images.length, 1, show(r.blocks));
		const b = Buffer.from(r.images[0].data, 'base64');
		assert.ok(b.length < 256 * 1024, `inline image is ${b.length} bytes`);
		assert.ok(['image/png', 'image/jpeg'].includes(r.images[0].mimeType));
		assert.equal(fs.statSync(path.join(root, 'workspace/outputs/big.png')).size, size, 'the file itself is untouched');
	});

	test('a CSV written by the code comes back as a resource_link; created, then modified', async () => {
		const r = await execPy(h, 'with open("workspace/outputs/table.csv", "w") as f:\n    f.write("a,b\\n1,2\\n")');
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const abs = path.join(root, 'workspace/outputs/table.csv');
		assert.deepEqual(r.sc.artifacts, [{ path: 'workspace/outputs/table.csv', bytes: 8, mime: 'text/csv', change: 'created' }]);
		assert.equal(r.links.length, 1, show(r.blocks));
		assert.equal(r.links[0].uri, fileUri(abs), show(r.links[0]));
		assert.equal(typeof r.links[0].name, 'string');
		assert.equal(r.images.length, 0);
		assert.ok(r.sections.artifacts?.includes('workspace/outputs/table.csv'), r.text);
		assert.ok(r.sections.artifacts?.includes('created'), r.text);

		const same = await execPy(h, 'x = 1');
		assert.deepEqual(same.sc.artifacts, [], 'an untouched file is not listed again');
		assert.equal(same.links.length, 0);

		const m = await execPy(h, 'with open("workspace/outputs/table.csv", "w") as f:\n    f.write("a,b\\n1,2\\n3,4\\n")');
		assert.deepEqual(m.sc.artifacts, [{ path: 'workspace/outputs/table.csv', bytes: 12, mime: 'text/csv', change: 'modified' }]);
		assert.ok(m.sections.artifacts?.includes('modified'), m.text);
		assert.equal(m.links.length, 1);
	});

	// A file name is the sandbox's text too: it never fakes a line, moves
	// a cursor or reorders what the model reads, and each name is shown in
	// a form a later call opens (the body of a Python string literal, bytes
	// that are not UTF-8 as surrogateescape does); URIs are RFC 3986.
	test('file names with controls, bidi characters, emoji and bytes that are not UTF-8', { timeout: 60000 }, async () => {
		const code = [
			'import os',
			'd = "workspace/names/"',
			'os.makedirs(d, exist_ok=True)',
			'for n in ["a\\nb.csv", "\\x1b]0;pwn\\x07.txt", "x\\x9bx.txt", "gnp.\\u202eexe.txt", "r\\u00e9sum\\u00e9 \\U0001F4CA.csv", "back\\\\slash.txt"]:',
			'    open(d + n, "w").write(n)',
			'fd = os.open(b"workspace/names/raw\\xff.txt", os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b"raw"); os.close(fd)',
		].join('\n');
		const r = await execPy(h, code);
		assert.equal(r.sc.status, 'ok', show(r.sc));
		const want = ['workspace/names/\\x1b]0;pwn\\x07.txt', 'workspace/names/a\\x0ab.csv', 'workspace/names/back\\\\slash.txt',
			'workspace/names/gnp.\\u202eexe.txt', 'workspace/names/raw\\udcff.txt', 'workspace/names/résumé 📊.csv', 'workspace/names/x\\x9bx.txt'];
		assert.deepEqual(r.sc.artifacts.map((a) => a.path).sort(), [...want].sort(), show(r.sc.artifacts));
		const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffd]/;
		assert.doesNotMatch(r.text.replace(/\n/g, ''), RAW, JSON.stringify(r.text));
		const lines = r.sections.artifacts.split('\n').filter((l) => l.startsWith('- '));
		assert.equal(lines.length, 7, r.sections.artifacts);
		assert.match(r.sections.artifacts, /Python string literal/);
		// resource links: percent-encoded URIs of the real bytes, shown names
		for (const l of r.links) {
			assert.match(l.uri, /^file:\/\/[A-Za-z0-9\-._~/%]+$/, l.uri);
			assert.doesNotMatch(l.name, RAW, l.name);
		}
		const rawLink = r.links.find((l) => l.uri.endsWith('/raw%FF.txt'));
		assert.ok(rawLink, show(r.links));
		assert.equal(rawLink.name, 'raw\\udcff.txt');
		assert.ok(r.links.some((l) => l.uri.endsWith('/r%C3%A9sum%C3%A9%20%F0%9F%93%8A.csv')), show(r.links.map((l) => l.uri)));
		// each shown path opens in a later call, as written
		const reopen = await execPy(h, `[open(p).read() for p in [${want.map((p) => `"${p}"`).join(', ')}]]`);
		assert.equal(reopen.sc.status, 'ok', show(reopen.sc));
		assert.match(reopen.sc.result, /'raw'/);
		// list_artifacts and verify_outputs: the same names, taken back as shown
		const la = jsonResult(await callTool(h, 'list_artifacts', { path: 'workspace/names' })).sc;
		assert.deepEqual(la.artifacts.map((a) => a.path).sort(), [...want].sort());
		const v = jsonResult(await callTool(h, 'verify_outputs', { files: ['workspace/names/raw\\udcff.txt', 'workspace/names/a\\x0ab.csv'], write_summary: false })).sc;
		assert.deepEqual(v.checks.map((c) => [c.path, c.ok]), [['workspace/names/raw\\udcff.txt', true], ['workspace/names/a\\x0ab.csv', true]], show(v));
		// resources: the same names, readable by their URIs
		const res = (await h.client.listResources()).resources.filter((x) => x.uri.includes('/names/'));
		assert.deepEqual(res.map((x) => x.name).sort(), [...want].sort());
		const { contents } = await h.client.readResource({ uri: rawLink.uri });
		assert.equal(contents[0].text, 'raw');
		await execPy(h, 'import shutil\nshutil.rmtree("workspace/names")');
	});

	test('files anywhere in the workspace are listed; the server\'s own .logs are not', async () => {
		const r = await execPy(h, 'import os, json\nos.makedirs("workspace/sub/deeper", exist_ok=True)\nopen("workspace/sub/deeper/n.json", "w").write(json.dumps({"k": 1}))\nprint("x" * 20000)');
		assert.equal(r.sc.output_truncated, true);
		assert.deepEqual(r.sc.artifacts.map((a) => [a.path, a.mime, a.change]), [['workspace/sub/deeper/n.json', 'application/json', 'created']]);
		assert.ok(!r.blocks.some((b) => b.type === 'resource_link' && b.uri.includes('/.logs/')), show(r.blocks));
	});

	test('a failed execution still lists what it wrote before failing', async () => {
		const r = await execPy(h, 'open("workspace/outputs/partial.txt", "w").write("half")\nraise RuntimeError("after write")');
		assert.equal(r.sc.status, 'error');
		assert.deepEqual(r.sc.artifacts.map((a) => a.path), ['workspace/outputs/partial.txt']);
	});
});

describe('list_artifacts', () => {
	let h, root;
	const files = {
		'workspace/outputs/b.csv': 'x,y\n1,2\n',
		'workspace/outputs/a.json': '{"a": 1}',
		'workspace/data/z.txt': 'zzz\n',
		'workspace/data/img.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]),
		'workspace/.hidden.txt': 'hidden',
		'workspace/.cache/inner.txt': 'in hidden dir',
		'outside.txt': 'not in the workspace',
	};
	before(async () => {
		root = newProject('list');
		for (const [rel, data] of Object.entries(files)) writeFile(root, rel, data);
		fs.symlinkSync('/etc/passwd', path.join(root, 'workspace/data/link_out'));
		h = await startClient(root, { structured: false });
	});
	after(async () => { await h?.close(); });

	function expected(rel) {
		const data = Buffer.from(files[rel]);
		return { path: rel, bytes: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex') };
	}

	test('default: every visible file of the workspace, sorted by path, with the contract\'s fields', async () => {
		const res = await callTool(h, 'list_artifacts', {});
		assert.equal(res.isError ?? false, false, show(res));
		const { sc, fromText } = jsonResult(res);
		assert.ok(sc, `structuredContent is always returned by list_artifacts: ${show(res)}`);
		assert.deepEqual(fromText, sc, 'the text block carries the same JSON');
		const regular = sc.artifacts.filter((a) => !a.path.endsWith('link_out'));
		assert.deepEqual(regular.map((a) => a.path), ['workspace/data/img.png', 'workspace/data/z.txt', 'workspace/outputs/a.json', 'workspace/outputs/b.csv']);
		const paths = sc.artifacts.map((a) => a.path);
		assert.deepEqual(paths, [...paths].sort(), 'sorted by path');
		for (const a of regular) {
			const e = expected(a.path);
			assert.equal(a.bytes, e.bytes, a.path);
			assert.equal(a.sha256, e.sha256, a.path);
			assert.match(a.modified, RFC3339_UTC, a.path);
			const mtime = fs.statSync(path.join(root, a.path)).mtimeMs;
			assert.ok(Math.abs(Date.parse(a.modified) - mtime) < 2000, `${a.path}: modified ${a.modified} vs ${new Date(mtime).toISOString()}`);
		}
		assert.equal(sc.artifacts.find((a) => a.path === 'workspace/outputs/b.csv').mime, 'text/csv');
		assert.equal(sc.artifacts.find((a) => a.path === 'workspace/outputs/a.json').mime, 'application/json');
		assert.equal(sc.artifacts.find((a) => a.path === 'workspace/data/img.png').mime, 'image/png');
		assert.equal(sc.artifacts.find((a) => a.path === 'workspace/data/z.txt').mime, 'text/plain');
		assert.equal(sc.count, sc.artifacts.length);
		assert.equal(sc.total_bytes, sc.artifacts.reduce((n, a) => n + a.bytes, 0));
		assert.equal(sc.truncated, false);
	});

	test('a symlink pointing out of the workspace is listed but never followed', async () => {
		const { sc } = jsonResult(await callTool(h, 'list_artifacts', {}));
		const passwd = fs.readFileSync('/etc/passwd');
		const passwdSha = crypto.createHash('sha256').update(passwd).digest('hex');
		for (const a of sc.artifacts) {
			assert.notEqual(a.sha256, passwdSha, `${a.path}: the symlink was followed`);
		}
		const link = sc.artifacts.find((a) => a.path === 'workspace/data/link_out');
		assert.ok(link, `the symlink is listed: ${show(sc.artifacts)}`);
		assert.notEqual(link.bytes, passwd.length, 'the target\'s size is not reported');
	});

	test('pattern is a glob on the file name', async () => {
		const { sc } = jsonResult(await callTool(h, 'list_artifacts', { pattern: '*.csv' }));
		assert.deepEqual(sc.artifacts.map((a) => a.path), ['workspace/outputs/b.csv']);
		assert.equal(sc.count, 1);
		const { sc: sc2 } = jsonResult(await callTool(h, 'list_artifacts', { pattern: '[ab].*' }));
		assert.deepEqual(sc2.artifacts.map((a) => a.path), ['workspace/outputs/a.json', 'workspace/outputs/b.csv']);
		const { sc: none } = jsonResult(await callTool(h, 'list_artifacts', { pattern: '*.nothing' }));
		assert.deepEqual(none, { artifacts: [], count: 0, total_bytes: 0, truncated: false });
	});

	test('path limits the listing to a directory of the workspace', async () => {
		const { sc } = jsonResult(await callTool(h, 'list_artifacts', { path: 'workspace/outputs' }));
		assert.deepEqual(sc.artifacts.map((a) => a.path), ['workspace/outputs/a.json', 'workspace/outputs/b.csv']);
		const { sc: abs } = jsonResult(await callTool(h, 'list_artifacts', { path: path.join(root, 'workspace/outputs') }));
		assert.deepEqual(abs.artifacts.map((a) => a.path), ['workspace/outputs/a.json', 'workspace/outputs/b.csv'], 'an absolute path inside the workspace works too');
	});

	test('include_hidden lists dot-files and dot-directories', async () => {
		const { sc } = jsonResult(await callTool(h, 'list_artifacts', { include_hidden: true }));
		const paths = sc.artifacts.map((a) => a.path);
		assert.ok(paths.includes('workspace/.hidden.txt'), show(paths));
		assert.ok(paths.includes('workspace/.cache/inner.txt'), show(paths));
		assert.deepEqual(paths, [...paths].sort());
	});

	test('a path outside the workspace is an input error with a message', async () => {
		for (const p of ['..', '../outside.txt', '/etc', 'workspace/../..', root, '/']) {
			const res = await callTool(h, 'list_artifacts', { path: p });
			assert.equal(res.isError, true, `${p}: ${show(res)}`);
			const text = res.content.find((b) => b.type === 'text')?.text || '';
			assert.match(text, /workspace/i, `${p}: the message must say where paths must lie: ${text}`);
			assert.ok(!text.includes('root:x:0:0'), 'no content leaked');
		}
	});

	test('arguments of the wrong type are input errors', async () => {
		for (const args of [{ path: 5 }, { pattern: ['*'] }, { include_hidden: 'yes' }]) {
			const res = await callTool(h, 'list_artifacts', args);
			assert.equal(res.isError, true, `${show(args)}: ${show(res)}`);
		}
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});

// The snapshot before a call is the walk after the last one while inotify
// reports no change in between (files/wsnote.h): a file changed from
// outside between two calls is then never taken for the call's.  Its own
// server, to read the debug lines that say when the walk was saved.
describe('the snapshot before a call, when nothing changed since the last one', () => {
	let h, root;
	const ws = (rel) => path.join(root, 'workspace', rel);
	const saved = () => h.stderr().split('\n').filter((l) => /workspace: the snapshot before a call of session \S+ is the walk after the last call/.test(l)).length;
	const paths = (r) => (r.sc.artifacts || []).map((a) => `${a.change} ${a.path}`);
	before(async () => { root = newProject('wsnote'); h = await startClient(root, { structured: true, args: ['--log-level', 'debug'] }); });
	after(async () => { await h?.close(); });

	test('is not walked again while nothing changes, and a change made outside between two calls is never the next call\'s', { timeout: 120000 }, async () => {
		for (let i = 0; i < 3; i++) assert.equal((await execPy(h, '1+1')).sc.status, 'ok');
		const quiet = saved();
		assert.ok(quiet >= 2, `the walk after a call stood for the next snapshot: ${quiet}\n${h.stderr().slice(-2000)}`);

		// A file created outside, between two calls.
		writeFile(root, 'workspace/outside.txt', 'a');
		let r = await execPy(h, '1+1');
		assert.deepEqual(paths(r), [], 'a file created outside is not the call\'s');
		assert.equal(saved(), quiet, 'a change since the last walk: walked again');

		// Rewritten in place (same size) and its times set back.
		const st = fs.statSync(ws('outside.txt'));
		await execPy(h, '1+1');
		fs.writeFileSync(ws('outside.txt'), 'b');
		fs.utimesSync(ws('outside.txt'), st.atime, st.mtime);
		r = await execPy(h, '1+1');
		assert.deepEqual(paths(r), [], 'an in-place write outside is not the call\'s');

		// Times alone.
		await execPy(h, '1+1');
		fs.utimesSync(ws('outside.txt'), new Date(2001, 1, 1), new Date(2001, 1, 1));
		r = await execPy(h, '1+1');
		assert.deepEqual(paths(r), [], 'times set outside are not the call\'s');

		// A directory the call made (watched only from the walk after
		// it), changed from outside before the next call.
		r = await execPy(h, 'import os\nos.makedirs("workspace/deep/a/b", exist_ok=True)\nopen("workspace/deep/a/b/f.txt", "w").write("x")');
		assert.deepEqual(paths(r), ['created workspace/deep/a/b/f.txt']);
		await execPy(h, '1+1');
		fs.appendFileSync(ws('deep/a/b/f.txt'), 'y');
		r = await execPy(h, '1+1');
		assert.deepEqual(paths(r), [], 'a write outside in a directory the call made is not the call\'s');
		await execPy(h, '1+1');
		fs.rmSync(ws('deep'), { recursive: true });
		fs.mkdirSync(ws('deep/a/b'), { recursive: true });
		fs.writeFileSync(ws('deep/a/b/g.txt'), 'z');
		r = await execPy(h, '1+1');
		assert.deepEqual(paths(r), [], 'a tree replaced outside is not the call\'s');

		// The call's own writes are still its own, after a saved walk.
		await execPy(h, '1+1');
		const before = saved();
		r = await execPy(h, 'open("workspace/outside.txt", "a").write("c")\nopen("workspace/deep/a/b/g.txt", "w").write("zz")');
		assert.ok(saved() > before, 'this call started from the saved walk');
		assert.deepEqual(paths(r).sort(), ['modified workspace/deep/a/b/g.txt', 'modified workspace/outside.txt']);
	});
});
