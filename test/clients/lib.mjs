// Shared helpers of the client tests: a tiny check harness, process running
// with a deadline, temporary directories, and the reading of what a client
// handed its "model".
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..");
export const BIN_DIR = path.join(HERE, "node_modules", ".bin");

export class Harness {
  constructor() {
    this.passed = 0;
    this.failed = 0;
    this.failures = [];
    this.notes = [];
    this.report = {}; // suite -> anything worth writing down (what the model saw)
  }
  check(name, cond, detail) {
    if (cond) {
      this.passed++;
      console.log(`ok   ${name}`);
    } else {
      this.failed++;
      this.failures.push(name);
      console.log(`FAIL ${name}${detail !== undefined ? `\n       ${String(detail).split("\n").join("\n       ")}` : ""}`);
    }
    return !!cond;
  }
  note(text) {
    this.notes.push(text);
    console.log(`     note: ${text}`);
  }
}

// Run a program to completion (or until `timeout` ms, then SIGKILL its process
// group). Resolves { code, signal, stdout, stderr, ms, timedOut }.
export function run(cmd, args, { cwd, env, timeout = 120000, input } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(cmd, args, { cwd, env, detached: true, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let stdout = "", stderr = "", timedOut = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, "SIGKILL"); } catch {}
    }, timeout);
    child.on("error", (e) => { stderr += String(e); });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0, timedOut });
    });
    if (child.stdin) {
      child.stdin.on("error", () => {}); // the program may exit before reading it
      child.stdin.end(input);
    }
  });
}

export const TMPDIRS = [];
export function tmpdir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `psm-clients-${prefix}-`));
  TMPDIRS.push(d);
  return d;
}

// Processes still running whose command line names one of `dirs` (servers
// that a client failed to end), after waiting up to `graceMs` for them.
export async function strayProcesses(dirs, graceMs = 5000) {
  const deadline = Date.now() + graceMs;
  for (;;) {
    const found = [];
    for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      let cmd = "";
      try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" "); } catch { continue; }
      if (Number(pid) !== process.pid && dirs.some((d) => cmd.includes(d))) {
        let stat = "";
        try { stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ").slice(0, 2).join(" ppid "); } catch {}
        found.push(`${pid} (state ${stat}): ${cmd.trim()}`);
      }
    }
    if (found.length === 0 || Date.now() > deadline) return found;
    await new Promise((r) => setTimeout(r, 250));
  }
}

// A clean environment for a client: nothing of the caller's own agent
// (ANTHROPIC_*, OPENAI_*, CLAUDE*, CODEX*) leaks in; Node 22 first on PATH.
export function cleanEnv(extra = {}) {
  const keep = ["LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"];
  const env = {};
  for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
  env.PATH = `${BIN_DIR}:${process.env.PATH || "/usr/local/bin:/usr/bin:/bin"}`;
  return { ...env, ...extra };
}

// The README's own step: `make -C REPO install-skill PROJECT=DIR`.
export async function installSkill(h, who, proj) {
  const r = await run("make", ["-s", "-C", REPO, "install-skill", `PROJECT=${proj}`], { env: { ...process.env, MAKEFLAGS: "" }, timeout: 60000 });
  const ok = ["agents", "claude"].every((d) =>
    fs.existsSync(path.join(proj, `.${d}`, "skills", "code-interpreter-sandbox-executor", "SKILL.md")));
  h.check(`${who}: make install-skill PROJECT=... puts SKILL.md in the project`, r.code === 0 && ok, r.stdout + r.stderr);
}

export function lines(s) {
  return s.split("\n").filter((l) => l.trim() !== "");
}

export function jsonLines(s) {
  const out = [];
  for (const l of lines(s)) {
    try { out.push(JSON.parse(l)); } catch { /* not JSON: a log line */ }
  }
  return out;
}

