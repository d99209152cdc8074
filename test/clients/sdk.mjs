// The two official TypeScript SDK clients, each in its era, through the same
// assertions: @modelcontextprotocol/client (v2) with versionNegotiation
// "auto" must settle on 2026-07-28 (server/discover, _meta on every request,
// resultType on every result); @modelcontextprotocol/sdk (v1) must settle on
// 2025-11-25 (initialize). For both: the tools and their annotations, a
// stateful call, an error, a chart, progress, cancellation, and on the wire
// no progress notification after its request was answered or cancelled.
import fs from "node:fs";
import path from "node:path";
import { tmpdir, cleanEnv, isPng, TOOLS } from "./lib.mjs";

const CLIENTS = [
  {
    who: "sdk v2 (@modelcontextprotocol/client, auto)", era: "modern", version: "2026-07-28",
    async open(bin, root, env) {
      const { Client } = await import("@modelcontextprotocol/client");
      const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
      const transport = new StdioClientTransport({ command: bin, args: ["--root", root], env, stderr: "pipe" });
      const client = new Client({ name: "psm-sdk-v2", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
      return { client, transport, call: (params, opts) => client.callTool(params, opts) };
    },
    negotiated: (c) => ({ era: c.getProtocolEra(), version: c.getNegotiatedProtocolVersion() }),
  },
  {
    who: "sdk v1 (@modelcontextprotocol/sdk)", era: "legacy", version: "2025-11-25",
    async open(bin, root, env) {
      const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
      const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
      const transport = new StdioClientTransport({ command: bin, args: ["--root", root], env, stderr: "pipe" });
      const client = new Client({ name: "psm-sdk-v1", version: "1.0.0" });
      return { client, transport, call: (params, opts) => client.callTool(params, undefined, opts) };
    },
    // v1 does not say what it settled on: the initialize result does.
    negotiated: (c, wire) => ({ era: "legacy", version: wire.find((m) => m.dir === "in" && m.msg.result?.protocolVersion)?.msg.result.protocolVersion }),
  },
];

// Every message on the session's stdio, both ways, in order.
function tap(transport) {
  const wire = [];
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => { wire.push({ dir: "out", msg }); return send(msg, opts); };
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler && ((msg, extra) => { wire.push({ dir: "in", msg }); return handler(msg, extra); }),
    set: (f) => { handler = f; },
  });
  return wire;
}

