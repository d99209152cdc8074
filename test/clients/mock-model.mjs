// A scripted stand-in for a model API on 127.0.0.1, for offline client tests.
//
// It speaks the Anthropic Messages API (POST /v1/messages, streaming SSE or
// plain JSON) for Claude Code, the OpenAI Responses API (POST .../responses,
// SSE) for Codex, Chat Completions (POST .../chat/completions, SSE) for
// opencode, and the Gemini API (POST .../models/M:generateContent and
// :streamGenerateContent) for Gemini CLI.
//
// The script is a list of tool calls: { tool: "execute_python", input: {...} }.
// The "model" answers a request that offers the script's tools and carries k
// tool results with step k of the script (a tool call), and with a final
// message once every step has a result. Requests that offer no such tool (a
// title or summary side request) get a short plain text answer.
//
// Every request body is appended to the log as JSON lines:
//   { kind: "request", api, path, body }      every request, as received
//   { kind: "tool_result", api, step, call_id, tool, content, is_error, raw }
//                                            each tool result that the client
//                                            sent back to the "model" (once)
//
// Usage: startMock({ script, log }) -> { url, port, close() }   (module)
//        node mock-model.mjs SCRIPT.json LOG.jsonl                (prints the port)
import http from "node:http";
import fs from "node:fs";

function suffixMatch(name, tool) {
  return typeof name === "string" && (name === tool || name.endsWith("__" + tool) || name.endsWith("." + tool) ||
    // Gemini CLI: mcp_<server>_<tool>; opencode: <server>_<tool>.
    name.endsWith("_" + tool));
}

// All tool names offered in a request, flattened (Responses API namespaces,
// Chat Completions' {type:function, function:{name}}, Anthropic's {name}).
export function offeredTools(body) {
  const out = [];
  const walk = (list, prefix) => {
    for (const t of list || []) {
      if (!t || typeof t !== "object") continue;
      if (Array.isArray(t.tools)) walk(t.tools, (t.name || "") + (t.name ? "" : ""));
      if (Array.isArray(t.functionDeclarations)) walk(t.functionDeclarations, ""); // Gemini API
      const name = t.name ?? t.function?.name;
      if (name) out.push({ name, prefix: prefix || "", def: t });
    }
  };
  walk(body.tools, "");
  return out;
}

// The name under which the client offers `tool` to the model, or null.
function resolveToolName(body, tool) {
  for (const t of offeredTools(body)) if (suffixMatch(t.name, tool)) return { name: t.name, namespace: t.prefix || null };
  // Responses API namespaces: { type: "namespace", name: "mcp__psm", tools: [{name: "execute_python"}] },
  // offered up front or loaded by a tool_search_output item in the input.
  const lists = [body.tools || []];
  for (const it of Array.isArray(body.input) ? body.input : []) if (it?.type === "tool_search_output") lists.push(it.tools || []);
  for (const list of lists) {
    for (const t of list) {
      if (Array.isArray(t?.tools)) {
        for (const s of t.tools) if (s?.name === tool) return { name: tool, namespace: t.name };
      } else if (lists.indexOf(list) > 0 && suffixMatch(t?.name, tool)) return { name: t.name, namespace: null };
    }
  }
  return null;
}

// A value that fits a JSON schema (Gemini's schemas spell types in capitals).
function sampleOf(schema) {
  const type = String(schema?.type ?? "object").toLowerCase();
  if (Array.isArray(schema?.enum) && schema.enum.length) return schema.enum[0];
  if (type === "object") {
    const o = {};
    for (const [k, v] of Object.entries(schema?.properties ?? {})) o[k] = sampleOf(v);
    return o;
  }
  if (type === "array") return [];
  if (type === "integer" || type === "number") return schema?.minimum ?? 1;
  if (type === "boolean") return false;
  return "mock";
}