// What one tool result looked like to the model, whatever the API:
// { blocks: [...kinds], text, images: [{mime, bytes}], json, ... }
// Text blocks are told apart by what they carry: "status" (our text block),
// "json" (structuredContent as text), "link" (a resource_link rendered as
// text), "image-note" (Claude Code's "[Image: source: ...]"), "image-label"
// (Gemini CLI's "[Tool 'T' provided the following image data ...]", opencode's
// "Attached media from tool result:"), "wall-time"
// (Codex's "Wall time: ... Output:" prefix, dropped from `text`).
export function describeResult(content) {
  const out = { blocks: [], text: "", images: [], json: null };
  const texts = [];
  const addText = (t) => {
    if (/^Wall time: [0-9.]+ seconds\nOutput:\n?/.test(t)) {
      out.blocks.push("wall-time");
      t = t.replace(/^Wall time: [0-9.]+ seconds\nOutput:\n?/, "");
      if (!t) return;
    }
    let kind = "text";
    if (/^\[Resource link: /.test(t) || /^\{"type":"resource_link"/.test(t) || /^Resource Link: /.test(t)) kind = "link";
    else if (/^\[Image: source: /.test(t)) kind = "image-note";
    else if (/^\[Tool '[^']*' provided the following image data/.test(t) || /^Attached media from tool result:$/.test(t)) kind = "image-label";
    else if (/^\{[\s\S]*\}$/.test(t.trim())) { try { JSON.parse(t); kind = "json"; } catch {} }
    else if (/^(ok|error|timeout|cancelled|crashed|memory) · exit /.test(t)) kind = "status";
    out.blocks.push(kind);
    texts.push({ kind, t });
  };
  if (typeof content === "string") {
    addText(content);
  } else if (Array.isArray(content)) {
    for (const b of content) {
      if (b.type === "text" || b.type === "input_text" || b.type === "output_text") {
        addText(b.text);
      } else if (b.type === "image" && b.source) {
        out.blocks.push("image");
        out.images.push({ mime: b.source.media_type, bytes: Buffer.from(b.source.data || "", "base64") });
      } else if (b.type === "image_url") {
        out.blocks.push("image");
        const m = /^data:([^;]+);base64,(.*)$/s.exec(b.image_url?.url || "");
        out.images.push({ mime: m?.[1] ?? null, bytes: Buffer.from(m?.[2] ?? "", "base64") });
      } else if (b.type === "input_image") {
        out.blocks.push("image");
        const m = /^data:([^;]+);base64,(.*)$/s.exec(b.image_url || "");
        out.images.push({ mime: m?.[1] ?? null, bytes: Buffer.from(m?.[2] ?? "", "base64") });
      } else {
        out.blocks.push(b.type);
      }
    }
  }
  out.text = texts.map((x) => x.t).join("\n");
  const jsons = texts.filter((x) => x.kind === "json");
  if (jsons.length === 1) out.json = JSON.parse(jsons[0].t);
  return out;
}

export function isPng(buf) {
  return buf && buf.length > 24 && buf.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
}

// A one-line summary of what the model saw, for the notes and the README.
export function summarize(d, isError) {
  const n = (k) => d.blocks.filter((b) => b === k).length;
  const parts = [];
  if (n("status")) parts.push("our text block (status line + sections)");
  if (n("text")) parts.push(`${n("text")} other text block(s)`);
  if (n("json")) parts.push("the JSON as text");
  if (d.images.length) parts.push(`image (${d.images.map((i) => i.mime).join(", ")})`);
  if (n("image-note")) parts.push("a text note with the image's saved path");
  if (n("image-label")) parts.push("a text line announcing the image");
  if (n("link")) parts.push(`${n("link")} resource_link(s) rendered as text`);
  const others = d.blocks.filter((b) => !["status", "text", "json", "image", "image-note", "image-label", "link", "wall-time"].includes(b));
  if (others.length) parts.push(others.join(", "));
  if (n("wall-time")) parts.push("(after Codex's 'Wall time' line)");
  if (isError === true) parts.push("is_error: true");
  return parts.join(" + ") || "(nothing)";
}

// The scripted "conversation": the tool calls the mock model makes, in order.
export const SCRIPT = [
  { tool: "execute_python", label: "stdout+value",
    input: { code: "import os\nprint('hello from sandbox')\nprint('cwd=' + os.getcwd())\n6*7" } },
  { tool: "execute_python", label: "chart",
    input: { code: [
      "import matplotlib.pyplot as plt, json, csv",
      "xs = list(range(10)); ys = [x * x for x in xs]",
      "with open('workspace/outputs/data.csv', 'w', newline='') as f:",
      "    w = csv.writer(f); w.writerow(['x', 'y']); w.writerows(zip(xs, ys))",
      "with open('workspace/outputs/summary.json', 'w') as f:",
      "    json.dump({'mean': sum(ys) / len(ys), 'n': len(ys)}, f)",
      "plt.plot(xs, ys); plt.title('squares'); plt.show()",
    ].join("\n") } },
  { tool: "list_artifacts", label: "list_artifacts", input: {} },
  { tool: "verify_outputs", label: "verify_outputs",
    input: { files: ["workspace/outputs/data.csv", { path: "workspace/outputs/summary.json", required_keys: ["mean"] }] } },
  { tool: "execute_python", label: "error", input: { code: "1/0" } },
  // Longer than any client passes on whole: the server's reply budget cuts
  // it first, so that the model sees our head, tail and marker, not the
  // client's own cut.
  { tool: "execute_python", label: "long output",
    input: { code: "import sys\nfor i in range(3000): print('line', i)\nsys.stderr.write('E' * 30000 + '\\nEND\\n')" } },
];
export const FINAL_TEXT = "MOCK-FINAL: all tool results received.";
export const TOOLS = ["execute_python", "list_artifacts", "verify_outputs"];

// The checks common to both clients, on the tool results the mock recorded.
// `byStep[i]` = { d: describeResult(...), isError } for SCRIPT[i].
// Returns the per-tool summaries for the report.
export function checkModelSaw(h, who, byStep, root, { structured = false, imageExpected = true, errorFlag }) {
  const seen = {};
  const at = (i) => byStep[i];
  const s0 = at(0);
  if (h.check(`${who}: execute_python result reached the model`, s0, "no tool result recorded for step 0")) {
    const d = s0.d;
    if (structured && d.json) {
      h.check(`${who}: stdout reached the model`, /hello from sandbox/.test(d.json.stdout ?? ""), d.text.slice(0, 400));
      h.check(`${who}: final-expression value reached the model`, d.json.result === "42", d.text.slice(0, 400));
      h.check(`${who}: Python ran in the project root`, (d.json.stdout ?? "").includes(`cwd=${root}\n`), d.text.slice(0, 400));
    } else {
      h.check(`${who}: stdout reached the model`, /stdout:\nhello from sandbox\n/.test(d.text), d.text.slice(0, 400));
      h.check(`${who}: final-expression value reached the model`, /result:\n42\b/.test(d.text), d.text.slice(0, 400));
      h.check(`${who}: status line begins the text`, /^ok · exit 0 · /.test(d.text), d.text.slice(0, 200));
      h.check(`${who}: Python ran in the project root`, d.text.includes(`cwd=${root}\n`), d.text.slice(0, 400));
    }
    seen["execute_python (ok)"] = summarize(d, s0.isError);
  }
  const s1 = at(1);
  if (h.check(`${who}: chart call result reached the model`, s1, "no tool result recorded for step 1")) {
    const png = s1.d.images.find((i) => i.mime === "image/png" && isPng(i.bytes));
    if (imageExpected) h.check(`${who}: the chart reached the model as a PNG image`, png, summarize(s1.d));
    else h.note(`${who}: the chart did NOT reach the model as an image (${summarize(s1.d)})`);
    h.check(`${who}: the chart call names its artifacts`, /figure-[^"\s]*\.png/.test(s1.d.text) || png, s1.d.text.slice(0, 400));
    if (!s1.d.json) {
      // Our text block reached the model whole: its status line and the
      // artifacts: section listing every file the call made.
      h.check(`${who}: the chart call's status line and artifacts list reach the model`,
        /^ok · exit 0 · /.test(s1.d.text) &&
        /\nartifacts:\n- workspace\/outputs\/data\.csv \(.*\n- workspace\/outputs\/figure-[^ ]*\.png \(.*\n- workspace\/outputs\/summary\.json \(/.test(s1.d.text),
        s1.d.text.slice(0, 600));
    }
    seen["execute_python (chart)"] = summarize(s1.d, s1.isError);
  }
  const s2 = at(2);
  if (h.check(`${who}: list_artifacts result reached the model`, s2, "no tool result recorded for step 2")) {
    const j = s2.d.json ?? (() => { try { return JSON.parse(s2.d.text.slice(s2.d.text.indexOf("{"))); } catch { return null; } })();
    const paths = (j?.artifacts ?? []).map((a) => a.path);
    h.check(`${who}: list_artifacts lists data.csv, summary.json and the chart`,
      paths.includes("workspace/outputs/data.csv") && paths.includes("workspace/outputs/summary.json") &&
      paths.some((p) => /^workspace\/outputs\/.*\.png$/.test(p)), s2.d.text.slice(0, 600));
    seen["list_artifacts"] = summarize(s2.d, s2.isError);
  }
  const s3 = at(3);
  if (h.check(`${who}: verify_outputs result reached the model`, s3, "no tool result recorded for step 3")) {
    const j = s3.d.json ?? (() => { try { return JSON.parse(s3.d.text.slice(s3.d.text.indexOf("{"))); } catch { return null; } })();
    h.check(`${who}: verify_outputs says completed, 0 failed`, j?.status === "completed" && j?.failed === 0, s3.d.text.slice(0, 600));
    seen["verify_outputs"] = summarize(s3.d, s3.isError);
  }
  const s4 = at(4);
  if (h.check(`${who}: error result reached the model`, s4, "no tool result recorded for step 4")) {
    h.check(`${who}: the traceback reached the model`, /ZeroDivisionError: division by zero/.test(s4.d.text), s4.d.text.slice(0, 400));
    if (!s4.d.json) h.check(`${who}: the error's status line reaches the model`, /^error · exit 1 · /.test(s4.d.text), s4.d.text.slice(0, 300));
    errorFlag(s4);
    seen["execute_python (1/0)"] = summarize(s4.d, s4.isError);
  }
  const s5 = at(5);
  if (h.check(`${who}: the long output's result reached the model`, s5, "no tool result recorded for step 5")) {
    const t = s5.d.json ? `${s5.d.json.stdout}\n${s5.d.json.stderr}` : s5.d.text;
    // Codex: "…N tokens truncated…", "Total output lines", "[... omitted N of M lines ...]";
    // Claude Code writes an over-long result to a file and says so.
    const clientCut = /tokens truncated|chars truncated|Total output lines|omitted \d+ of \d+ lines|output truncated|exceeds maximum allowed tokens|Output too large/i.exec(t);
    h.check(`${who}: the long output reaches the model as the server cut it (head, tail, marker), not cut again by the client`,
      !clientCut && /line 0\n/.test(t) && /line 2999\n/.test(t) && /\nEND\n/.test(t) &&
      /\[\.\.\. \d+ characters omitted \(\d+ in all\); the whole output is in workspace\/\.logs\//.test(t),
      clientCut ? `the client cut it: ${clientCut[0]}` : t.slice(0, 300));
    seen["execute_python (long output)"] = `${summarize(s5.d, s5.isError)}, ${Buffer.byteLength(t)} bytes`;
  }
  return seen;
}

// ---- the protocol on the wire (sdk.mjs records it; tap.mjs for a client
// that starts the server itself) ----

// What tap.mjs wrote: [{ dir: "out" (from the client) | "in", msg }].
export function readTap(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

// The era a client spoke, from its messages: "modern" when every request
// named 2026-07-28 in its _meta (server/discover first, no initialize),
// "legacy" when initialize came first and no request named a version, and
// whatever it was otherwise, spelled out.
export function wireEra(wire) {
  const requests = wire.filter((m) => m.dir === "out" && m.msg.id !== undefined && m.msg.method);
  const results = wire.filter((m) => m.dir === "in" && m.msg.result);
  const named = requests.filter((m) => m.msg.params?._meta?.["io.modelcontextprotocol/protocolVersion"] === "2026-07-28" &&
    typeof m.msg.params._meta["io.modelcontextprotocol/clientCapabilities"] === "object");
  const init = requests.find((m) => m.msg.method === "initialize");
  const modern = requests.length > 0 && named.length === requests.length && !init &&
    results.length > 0 && results.every((m) => m.msg.result.resultType === "complete");
  const legacy = init && requests[0] === init && named.length === 0 &&
    results.every((m) => m.msg.result.resultType === undefined && m.msg.result.ttlMs === undefined);
  const version = modern ? "2026-07-28" : wire.find((m) => m.dir === "in" && m.msg.id === init?.msg.id)?.msg.result?.protocolVersion;
  return {
    era: modern ? "modern" : legacy ? "legacy" : "mixed",
    version,
    first: requests[0]?.msg.method,
    describe: `${requests.length} requests (${named.length} with 2026-07-28 _meta), first ${requests[0]?.msg.method}; ` +
      `${results.length} results (${results.filter((m) => m.msg.result.resultType).length} with resultType)`,
  };
}