const textOf = (r) => (r?.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function oneClient(h, bin, spec) {
  const who = spec.who;
  const base = tmpdir("sdk");
  const root = path.join(base, "project");
  const home = path.join(base, "home");
  fs.mkdirSync(root);
  fs.mkdirSync(home);
  const { client, transport, call } = await spec.open(bin, root, cleanEnv({ HOME: home }));
  const stderr = [];
  transport.stderr?.on("data", (c) => stderr.push(c));
  const wire = tap(transport);
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  const seen = {};
  try {
    await client.connect(transport);
    const n = spec.negotiated(client, wire);
    h.check(`${who}: settles on ${spec.version} (${spec.era} era)`, n.era === spec.era && n.version === spec.version, JSON.stringify(n));
    seen.negotiated = `${n.era} ${n.version}`;

    // Tools and what clients act on in them.
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    h.check(`${who}: the three tools are listed`, JSON.stringify(tools.map((t) => t.name).sort()) === JSON.stringify([...TOOLS].sort()),
      JSON.stringify(tools.map((t) => t.name)));
    h.check(`${who}: list_artifacts is read-only, execute_python and verify_outputs are not`,
      byName.list_artifacts?.annotations?.readOnlyHint === true &&
      byName.execute_python?.annotations?.readOnlyHint === false && byName.verify_outputs?.annotations?.readOnlyHint === false,
      JSON.stringify(tools.map((t) => [t.name, t.annotations])));

    // A stateful call: the second sees what the first defined.
    const a = await call({ name: "execute_python", arguments: { code: "x = 20" } });
    const b = await call({ name: "execute_python", arguments: { code: "x * 2 + 2" } });
    h.check(`${who}: state persists between calls of a session`, a.isError === false && /\nresult:\n42\n/.test(textOf(b)) &&
      /· cell 2\b/.test(textOf(b)), textOf(b).slice(0, 300));

    // An error is a result with isError and the traceback.
    const e = await call({ name: "execute_python", arguments: { code: "1/0" } });
    h.check(`${who}: an exception is an error result with its traceback`, e.isError === true && /^error · exit 1 · /.test(textOf(e)) &&
      /ZeroDivisionError: division by zero/.test(textOf(e)), textOf(e).slice(0, 300));

    // A chart comes back as a PNG image, named in the text.
    const c = await call({ name: "execute_python", arguments: { code: "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9]); plt.show()" } });
    const img = (c.content ?? []).find((x) => x.type === "image");
    h.check(`${who}: a chart is returned as a PNG image`, img?.mimeType === "image/png" && isPng(Buffer.from(img.data ?? "", "base64")) &&
      /\nartifacts:\n- workspace\/outputs\/figure-/.test(textOf(c)), JSON.stringify(c.content?.map((x) => x.type)));

    // Progress during a long cell, each notification before the result.
    const progress = [];
    const p = await call({ name: "execute_python", arguments: { code: "import time\nfor i in range(5):\n    print('step', i, flush=True)\n    time.sleep(1)" } },
      { timeout: 60000, onprogress: (x) => progress.push(x) });
    h.check(`${who}: a 5 s call sends progress with its latest output line`, p.isError === false && progress.length >= 1 &&
      progress.every((x) => /^running for \d+ s/.test(x.message ?? "")) && progress.some((x) => /step \d/.test(x.message ?? "")),
      JSON.stringify(progress));

    // Cancellation: no reply, the session rolls back, nothing after.
    const ac = new AbortController();
    const pending = call({ name: "execute_python", arguments: { code: "x = 99\nimport time\ntime.sleep(60)" } },
      { timeout: 90000, signal: ac.signal, onprogress: () => {} }).then(() => "answered", (err) => `rejected: ${err?.message ?? err}`);
    await sleep(1500);
    const cancelAt = wire.length;
    ac.abort("the test cancels it");
    const outcome = await pending;
    const after = await call({ name: "execute_python", arguments: { code: "x" } });
    h.check(`${who}: a cancelled call is not answered and its session rolls back`, outcome.startsWith("rejected") &&
      /\nresult:\n20\n/.test(textOf(after)), `${outcome}\n${textOf(after).slice(0, 300)}`);
    const cancelled = wire.slice(cancelAt).find((m) => m.dir === "out" && m.msg.method === "notifications/cancelled");
    h.check(`${who}: the client sent notifications/cancelled`, cancelled, JSON.stringify(wire.slice(cancelAt).map((m) => m.msg.method ?? m.msg.id)));
    await sleep(500);

    // The wire: no progress notification after its request's response or
    // cancellation (Claude Code drops the connection on one); in the
    // modern era every request carries _meta and every result resultType.
    const tokenOf = new Map(); // request id -> progress token
    const closed = new Map();  // progress token -> index where its request ended
    wire.forEach((m, i) => {
      if (m.dir === "out" && m.msg.id !== undefined && m.msg.params?._meta?.progressToken !== undefined) tokenOf.set(m.msg.id, m.msg.params._meta.progressToken);
      if (m.dir === "in" && m.msg.id !== undefined && tokenOf.has(m.msg.id)) closed.set(tokenOf.get(m.msg.id), i);
      if (m.dir === "out" && m.msg.method === "notifications/cancelled" && tokenOf.has(m.msg.params?.requestId)) closed.set(tokenOf.get(m.msg.params.requestId), i);
    });
    const late = wire.filter((m, i) => m.dir === "in" && m.msg.method === "notifications/progress" &&
      closed.has(m.msg.params?.progressToken) && i > closed.get(m.msg.params.progressToken));
    h.check(`${who}: no progress notification follows its request's end`, late.length === 0 && progress.length > 0, JSON.stringify(late));
    const cancelledId = cancelled?.msg.params?.requestId;
    h.check(`${who}: the cancelled request got no response`, cancelledId !== undefined &&
      !wire.some((m) => m.dir === "in" && m.msg.id === cancelledId), String(cancelledId));
    const requests = wire.filter((m) => m.dir === "out" && m.msg.id !== undefined && m.msg.method);
    const results = wire.filter((m) => m.dir === "in" && m.msg.result);
    if (spec.era === "modern") {
      h.check(`${who}: every request carries _meta with the protocol version and capabilities`, requests.length > 0 && requests.every((m) =>
        m.msg.params?._meta?.["io.modelcontextprotocol/protocolVersion"] === spec.version &&
        typeof m.msg.params._meta["io.modelcontextprotocol/clientCapabilities"] === "object"), JSON.stringify(requests.map((m) => m.msg.method)));
      h.check(`${who}: no initialize was sent`, !requests.some((m) => m.msg.method === "initialize"), "");
      h.check(`${who}: every result says resultType "complete"`, results.length > 0 && results.every((m) => m.msg.result.resultType === "complete"),
        JSON.stringify(results.filter((m) => m.msg.result.resultType !== "complete").map((m) => m.msg.id)));
      const list = results.find((m) => m.msg.result.tools);
      h.check(`${who}: tools/list carries ttlMs and cacheScope`, Number.isInteger(list?.msg.result.ttlMs) && list.msg.result.cacheScope === "private",
        JSON.stringify({ ttlMs: list?.msg.result.ttlMs, cacheScope: list?.msg.result.cacheScope }));
      const info = client.getServerVersion();
      h.check(`${who}: the server names itself in the results' _meta`, info?.name === "python-sandbox-mcp", JSON.stringify(info));
      h.check(`${who}: the server's instructions reached the client`, /workspace\/outputs\//.test(client.getInstructions() ?? ""), client.getInstructions());
    } else {
      h.check(`${who}: initialize was the first request`, requests[0]?.msg.method === "initialize", requests[0]?.msg.method);
      h.check(`${who}: no result carries the 2026-07-28 fields`, results.every((m) => m.msg.result.resultType === undefined && m.msg.result.ttlMs === undefined), "");
    }
    h.check(`${who}: no SDK error was reported`, errors.length === 0, errors.join("\n"));
    seen.progress = `${progress.length} notification(s), the last "${progress.at(-1)?.message}"`;
  } finally {
    await client.close().catch(() => {});
  }
  return seen;
}

export async function runSdk(h, { bin }) {
  const out = {};
  for (const spec of CLIENTS) out[spec.who] = await oneClient(h, bin, spec);
  h.report.sdk = out;
}
