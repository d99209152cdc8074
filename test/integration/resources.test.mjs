// Resources and logging/setLevel, through the SDK client.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startClient, newProject, writeFile, fileUri, makePng, show } from './lib.mjs';

describe('resources', () => {
	let h, root;
	const png = makePng(3, 2);
	before(async () => {
		root = newProject('res');
		writeFile(root, 'workspace/outputs/report.md', '# Report\n\ncafé ☃\n');
		writeFile(root, 'workspace/outputs/chart.png', png);
		writeFile(root, 'workspace/data/values.csv', 'a,b\n1,2\n');
		writeFile(root, 'workspace/bin.dat', Buffer.from([0, 1, 2, 254, 255]));
		writeFile(root, 'secret.txt', 'outside the workspace');
		// What the server keeps there for itself (a saved session, a full
		// output log, a cache) and a hidden file of the user's own.
		writeFile(root, 'workspace/.sessions/default/state.snap', 'snapshot');
		writeFile(root, 'workspace/.logs/default-1.stdout.log', 'log');
		writeFile(root, 'workspace/.cache/matplotlib/fontlist.json', '{}');
		writeFile(root, 'workspace/.notes.txt', 'mine');
		fs.symlinkSync('/etc/passwd', path.join(root, 'workspace/outputs/passwd_link'));
		h = await startClient(root);
	});
	after(async () => { await h?.close(); });

	test('resources/list has the workspace files as file:// URIs', async () => {
		const { resources } = await h.client.listResources();
		const uris = resources.map((r) => r.uri);
		for (const rel of ['workspace/outputs/report.md', 'workspace/outputs/chart.png', 'workspace/data/values.csv', 'workspace/bin.dat']) {
			assert.ok(uris.includes(fileUri(path.join(root, rel))), `${rel} missing from ${show(uris)}`);
		}
		for (const r of resources) {
			assert.match(r.uri, /^file:\/\//);
			assert.equal(typeof r.name, 'string');
			assert.ok(decodeURIComponent(r.uri.slice(7)).startsWith(path.join(root, 'workspace') + '/'), `${r.uri} is not under the workspace`);
		}
		assert.ok(!uris.some((u) => u.includes('secret.txt')), 'files outside the workspace are not resources');
		for (const dir of ['.sessions', '.logs', '.cache'])
			assert.ok(!uris.some((u) => u.includes(`/workspace/${dir}/`)), `the server's own ${dir} is no resource: ${show(uris)}`);
		assert.ok(uris.includes(fileUri(path.join(root, 'workspace/.notes.txt'))), 'a hidden file of the user is');
		const png_ = resources.find((r) => r.uri.endsWith('chart.png'));
		if (png_.mimeType) assert.equal(png_.mimeType, 'image/png');
	});

	test('resources/read returns text for a text file', async () => {
		const uri = fileUri(path.join(root, 'workspace/outputs/report.md'));
		const { contents } = await h.client.readResource({ uri });
		assert.equal(contents.length, 1);
		assert.equal(contents[0].uri, uri);
		assert.equal(contents[0].text, '# Report\n\ncafé ☃\n', show(contents));
	});

	test('resources/read returns a base64 blob for a binary file', async () => {
		for (const [rel, data] of [['workspace/outputs/chart.png', png], ['workspace/bin.dat', Buffer.from([0, 1, 2, 254, 255])]]) {
			const uri = fileUri(path.join(root, rel));
			const { contents } = await h.client.readResource({ uri });
			assert.equal(typeof contents[0].blob, 'string', `${rel}: ${show(contents)}`);
			assert.ok(Buffer.from(contents[0].blob, 'base64').equals(data), rel);
		}
		const { contents } = await h.client.readResource({ uri: fileUri(path.join(root, 'workspace/outputs/chart.png')) });
		assert.equal(contents[0].mimeType, 'image/png');
	});

	test('a file created after start is readable', async () => {
		writeFile(root, 'workspace/outputs/later.json', '{"later": true}');
		const uri = fileUri(path.join(root, 'workspace/outputs/later.json'));
		const { resources } = await h.client.listResources();
		assert.ok(resources.some((r) => r.uri === uri));
		const { contents } = await h.client.readResource({ uri });
		assert.equal(contents[0].text, '{"later": true}');
	});

	test('a URI outside the workspace is refused with -32002', async () => {
		const bad = [
			'file:///etc/passwd',
			fileUri(path.join(root, 'secret.txt')),
			'file://' + path.join(root, 'workspace') + '/../secret.txt',
			'file://' + path.join(root, 'workspace') + '/%2e%2e/secret.txt',
			fileUri(path.join(root, 'workspace/outputs/passwd_link')),
			fileUri(path.join(root, 'workspace/outputs/does_not_exist.txt')),
			fileUri(path.join(root, 'workspace/outputs')),
		];
		for (const uri of bad) {
			await assert.rejects(h.client.readResource({ uri }), (e) => {
				assert.equal(e.code, -32002, `${uri}: ${e.code} ${e.message}`);
				assert.ok(!String(e.message).includes('root:x:0:0'), 'no content leaked');
				return true;
			}, uri);
		}
	});

	test('a URI that is not file:// is an error', async () => {
		for (const uri of ['http://example.invalid/x', 'workspace/outputs/report.md']) {
			await assert.rejects(h.client.readResource({ uri }), (e) => [-32002, -32602].includes(e.code), uri);
		}
	});

	test('logging/setLevel is accepted', async () => {
		for (const level of ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']) {
			assert.deepEqual(await h.client.setLoggingLevel(level), {}, level);
		}
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});
