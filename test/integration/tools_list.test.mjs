// tools/list through the SDK, with and without --structured-content.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startClient, newProject, execPy, TOOL_NAMES, show } from './lib.mjs';

function byName(tools) { return Object.fromEntries(tools.map((t) => [t.name, t])); }

function checkInputSchemas(t) {
	for (const name of TOOL_NAMES) {
		assert.equal(t[name].inputSchema?.type, 'object', `${name}.inputSchema.type: ${show(t[name])}`);
		assert.equal(typeof t[name].description, 'string', `${name} needs a description`);
		assert.ok(t[name].description.length > 20, `${name}: description too short`);
	}
	const ex = t.execute_python.inputSchema;
	assert.deepEqual(ex.required, ['code'], show(ex));
	assert.equal(ex.properties.code?.type, 'string', show(ex));
	assert.equal(ex.properties.session?.type, 'string', show(ex));
	if (ex.properties.session.pattern) assert.equal(ex.properties.session.pattern, '^[A-Za-z0-9_-]{1,64}$');
	assert.equal(ex.properties.timeout_s?.type, 'number', show(ex));
	assert.equal(ex.properties.reset?.type, 'boolean', show(ex));

	const la = t.list_artifacts.inputSchema;
	assert.ok(!la.required || la.required.length === 0, `list_artifacts has no required argument: ${show(la)}`);
	assert.equal(la.properties.path?.type, 'string', show(la));
	assert.equal(la.properties.pattern?.type, 'string', show(la));
	assert.equal(la.properties.include_hidden?.type, 'boolean', show(la));

	const vo = t.verify_outputs.inputSchema;
	assert.deepEqual(vo.required, ['files'], show(vo));
	assert.equal(vo.properties.files?.type, 'array', show(vo));
	assert.equal(vo.properties.session?.type, 'string', show(vo));
	assert.equal(vo.properties.require_success?.type, 'boolean', show(vo));
	assert.equal(vo.properties.write_summary?.type, 'boolean', show(vo));
}

describe('tools/list without --structured-content', () => {
	let h;
	before(async () => { h = await startClient(newProject('tools')); });
	after(async () => { await h?.close(); });

	test('the SDK client connected: serverInfo and capabilities', () => {
		assert.ok(h.client.getServerVersion()?.name?.length > 0, show(h.client.getServerVersion()));
		assert.ok(h.client.getServerCapabilities()?.tools, show(h.client.getServerCapabilities()));
		assert.ok(h.client.getServerCapabilities()?.resources, show(h.client.getServerCapabilities()));
	});

	test('exactly execute_python, list_artifacts, verify_outputs with inputSchemas', () => {
		assert.deepEqual(h.tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
		checkInputSchemas(byName(h.tools));
	});

	test('execute_python declares no outputSchema; list_artifacts and verify_outputs always do', () => {
		const t = byName(h.tools);
		assert.equal(t.execute_python.outputSchema, undefined, 'execute_python declares an outputSchema without --structured-content');
		assert.equal(t.list_artifacts.outputSchema?.type, 'object', show(t.list_artifacts));
		assert.equal(t.verify_outputs.outputSchema?.type, 'object', show(t.verify_outputs));
	});

	test('execute_python results carry no structuredContent (text, images and links only)', { timeout: 60000 }, async () => {
		const r = await execPy(h, 'print("hi")\n6 * 7');
		assert.equal(r.sc, undefined, `structuredContent without --structured-content: ${show(r.res)}`);
		assert.equal(r.head?.status, 'ok', r.text);
		assert.equal(r.sections.stdout?.trim(), 'hi', r.text);
		assert.equal(r.sections.result?.trim(), '42', r.text);
	});

	test('list_artifacts is annotated readOnlyHint; execute_python is not read-only', () => {
		const t = byName(h.tools);
		assert.equal(t.list_artifacts.annotations?.readOnlyHint, true, show(t.list_artifacts));
		assert.notEqual(t.execute_python.annotations?.readOnlyHint, true, show(t.execute_python));
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});

describe('tools/list with --structured-content', () => {
	let h;
	before(async () => { h = await startClient(newProject('tools'), { structured: true }); });
	after(async () => { await h?.close(); });

	test('the same three tools and inputSchemas', () => {
		assert.deepEqual(h.tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
		checkInputSchemas(byName(h.tools));
	});

	test('execute_python declares an outputSchema with the contract\'s fields', () => {
		const os_ = byName(h.tools).execute_python.outputSchema;
		assert.equal(os_?.type, 'object', show(os_));
		for (const f of ['status', 'exit_code', 'session', 'execution_count', 'state', 'duration_ms', 'stdout', 'stderr',
			'output_truncated', 'full_output', 'result', 'error', 'artifacts']) {
			assert.ok(os_.properties?.[f], `outputSchema lacks ${f}: ${show(os_)}`);
		}
		const st = os_.properties.status;
		if (st.enum) assert.deepEqual([...st.enum].sort(), ['cancelled', 'crashed', 'error', 'limits', 'memory', 'ok', 'timeout']);
	});

	test('list_artifacts is annotated readOnlyHint', () => {
		assert.equal(byName(h.tools).list_artifacts.annotations?.readOnlyHint, true);
	});

	test('no SDK transport or protocol error happened', () => { assert.deepEqual(h.errors.map(String), []); });
});
