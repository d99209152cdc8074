// Helpers of the end-to-end tests of python-sandbox-mcp.
//
// Two ways to drive the server binary (PSM_BIN, set by run.sh):
//  - startClient(): the official MCP TypeScript SDK (Client + StdioClientTransport),
//    as Claude Code, Cursor and the others do.
//  - RawServer: JSON-RPC lines written to the binary's stdin by hand, every
//    stdout line read back and checked (valid UTF-8, one JSON object with
//    jsonrpc "2.0"), for what an SDK cannot send (malformed lines, batches,
//    over-long lines, invalid bytes) and for the shutdown tests.
//
// Each test file makes its own project directories (newProject) and servers.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const BIN = path.resolve(REPO, process.env.PSM_BIN || 'build/python-sandbox-mcp');
/* A sanitizer build (make test-san: build/san/): the sessions run under
 * AddressSanitizer too, whose shadow memory and quarantine of freed blocks
 * are memory of the session's as the kernel counts it. */
export const SANITIZED = /\/san\//.test(BIN);
/** The server under valgrind (make valgrind): 20 to 50 times slower, so a
 *  limit is still enforced, but later than a bound on time can say. */
export const VALGRIND = /\/valgrind\//.test(BIN);

export const PROTOCOL_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const LATEST_VERSION = '2025-11-25';
export const MAX_LINE = 8 * 1024 * 1024;
export const MAX_CODE = 2 * 1024 * 1024;
export const SESSION_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
export const TOOL_NAMES = ['execute_python', 'list_artifacts', 'verify_outputs'];

// ---------------------------------------------------------------- projects

const madeDirs = [];
process.on('exit', () => {
	if (process.env.PSM_KEEP) return;
	for (const d of madeDirs) {
		try { fs.rmSync(d, { recursive: true, force: true }); } catch { /* ignore */ }
	}
});

/** A fresh, empty project directory (canonical path); removed when the test process exits
 *  unless PSM_KEEP is set. */
export function newProject(tag = 'it', { privateDir = false } = {}) {
	const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `psm-${tag}-`)));
	madeDirs.push(d);
	// mkdtemp makes the directory 0700; a project directory is usually 0755.
	// (A private 0700 project has its own test in lifecycle.test.mjs.)
	if (!privateDir) fs.chmodSync(d, 0o755);
	return d;
}

/** Writes a file under the project root (creating parents); returns its absolute path. */
export function writeFile(root, rel, data) {
	const p = path.join(root, rel);
	fs.mkdirSync(path.dirname(p), { recursive: true });
	fs.writeFileSync(p, data);
	return p;
}

export const SKILL = fs.readFileSync(new URL('../../SKILL.md', import.meta.url), 'utf8');

/** A project whose SKILL.md has some text replaced (each `from` must be
 * there); returns [root, skillPath]. */
export function projectWith(tag, replacements) {
	const root = newProject(tag);
	let text = SKILL;
	for (const [from, to] of replacements) {
		if (!text.includes(from)) throw new Error(`SKILL.md has no ${from}`);
		text = text.replace(from, to);
	}
	return [root, writeFile(root, 'policy/SKILL.md', text)];
}

export function fileUri(absPath) {
	return 'file://' + absPath.split('/').map(encodeURIComponent).join('/');
}

// ---------------------------------------------------------------- SDK client

/**
 * Starts the server through the SDK.  Returns { client, transport, pid, root, errors, stderr(), close() }.
 * listTools (default true) is called once so that the SDK caches the tools'
 * outputSchemas and validates every structuredContent against them.
 */
