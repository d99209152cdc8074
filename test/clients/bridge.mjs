// A stdio-to-Streamable-HTTP bridge for python-sandbox-mcp, built from the
// official SDK's transports, so that HTTP-only tools (the MCP conformance
// suite) can test the stdio server.
//
// Each HTTP session (opened by an initialize POST) gets its own server
// process (StdioClientTransport) and its own StreamableHTTPServerTransport;
// JSON-RPC messages are forwarded unchanged both ways, so every answer,
// error and notification is our server's own, not the SDK's. Notifications
// from the server go out on the POST stream of the request they belong to
// (progress: by progressToken; anything else: the only request in flight,
// else the standalone GET stream).
//
// Usage: node bridge.mjs [--port N] [--port-file F] -- /path/python-sandbox-mcp ARGS...
import http from "node:http";
import fs from "node:fs";
import { randomUUID } from "node:crypto";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

export async function startBridge({ command, args = [], port = 0, env, stderr = "inherit", log }) {
  const sessions = new Map(); // session id -> { http, stdio }
  const closing = []; // server processes being ended
  const say = (m) => log && log(m);

  async function newSession() {
    const stdio = new StdioClientTransport({ command, args, env: env ?? process.env, stderr });
    const inflight = new Map(); // request id -> progressToken|undefined
    const tokens = new Map(); // progressToken -> request id
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableDnsRebindingProtection: true,
      allowedHosts: [`127.0.0.1:${boundPort}`, `localhost:${boundPort}`],
      onsessioninitialized: (id) => { sessions.set(id, { http: transport, stdio }); say(`session ${id} opened`); },
    });
    transport.onmessage = (msg) => {
      if (msg.method !== undefined && msg.id !== undefined) {
        const tok = msg.params?._meta?.progressToken;
        inflight.set(msg.id, tok);
        if (tok !== undefined) tokens.set(tok, msg.id);
      }
      stdio.send(msg).catch((e) => say(`to server: ${e}`));
    };
    stdio.onmessage = (msg) => {
      let related;
      if (msg.id !== undefined && msg.method === undefined) {
        // a response: the transport routes it by its id
        const tok = inflight.get(msg.id);
        inflight.delete(msg.id);
        if (tok !== undefined) tokens.delete(tok);
      } else if (msg.method === "notifications/progress" && tokens.has(msg.params?.progressToken)) {
        related = tokens.get(msg.params.progressToken);
      } else if (msg.id === undefined && inflight.size === 1) {
        related = [...inflight.keys()][0];
      }
      transport.send(msg, related !== undefined ? { relatedRequestId: related } : undefined)
        .catch((e) => say(`to client: ${e}`));
    };
    const closeBoth = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      closing.push(stdio.close().catch(() => {}));
    };
    transport.onclose = closeBoth;
    stdio.onclose = () => { transport.close().catch(() => {}); };
    stdio.onerror = (e) => say(`server: ${e}`);
    await stdio.start();
    return { transport, stdio };
  }

  let boundPort = port;
  const server = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url, "http://127.0.0.1");
      if (url.pathname !== "/mcp") { res.writeHead(404).end(); return; }
      let body;
      if (req.method === "POST") {
        const chunks = [];
        for await (const c of req) chunks.push(c);
        const text = Buffer.concat(chunks).toString("utf8");
        try { body = JSON.parse(text); } catch {
          res.writeHead(400, { "content-type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }));
          return;
        }
      }
      const sid = req.headers["mcp-session-id"];
      if (sid) {
        const s = sessions.get(sid);
        if (!s) {
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
          return;
        }
        await s.http.handleRequest(req, res, body);
        return;
      }
      const isInit = req.method === "POST" && !Array.isArray(body) && body?.method === "initialize";
      if (!isInit) {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "Bad Request: No valid session ID provided" } }));
        return;
      }
      const { transport: t, stdio } = await newSession();
      await t.handleRequest(req, res, body);
      // Refused (bad Host or Origin, a malformed initialize): no session was
      // opened, so its server process goes now.
      if (!t.sessionId) closing.push(stdio.close().catch(() => {}));
    } catch (e) {
      say(`bridge: ${e?.stack || e}`);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  boundPort = server.address().port;
  return {
    port: boundPort,
    url: `http://127.0.0.1:${boundPort}/mcp`,
    sessions,
    async close() {
      for (const s of [...sessions.values()]) { await s.http.close().catch(() => {}); closing.push(s.stdio.close().catch(() => {})); }
      await Promise.all(closing);
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const dd = argv.indexOf("--");
  const opts = dd >= 0 ? argv.slice(0, dd) : [];
  const cmd = dd >= 0 ? argv.slice(dd + 1) : argv;
  const get = (k) => { const i = opts.indexOf(k); return i >= 0 ? opts[i + 1] : undefined; };
  const b = await startBridge({ command: cmd[0], args: cmd.slice(1), port: Number(get("--port") || 0),
                                log: (m) => process.stderr.write(`bridge: ${m}\n`) });
  if (get("--port-file")) fs.writeFileSync(get("--port-file"), String(b.port));
  process.stderr.write(`bridge: listening on ${b.url}\n`);
  const stop = async () => { await b.close(); process.exit(0); };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