export function startMock({ script, log, finalText = "MOCK-FINAL: all tool results received." }) {
  const seen = new Set();
  const record = (o) => fs.appendFileSync(log, JSON.stringify(o) + "\n");
  const stepTools = script.map((s) => s.tool);
  const searched = new Set();
  // The agent's own turn offers the script's tools, or a tool search (deferred
  // tools); a side request (a title, a summary) offers neither.
  const isMainRequest = (body, offersSearch) =>
    stepTools.length > 0 && (resolveToolName(body, stepTools[0]) !== null || offersSearch);
  // Claude Code lists deferred tools by name in a system message.
  const deferredNames = (body) => {
    const text = JSON.stringify(body);
    const names = new Set();
    for (const t of new Set(stepTools)) {
      for (const m of text.matchAll(new RegExp(`mcp__[A-Za-z0-9_-]+?__${t}\\b`, "g"))) names.add(m[0]);
    }
    return [...names];
  };

  // ---- Anthropic Messages API -------------------------------------------
  function anthropic(req, res, body) {
    const msgs = body.messages || [];
    const results = [];
    const uses = new Map();
    for (const m of msgs) {
      if (!Array.isArray(m.content)) continue;
      for (const b of m.content) {
        if (b.type === "tool_use") uses.set(b.id, b.name);
        if (b.type === "tool_result") results.push(b);
      }
    }
    const offersSearch = (body.tools || []).some((t) => t?.name === "ToolSearch");
    const isMain = isMainRequest(body, offersSearch);
    for (const r of results) {
      if (seen.has(r.tool_use_id)) continue;
      seen.add(r.tool_use_id);
      const tool = uses.get(r.tool_use_id) ?? null;
      const step = tool === "ToolSearch" ? "search" : Number(/^toolu_mock_(\d+)$/.exec(r.tool_use_id)?.[1] ?? -1);
      record({ kind: "tool_result", api: "anthropic", step, call_id: r.tool_use_id, tool,
               content: r.content, is_error: r.is_error === true, raw: r });
    }
    let block;
    const step = results.filter((r) => uses.get(r.tool_use_id) !== "ToolSearch").length;
    if (isMain && step < script.length) {
      const name = resolveToolName(body, script[step].tool);
      if (name) {
        block = { type: "tool_use", id: `toolu_mock_${step}`, name: name.name, input: script[step].input };
      } else if (offersSearch && !searched.has("anthropic")) {
        // Deferred tools: load their schemas first, as a model would.
        searched.add("anthropic");
        block = { type: "tool_use", id: `toolu_mock_search`, name: "ToolSearch",
                  input: { query: "select:" + deferredNames(body).join(",") } };
      } else {
        block = { type: "text", text: `MOCK-ERROR: tool ${script[step].tool} not offered` };
      }
    } else {
      block = { type: "text", text: isMain ? finalText : "Mock title" };
    }
    const stop = block.type === "tool_use" ? "tool_use" : "end_turn";
    const model = body.model || "claude-mock";
    const id = `msg_mock_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
    const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json", "request-id": id });
      res.end(JSON.stringify({ id, type: "message", role: "assistant", model, content: [block],
                               stop_reason: stop, stop_sequence: null, usage }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": id });
    const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    ev("message_start", { message: { id, type: "message", role: "assistant", model, content: [], stop_reason: null,
                                      stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
    if (block.type === "tool_use") {
      ev("content_block_start", { index: 0, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } });
      ev("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } });
    } else {
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: block.text } });
    }
    ev("content_block_stop", { index: 0 });
    ev("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 5 } });
    ev("message_stop", {});
    res.end();
  }

  // ---- OpenAI Responses API ----------------------------------------------
  function responses(req, res, body) {
    const input = Array.isArray(body.input) ? body.input : [];
    const calls = new Map();
    const results = [];
    for (const it of input) {
      if (it?.type === "function_call" || it?.type === "custom_tool_call") calls.set(it.call_id, it.name);
      if (it?.type === "function_call_output" || it?.type === "custom_tool_call_output" || it?.type === "tool_search_output") results.push(it);
    }
    const offersSearch = (body.tools || []).some((t) => t?.type === "tool_search");
    const isMain = isMainRequest(body, offersSearch);
    for (const r of results) {
      if (seen.has(r.call_id)) continue;
      seen.add(r.call_id);
      const isSearch = r.type === "tool_search_output";
      const step = isSearch ? "search" : Number(/^call_mock_(\d+)$/.exec(r.call_id)?.[1] ?? -1);
      const out = isSearch ? r.tools : r.output;
      let isErr = null;
      if (out && typeof out === "object" && !Array.isArray(out) && "success" in out) isErr = out.success === false;
      record({ kind: "tool_result", api: "responses", step, call_id: r.call_id, tool: isSearch ? "tool_search" : calls.get(r.call_id) ?? null,
               content: out, is_error: isErr, raw: r });
    }
    const step = results.filter((r) => r.type !== "tool_search_output").length;
    const rid = `resp_mock_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
    let item;
    const text = (t) => ({ type: "message", role: "assistant", id: `msg_${rid}`, status: "completed",
                           content: [{ type: "output_text", text: t, annotations: [] }] });
    if (isMain && step < script.length) {
      const t = resolveToolName(body, script[step].tool);
      if (t) {
        item = { type: "function_call", id: `fc_${rid}`, call_id: `call_mock_${step}`, name: t.name,
                 arguments: JSON.stringify(script[step].input), status: "completed" };
        if (t.namespace) item.namespace = t.namespace;
      } else if (offersSearch && !searched.has("responses")) {
        searched.add("responses");
        item = { type: "tool_search_call", id: `ts_${rid}`, call_id: "call_mock_search", status: "completed", execution: "client",
                 arguments: { query: [...new Set(stepTools)].join(" "), limit: 8 } };
      } else item = text(`MOCK-ERROR: tool ${script[step].tool} not offered`);
    } else {
      item = text(isMain ? finalText : "Mock title");
    }
    const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
                    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };
    const response = { id: rid, object: "response", created_at: Math.floor(Date.now() / 1000), status: "completed",
                       model: body.model || "mock", output: [item], usage };
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(response));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let seq = 0;
    const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
    ev("response.created", { response: { ...response, status: "in_progress", output: [] } });
    ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress" } });
    if (item.type === "message") {
      ev("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: item.content[0].text });
    }
    ev("response.output_item.done", { output_index: 0, item });
    ev("response.completed", { response });
    res.end();
  }

  // ---- Gemini API (generateContent / streamGenerateContent) ---------------
  // POST .../models/MODEL:generateContent or :streamGenerateContent?alt=sse.
  // Tool calls are functionCall parts (id call_mock_N); the client answers
  // with functionResponse parts, and may put images beside them (or inside,
  // as functionResponse.parts).
  function gemini(req, res, body, path, stream) {
    const contents = Array.isArray(body.contents) ? body.contents : [];
    const responses = [];
    for (let ci = 0; ci < contents.length; ci++) {
      const parts = contents[ci]?.parts || [];
      for (let pi = 0; pi < parts.length; pi++) {
        const fr = parts[pi]?.functionResponse;
        if (!fr) continue;
        // What else the client put in the same turn after this response
        // (sibling parts: text, inlineData), up to the next functionResponse.
        const siblings = [];
        for (let k = pi + 1; k < parts.length && !parts[k]?.functionResponse; k++) siblings.push(parts[k]);
        responses.push({ fr, siblings });
      }
    }
    const isMain = isMainRequest(body, false);
    responses.forEach(({ fr, siblings }, i) => {
      const id = fr.id ?? `pos_${i}`;
      if (seen.has(id)) return;
      seen.add(id);
      const step = Number(/^call_mock_(\d+)$/.exec(fr.id ?? "")?.[1] ?? -1);
      record({ kind: "tool_result", api: "gemini", step, call_id: fr.id ?? null, tool: fr.name ?? null,
               content: { response: fr.response ?? null, parts: fr.parts ?? null, siblings }, is_error: null, raw: fr });
    });
    const step = responses.length;
    let part;
    const schema = body.generationConfig?.responseJsonSchema ?? body.generationConfig?.responseSchema;
    if (!isMain && body.generationConfig?.responseMimeType === "application/json") {
      // A side request for JSON (Gemini CLI's model router asks how complex
      // the task is): an answer that fits the schema, so that the client
      // does not retry.
      part = { text: JSON.stringify(sampleOf(schema)) };
    } else if (isMain && step < script.length) {
      const t = resolveToolName(body, script[step].tool);
      part = t ? { functionCall: { id: `call_mock_${step}`, name: t.name, args: script[step].input } }
               : { text: `MOCK-ERROR: tool ${script[step].tool} not offered` };
    } else {
      part = { text: isMain ? finalText : "Mock title" };
    }
    const model = /models\/([^:]+):/.exec(path)?.[1] ?? "gemini-mock";
    const out = { candidates: [{ content: { role: "model", parts: [part] }, finishReason: "STOP", index: 0 }],
                  usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
                  modelVersion: model, responseId: `mock_${Date.now()}` };
    if (!stream) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(out));
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(`data: ${JSON.stringify(out)}\r\n\r\n`);
    res.end();
  }

  // ---- OpenAI Chat Completions (opencode's OpenAI-compatible provider) -------
  function chat(req, res, body) {
    const msgs = body.messages || [];
    const calls = new Map();
    const results = [];
    for (let i = 0; i < msgs.length; i++) {
      const m = msgs[i];
      for (const c of m.tool_calls || []) calls.set(c.id, c.function?.name);
      if (m.role !== "tool") continue;
      // A client may pass what a tool message cannot hold (images) in a user
      // message right after the tool messages of the turn.
      const siblings = [];
      for (let k = i + 1; k < msgs.length && msgs[k].role !== "assistant"; k++) if (msgs[k].role === "user") siblings.push(msgs[k].content);
      results.push({ m, siblings });
    }
    const isMain = isMainRequest(body, false);
    for (const { m: r, siblings } of results) {
      if (seen.has(r.tool_call_id)) continue;
      seen.add(r.tool_call_id);
      const step = Number(/^call_mock_(\d+)$/.exec(r.tool_call_id)?.[1] ?? -1);
      record({ kind: "tool_result", api: "chat", step, call_id: r.tool_call_id, tool: calls.get(r.tool_call_id) ?? null,
               content: r.content, siblings, is_error: null, raw: r });
    }
    const step = results.length;
    const id = `chatcmpl_mock_${Date.now()}`;
    let delta, finish;
    if (isMain && step < script.length) {
      const t = resolveToolName(body, script[step].tool);
      delta = { role: "assistant", tool_calls: [{ index: 0, id: `call_mock_${step}`, type: "function",
                function: { name: t?.name ?? script[step].tool, arguments: JSON.stringify(script[step].input) } }] };
      finish = "tool_calls";
    } else {
      delta = { role: "assistant", content: isMain ? finalText : "Mock title" };
      finish = "stop";
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = (d, f) => res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model || "mock",
      choices: [{ index: 0, delta: d, finish_reason: f }] })}\n\n`);
    chunk(delta, null);
    chunk({}, finish);
    res.write("data: [DONE]\n\n");
    res.end();
  }

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body = {};
      try { body = text ? JSON.parse(text) : {}; } catch { body = { _unparsed: text.slice(0, 2000) }; }
      const path = (req.url || "").split("?")[0];
      let api = "other";
      if (req.method === "POST" && /\/messages\/count_tokens$/.test(path)) api = "anthropic-count";
      else if (req.method === "POST" && /\/messages$/.test(path)) api = "anthropic";
      else if (req.method === "POST" && /\/responses$/.test(path)) api = "responses";
      else if (req.method === "POST" && /\/chat\/completions$/.test(path)) api = "chat";
      else if (req.method === "POST" && /:streamGenerateContent$/.test(path)) api = "gemini-stream";
      else if (req.method === "POST" && /:generateContent$/.test(path)) api = "gemini";
      else if (req.method === "POST" && /:countTokens$/.test(path)) api = "gemini-count";
      record({ kind: "request", api, method: req.method, path, headers: { "user-agent": req.headers["user-agent"] }, body });
      try {
        if (api === "anthropic") return anthropic(req, res, body);
        if (api === "responses") return responses(req, res, body);
        if (api === "chat") return chat(req, res, body);
        if (api === "gemini" || api === "gemini-stream") return gemini(req, res, body, path, api === "gemini-stream");
        if (api === "gemini-count") {
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(JSON.stringify({ totalTokens: 100 }));
        }
        if (api === "anthropic-count") {
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(JSON.stringify({ input_tokens: 100 }));
        }
        if (req.method === "GET" && /\/models$/.test(path)) {
          res.writeHead(200, { "content-type": "application/json" });
          return res.end(JSON.stringify({ object: "list", data: [], models: [] }));
        }
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: `mock: no ${req.method} ${path}` } }));
      } catch (e) {
        record({ kind: "mock_error", message: String(e?.stack || e) });
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: String(e) } }));
      }
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = server.address().port;
      resolve({ port, url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) });
    });
  });
}

// Read a mock log back: { requests: [...], results: [...by step] }.
export function readLog(log) {
  const lines = fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter(Boolean) : [];
  const all = lines.map((l) => JSON.parse(l));
  return { requests: all.filter((o) => o.kind === "request"), results: all.filter((o) => o.kind === "tool_result"),
           errors: all.filter((o) => o.kind === "mock_error") };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [scriptFile, log] = process.argv.slice(2);
  const m = await startMock({ script: JSON.parse(fs.readFileSync(scriptFile, "utf8")), log });
  console.log(m.port);
}