export async function startClient(root, { structured = false, args = [], env = {}, listTools = true, command = BIN, commandArgs = [], protocolVersion, capabilities = {}, onRequest } = {}) {
	// command/commandArgs: a wrapper that ends by exec'ing the server (same pid).
	const argv = [...commandArgs, '--root', root, ...(structured ? ['--structured-content'] : []), ...args];
	const transport = new StdioClientTransport({ command, args: argv, stderr: 'pipe', env: { ...minimalEnv(), ...env } });
	const stderrChunks = [];
	transport.stderr?.on('data', (c) => { stderrChunks.push(c); if (process.env.PSM_STDERR) process.stderr.write(c); });
	if (protocolVersion) {
		// The SDK always asks for its latest version; a client of an older
		// one (Cline asks for 2024-11-05) is this same client asking for less.
		const send = transport.send.bind(transport);
		transport.send = (msg, opts) => send(msg.method === 'initialize' ? { ...msg, params: { ...msg.params, protocolVersion } } : msg, opts);
	}
	const client = new Client({ name: 'psm-integration-tests', version: '1.0.0' }, { capabilities });
	if (onRequest) onRequest(client);
	const errors = [];
	client.onerror = (e) => errors.push(e);
	await client.connect(transport);
	const handle = {
		client, transport, root, errors,
		pid: transport.pid,
		stderr: () => Buffer.concat(stderrChunks).toString('utf8'),
		tools: null,
		async close() { await client.close(); },
	};
	if (listTools) handle.tools = (await client.listTools()).tools;
	return handle;
}

function minimalEnv() {
	const env = {};
	for (const k of ['HOME', 'PATH', 'LANG', 'LC_ALL', 'TMPDIR', 'USER', 'LOGNAME', 'SHELL', 'TERM']) {
		if (process.env[k] !== undefined) env[k] = process.env[k];
	}
	return env;
}

/** tools/call through the SDK, with a generous request timeout. */
export async function callTool(h, name, args = {}, { timeout = 60000, onprogress } = {}) {
	const opts = { timeout };
	if (onprogress) opts.onprogress = onprogress;
	return h.client.callTool({ name, arguments: args }, undefined, opts);
}

/**
 * execute_python; returns the result split into its parts:
 * { res, text, head (parsed status line), sections, sc (structuredContent or undefined),
 *   images, links, blocks }.
 */
export async function execPy(h, code, extra = {}, opts = {}) {
	const res = await callTool(h, 'execute_python', { code, ...extra }, opts);
	return explain(res);
}

export function explain(res) {
	const blocks = res.content || [];
	const textBlock = blocks.find((b) => b.type === 'text');
	const text = textBlock ? textBlock.text : '';
	return {
		res,
		text,
		head: parseStatusLine(text.split('\n')[0]),
		sections: parseSections(text),
		sc: res.structuredContent,
		images: blocks.filter((b) => b.type === 'image'),
		links: blocks.filter((b) => b.type === 'resource_link'),
		blocks,
	};
}

// The contract's example line; further " · ..." fields after it are allowed.
const STATUS_RE = /^(ok|error|timeout|cancelled|crashed|memory) · exit (-?\d+) · (\d+(?:\.\d+)?) ms · session ([A-Za-z0-9_-]{1,64}) · cell (\d+)((?: · [^·]+)*)$/;

/** `ok · exit 0 · 12 ms · session default · cell 3` -> { status, exit, ms, session, cell } or null. */
export function parseStatusLine(line) {
	const m = STATUS_RE.exec(line || '');
	if (!m) return null;
	return { status: m[1], exit: Number(m[2]), ms: Number(m[3]), session: m[4], cell: Number(m[5]), rest: m[6] };
}

const SECTION_NAMES = ['stdout', 'stderr', 'result', 'error', 'artifacts'];

/** Splits the text block after its status line into { stdout, stderr, result, error, artifacts }
 *  (only the sections present).  Meant for outputs that do not themselves contain header lines. */
export function parseSections(text) {
	const out = {};
	const lines = text.split('\n').slice(1);
	let cur = null;
	for (const line of lines) {
		const m = /^(stdout|stderr|result|error|artifacts):\s*$/.exec(line);
		if (m && SECTION_NAMES.includes(m[1])) { cur = m[1]; out[cur] = []; continue; }
		if (cur) out[cur].push(line);
	}
	for (const k of Object.keys(out)) out[k] = out[k].join('\n');
	return out;
}

/** The JSON carried by a list_artifacts / verify_outputs result: structuredContent,
 *  checked against the text block (the contract says both carry the same JSON). */
export function jsonResult(res) {
	const textBlock = (res.content || []).find((b) => b.type === 'text');
	let fromText;
	try { fromText = JSON.parse(textBlock.text); } catch { fromText = undefined; }
	return { sc: res.structuredContent, fromText, text: textBlock ? textBlock.text : '' };
}

// ---------------------------------------------------------------- raw stdio driver

/**
 * The binary on raw stdio.  Every stdout line is recorded in `messages`; a line
 * that is not valid UTF-8, not JSON, not an object or lacks jsonrpc "2.0" is
 * recorded in `violations` (the tests assert it stays empty).
 */
export class RawServer {
	constructor(root, { args = [], structured = false, env = {}, command = BIN, commandArgs = [] } = {}) {
		// command/commandArgs: a wrapper that ends by exec'ing the server (same pid).
		const argv = [...commandArgs, '--root', root, ...(structured ? ['--structured-content'] : []), ...args];
		this.root = root;
		this.proc = spawn(command, argv, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...minimalEnv(), ...env } });
		this.pid = this.proc.pid;
		this.messages = [];
		this.rawLines = [];
		this.violations = [];
		this.stderrChunks = [];
		this.nextId = 1000;
		this._buf = Buffer.alloc(0);
		this._waiters = new Set();
		this.exited = new Promise((resolve) => {
			this.proc.on('exit', (code, signal) => { this.exitInfo = { code, signal }; resolve(this.exitInfo); this._wake(); });
		});
		this.proc.on('error', (e) => { this.spawnError = e; this._wake(); });
		this.proc.stdin.on('error', () => { /* EPIPE after exit: the tests look at the exit */ });
		this.proc.stdout.on('data', (c) => this._onData(c));
		this.proc.stderr.on('data', (c) => { this.stderrChunks.push(c); if (process.env.PSM_STDERR) process.stderr.write(c); });
	}

	stderr() { return Buffer.concat(this.stderrChunks).toString('utf8'); }

	_onData(chunk) {
		this._buf = Buffer.concat([this._buf, chunk]);
		let nl;
		while ((nl = this._buf.indexOf(0x0a)) >= 0) {
			const line = this._buf.subarray(0, nl);
			this._buf = this._buf.subarray(nl + 1);
			this._onLine(line);
		}
		this._wake();
	}

	_onLine(bytes) {
		let s;
		try {
			s = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
		} catch {
			this.violations.push({ why: 'stdout line is not valid UTF-8', line: bytes.toString('latin1').slice(0, 300) });
			return;
		}
		this.rawLines.push(s);
		if (s.endsWith('\r')) s = s.slice(0, -1);
		if (s.trim() === '') { this.violations.push({ why: 'empty stdout line', line: s }); return; }
		let m;
		try { m = JSON.parse(s); } catch {
			this.violations.push({ why: 'stdout line is not JSON', line: s.slice(0, 300) });
			return;
		}
		if (m === null || typeof m !== 'object' || Array.isArray(m) || m.jsonrpc !== '2.0') {
			this.violations.push({ why: 'stdout line is not a JSON-RPC 2.0 object', line: s.slice(0, 300) });
		}
		this.messages.push(m);
	}

	_wake() { for (const w of [...this._waiters]) w(); }

	/** Writes bytes exactly as given. */
	writeRaw(data) { this.proc.stdin.write(data); }
	/** Writes one line (a string, a Buffer or an object, which is JSON-encoded) and '\n'. */
	sendLine(x) {
		if (Buffer.isBuffer(x)) this.proc.stdin.write(Buffer.concat([x, Buffer.from('\n')]));
		else if (typeof x === 'string') this.proc.stdin.write(x + '\n');
		else this.proc.stdin.write(JSON.stringify(x) + '\n');
	}

	/** Waits for the first message (from index `from`) that satisfies pred. */
	waitFor(pred, { timeout = 8000, from = 0, what = 'a message' } = {}) {
		return new Promise((resolve, reject) => {
			const check = () => {
				for (let i = from; i < this.messages.length; i++) {
					if (pred(this.messages[i])) { done(); resolve(this.messages[i]); return true; }
				}
				if (this.exitInfo || this.spawnError) {
					done();
					reject(new Error(`server ended (${JSON.stringify(this.exitInfo || String(this.spawnError))}) while waiting for ${what}; stderr tail: ${this.stderr().slice(-2000)}`));
					return true;
				}
				return false;
			};
			const timer = setTimeout(() => { done(); reject(new Error(`timed out after ${timeout} ms waiting for ${what}; last messages: ${JSON.stringify(this.messages.slice(-3)).slice(0, 1500)}`)); }, timeout);
			const done = () => { clearTimeout(timer); this._waiters.delete(check); };
			if (!check()) this._waiters.add(check);
		});
	}

	/** The response (result or error) to request id. */
	response(id, opts = {}) {
		return this.waitFor((m) => m.id === id && ('result' in m || 'error' in m), { what: `the response to id ${JSON.stringify(id)}`, ...opts });
	}

	/** Sends a request; resolves with the whole response message. */
	request(method, params, { id, timeout } = {}) {
		const rid = id === undefined ? this.nextId++ : id;
		const msg = { jsonrpc: '2.0', id: rid, method };
		if (params !== undefined) msg.params = params;
		this.sendLine(msg);
		return this.response(rid, timeout ? { timeout } : {});
	}

	notify(method, params) {
		const msg = { jsonrpc: '2.0', method };
		if (params !== undefined) msg.params = params;
		this.sendLine(msg);
	}

	async initialize(protocolVersion = LATEST_VERSION) {
		const r = await this.request('initialize', {
			protocolVersion,
			capabilities: {},
			clientInfo: { name: 'psm-raw-tests', version: '1.0.0' },
		});
		this.notify('notifications/initialized');
		return r;
	}

	/** tools/call; resolves with the response message. */
	callTool(name, args, opts) { return this.request('tools/call', { name, arguments: args }, opts); }

	/** Ends the server: 'eof' closes stdin, 'SIGTERM'/'SIGINT' signal its pid.
	 *  Resolves with { code, signal } or rejects after `timeout`. */
	async stop(how = 'eof', { timeout = 15000 } = {}) {
		if (!this.exitInfo) {
			if (how === 'eof') this.proc.stdin.end();
			else this.proc.kill(how);
		}
		let timer;
		const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`server did not exit within ${timeout} ms after ${how}`)), timeout); });
		try { return await Promise.race([this.exited, t]); } finally { clearTimeout(timer); }
	}

	/** Last resort in after(): SIGKILL if still running. */
	kill() { if (!this.exitInfo) { try { this.proc.kill('SIGKILL'); } catch { /* gone */ } } }
}

// ---------------------------------------------------------------- another user

/** A directory anyone can enter (mode 755), removed at exit: for a server run
 *  by another user (nobody) when the checkout sits below a private one. */
export function openDir(tag, base = os.tmpdir()) {
	const d = fs.realpathSync(fs.mkdtempSync(path.join(base, `psm-${tag}-`)));
	fs.chmodSync(d, 0o755);
	process.on('exit', () => fs.rmSync(d, { recursive: true, force: true }));
	return d;
}

/** Copies of the server and of build/helpers/dockerrun that another user can
 *  run (in a directory under base): the checkout may sit below a mode-700
 *  directory (mktemp -d, /root), where an unprivileged user cannot reach
 *  BIN, and dockerrun, once it has dropped its capabilities, cannot exec it. */
export function stageBinaries(tag, base) {
	const d = openDir(tag, base);
	const bin = path.join(d, 'python-sandbox-mcp');
	const dockerrun = path.join(d, 'dockerrun');
	fs.copyFileSync(BIN, bin);
	fs.copyFileSync(path.join(path.dirname(BIN), 'helpers', 'dockerrun'), dockerrun);
	// make valgrind's wrapper runs the program beside it: staged with it.
	if (fs.existsSync(BIN + '.real')) {
		fs.copyFileSync(BIN + '.real', bin + '.real');
		fs.chmodSync(bin + '.real', 0o755);
	}
	fs.chmodSync(bin, 0o755);
	fs.chmodSync(dockerrun, 0o755);
	return { bin, dockerrun };
}

/** The server's command line as copies every user can reach, outside /tmp:
 *  [dockerrun, server] when pre names dockerrun (the namespace-free mode),
 *  else [server]; staged once per test process under /var/tmp (a test may
 *  mount a tmpfs of its own over /tmp before it execs the server). */
let staged = null;
export function reachableArgv(pre = []) {
	staged ??= stageBinaries('bin', '/var/tmp');
	return pre.length ? [staged.dockerrun, staged.bin] : [staged.bin];
}

// ---------------------------------------------------------------- processes

/** Reads /proc/<pid>/stat of every process: Map pid -> { pid, ppid, state, start, comm }. */
export function procTable() {
	const t = new Map();
	for (const name of fs.readdirSync('/proc')) {
		if (!/^\d+$/.test(name)) continue;
		let s;
		try { s = fs.readFileSync(`/proc/${name}/stat`, 'utf8'); } catch { continue; }
		const close = s.lastIndexOf(')');
		const comm = s.slice(s.indexOf('(') + 1, close);
		const f = s.slice(close + 2).split(' ');
		// f[0] = state (field 3), f[1] = ppid (field 4), f[19] = starttime (field 22)
		t.set(Number(name), { pid: Number(name), state: f[0], ppid: Number(f[1]), start: f[19], comm });
	}
	return t;
}

/** Every process that has `pid` as an ancestor (through the ppid chains). */
export function descendants(pid) {
	const t = procTable();
	const out = [];
	for (const p of t.values()) {
		let q = p.ppid, guard = 0;
		while (q > 1 && guard++ < 256) {
			if (q === pid) { out.push(p); break; }
			const pp = t.get(q);
			if (!pp) break;
			q = pp.ppid;
		}
	}
	return out;
}

/** A process's title ('' once it is gone or a zombie). */
export function titleOf(pid) {
	// Every process below the server wears a title of ours (the zygote
	// once it has set its own).  A process that is changing its title (a
	// session around its checkpoint's fork) shows none for that moment:
	// setproctitle clears the old one before it writes the new, and a read
	// then comes back empty or as the first command line (measured: a
	// fifth of the reads, in a loop).  Read again for up to 20 ms before
	// taking a title that is not ours.
	let t = '';
	for (let i = 0; i < 20; i++) {
		try { t = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replace(/\0/g, ' '); } catch { return ''; }
		if (t.startsWith('python-sandbox-mcp: ')) return t;
		Atomics.wait(PAUSE, 0, 0, 1);
	}
	return t;
}
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/** The processes of session `session` below the server `pid`, told apart
 * by where they sit as well as by their titles: { sessions: [pid],
 * checkpoints: [{ pid, cell }] }.  The tree is always zygote -> session ->
 * checkpoint -> saver (the zygote is every session's subreaper, so a
 * rolled-back or forked session is its child too).  Titles alone mislead
 * for a few milliseconds: a session takes its checkpoint's title before it
 * forks (so that the copy is born with it) and takes its own back after,
 * and a saver keeps its checkpoint's title until it sets its own. */
export function sessionProcs(pid, session) {
	const t = procTable();
	const title = new Map();
	const titled = (q) => { if (!title.has(q)) title.set(q, titleOf(q)); return title.get(q); };
	const ZYGOTE = 'python-sandbox-mcp: zygote';
	const copy = `python-sandbox-mcp: checkpoint ${session} cell `;
	const out = { sessions: [], checkpoints: [] };
	for (const p of descendants(pid)) {
		const tt = titled(p.pid);
		const parent = t.get(p.ppid);
		if (!parent) continue;
		if (titled(parent.pid) === ZYGOTE) {
			if (tt === `python-sandbox-mcp: session ${session}` || tt.startsWith(copy)) out.sessions.push(p.pid);
		} else if (tt.startsWith(copy) && t.has(parent.ppid) && titled(parent.ppid) === ZYGOTE) {
			out.checkpoints.push({ pid: p.pid, cell: Number(tt.slice(copy.length)) });
		}
	}
	return out;
}

/** The cells whose state the session's checkpoints hold. */
export function checkpointCells(pid, session) {
	return sessionProcs(pid, session).checkpoints.map((c) => c.cell).sort((a, b) => a - b);
}

/** Host memory (MB) that the sandbox's processes hold, checkpoints included:
 *  Pss_Anon + Pss_Shmem, so a page that several of them share (a checkpoint's
 *  or a forked child's copy-on-write pages) counts once, split between them.
 *  (A sum of RssAnon counts it in each: six idle forks of a 60 MB session
 *  "held" 360 MB more.) */
export function sandboxPssMb(serverPid, skip = new Set()) {
	let kb = 0;
	for (const p of descendants(serverPid)) {
		if (skip.has(p.pid)) continue;
		let s;
		try { s = fs.readFileSync(`/proc/${p.pid}/smaps_rollup`, 'utf8'); } catch { continue; }
		for (const k of ['Pss_Anon', 'Pss_Shmem']) {
			const m = s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm'));
			if (m) kb += Number(m[1]);
		}
	}
	return kb / 1024;
}

/** How many processes are below pid once the count is at most `limit`, or
 *  after `ms`: savers still writing and replaced checkpoints still exiting
 *  are transient (slow under AddressSanitizer), what stays longer is not. */
export async function descendantsDown(pid, limit, ms = 10000) {
	let n = descendants(pid).length;
	for (const t0 = Date.now(); n > limit && Date.now() - t0 < ms; n = descendants(pid).length)
		await sleep(100);
	return n;
}

/** Those of `procs` (from descendants()) still alive: same pid and start time, not a zombie. */
export function stillAlive(procs) {
	const alive = [];
	for (const p of procs) {
		let s;
		try { s = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8'); } catch { continue; }
		const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
		if (f[19] === p.start && f[0] !== 'Z' && f[0] !== 'X') alive.push({ ...p, state: f[0] });
	}
	return alive;
}

/** Polls until none of `procs` is alive, up to `ms`; returns those still alive. */
export async function waitGone(procs, ms = 2000) {
	const end = Date.now() + ms;
	let alive = stillAlive(procs);
	while (alive.length && Date.now() < end) {
		await sleep(50);
		alive = stillAlive(procs);
	}
	return alive;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- files

const CRC_TABLE = (() => {
	const t = new Uint32Array(256);
	for (let n = 0; n < 256; n++) {
		let c = n;
		for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
		t[n] = c >>> 0;
	}
	return t;
})();

export function crc32(buf) {
	let c = 0xffffffff;
	for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
	return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type, data) {
	const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
	const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
	const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
	return Buffer.concat([len, td, crc]);
}

/** A valid RGB PNG of w x h pixels. */
export function makePng(w = 4, h = 3) {
	const ihdr = Buffer.alloc(13);
	ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
	ihdr[8] = 8; ihdr[9] = 2; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;
	const raw = Buffer.alloc(h * (1 + 3 * w));
	for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw[y * (1 + 3 * w) + 1 + 3 * x] = (x * 60) & 0xff;
	return Buffer.concat([
		Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
		pngChunk('IHDR', ihdr),
		pngChunk('IDAT', zlib.deflateSync(raw)),
		pngChunk('IEND', Buffer.alloc(0)),
	]);
}

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** { width, height } of a PNG buffer with a well-formed IHDR and an IEND at the end, else null. */
export function pngInfo(buf) {
	if (buf.length < 33 || !buf.subarray(0, 8).equals(PNG_SIGNATURE)) return null;
	if (buf.toString('ascii', 12, 16) !== 'IHDR') return null;
	if (buf.toString('ascii', buf.length - 8, buf.length - 4) !== 'IEND') return null;
	return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

/** Lines of a text as a client counts them (a last line without its newline counts). */
export function lineCount(text) {
	return text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

/** Describes a value for an assertion message (truncated). */
/** A cell that writes `n` memfds of 50 MB each and keeps them open, never
 *  mapped: memory only /proc/PID/fd shows. */
export const memfdCell = (n = 8) => [
	'import os',
	'fds = []',
	`for i in range(${n}):`,
	'    fd = os.memfd_create("m%d" % i)',
	'    for j in range(50): os.write(fd, b"x" * (1 << 20))',
	'    fds.append(fd)',
].join('\n');

export function show(x, n = 1500) {
	let s;
	try { s = JSON.stringify(x, (k, v) => (k === 'data' && typeof v === 'string' && v.length > 80 ? v.slice(0, 40) + `...(${v.length} chars)` : v)) ?? String(x); } catch { s = String(x); }
	return s.length > n ? s.slice(0, n) + `...(${s.length} chars)` : s;
}
