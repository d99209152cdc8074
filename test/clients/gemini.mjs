// Gemini CLI (the real CLI from npm), offline: registered with
// `gemini mcp add` (project scope, trusted), pointed at the mock Gemini API
// with GOOGLE_GEMINI_BASE_URL, run with `gemini -p --output-format
// stream-json`. The checks read what Gemini CLI sent back to the "model".
import fs from "node:fs";
import path from "node:path";
import { startMock, readLog } from "./mock-model.mjs";
import { installSkill, run, tmpdir, cleanEnv, jsonLines, describeResult, checkModelSaw, SCRIPT, FINAL_TEXT, TOOLS, BIN_DIR } from "./lib.mjs";

const NAME = "python-sandbox"; // the name the docs register
const SKILL = "code-interpreter-sandbox-executor";

// Gemini CLI hands an MCP result to the model as one functionResponse whose
// `output` joins the result's blocks: each text block wrapped in
// <untrusted_context>...</untrusted_context>, an image as a note line
// "[Tool 'T' provided the following image data with mime-type: M]" plus an
// inlineData part (beside the functionResponse, or inside it as
// functionResponse.parts for models that take images there), a resource_link
// as "Resource Link: NAME at URI". A result with isError becomes
// { error: "MCP tool 'T' reported tool error for function call: {...} with
// response: [<the MCP result as JSON>]" }. This turns that back into blocks
// that describeResult() knows, and says what the wrapping was.
export function geminiBlocks(content) {
  const blocks = [];
  const wrap = { untrusted: false, errorString: false };
  const resp = content?.response ?? {};
  let output = typeof resp.output === "string" ? resp.output : null;
  if (output === null && typeof resp.error === "string") {
    wrap.errorString = true;
    const at = resp.error.indexOf(" with response: ");
    let inner = null;
    try { inner = JSON.parse(resp.error.slice(at + " with response: ".length)); } catch {}
    const mcp = inner?.[0]?.functionResponse?.response;
    for (const b of mcp?.content ?? []) blocks.push(b.type === "text" ? { type: "text", text: b.text } : { type: b.type });
    return { blocks, wrap, isError: mcp?.isError === true, raw: resp.error };
  }
  output ??= "";
  const re = /<untrusted_context>\n([\s\S]*?)\n<\/untrusted_context>/g;
  let last = 0;
  const rest = (s) => { for (const l of s.split("\n")) if (l.trim()) blocks.push({ type: "text", text: l }); };
  for (let m; (m = re.exec(output)); last = re.lastIndex) {
    rest(output.slice(last, m.index));
    wrap.untrusted = true;
    blocks.push({ type: "text", text: m[1] });
  }
  rest(output.slice(last));
  const images = [...(content?.parts ?? []), ...(content?.siblings ?? [])].filter((p) => p?.inlineData);
  for (const p of images) blocks.push({ type: "image", source: { media_type: p.inlineData.mimeType, data: p.inlineData.data } });
  wrap.imagesInside = (content?.parts ?? []).some((p) => p?.inlineData);
  return { blocks, wrap, isError: false, raw: output };
}

export async function runGemini(h, { bin }) {
  const who = "gemini";
  const base = tmpdir("gemini");
  const home = path.join(base, "home");
  const proj = path.join(base, "project");
  fs.mkdirSync(path.join(home, ".gemini"), { recursive: true });
  fs.mkdirSync(proj, { recursive: true });
  const log = path.join(base, "model.jsonl");
  const mock = await startMock({ script: SCRIPT, log, finalText: FINAL_TEXT });
  const gemini = path.join(BIN_DIR, "gemini");
  const env = cleanEnv({ HOME: home, GEMINI_API_KEY: "dummy", GOOGLE_GEMINI_BASE_URL: mock.url, NO_COLOR: "1" });
  try {
    await installSkill(h, who, proj);
    // The user's settings as `/auth` (API key) leaves them, with usage
    // statistics off (they would go to Google) and no update check.
    fs.writeFileSync(path.join(home, ".gemini", "settings.json"), JSON.stringify({
      security: { auth: { selectedType: "gemini-api-key" } },
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    }, null, 2));
    // The project trusted, as the trust dialog records it (headless, in a
    // folder not trusted, Gemini CLI exits 55 without running anything).
    fs.writeFileSync(path.join(home, ".gemini", "trustedFolders.json"), JSON.stringify({ [proj]: "TRUST_FOLDER" }));

    // 1. Register the server as the docs say.
    const add = await run(gemini, ["mcp", "add", "--trust", "--timeout", "660000", NAME, bin, "--root", proj],
      { cwd: proj, env, timeout: 60000 });
    h.check(`${who}: 'gemini mcp add' succeeds`, add.code === 0, add.stdout + add.stderr);
    let settings = null;
    try { settings = JSON.parse(fs.readFileSync(path.join(proj, ".gemini", "settings.json"), "utf8")); } catch {}
    const entry = settings?.mcpServers?.[NAME];
    h.check(`${who}: .gemini/settings.json names the server and its arguments`,
      entry?.command === bin && JSON.stringify(entry?.args) === JSON.stringify(["--root", proj]) && entry?.trust === true,
      JSON.stringify(settings));

    // 2. Run the agent non-interactively.
    const r = await run(gemini, ["-p", "Compute with the Python sandbox, chart it, list and verify the outputs.",
      "--output-format", "stream-json"], { cwd: proj, env, timeout: 180000 });
    const events = jsonLines(r.stdout);
    h.check(`${who}: gemini -p exits 0`, r.code === 0 && !r.timedOut, `code ${r.code}${r.timedOut ? " (timed out)" : ""}\n${r.stderr.slice(-2000)}`);
    const uses = events.filter((e) => e.type === "tool_use");
    const done = events.filter((e) => e.type === "tool_result");
    const prefix = `mcp_${NAME}_`;
    h.check(`${who}: every scripted tool call ran on the server`,
      uses.length === SCRIPT.length && uses.every((u, i) => u.tool_name === prefix + SCRIPT[i].tool) && done.length === SCRIPT.length,
      JSON.stringify(uses.map((u) => u.tool_name)));
    h.check(`${who}: Gemini CLI marks the error call as an error, the others as success`,
      done.slice(0, 4).every((d) => d.status === "success") && done[4]?.status === "error",
      JSON.stringify(done.map((d) => d.status)));
    const final = events.filter((e) => e.type === "message" && e.role === "assistant").map((e) => e.content).join("");
    const result = events.find((e) => e.type === "result");
    h.check(`${who}: the run ends with the model's final message`, final === FINAL_TEXT && result?.status === "success",
      JSON.stringify({ final, result })?.slice(0, 600));

    // 3. What the model was sent.
    const { requests, results, errors } = readLog(log);
    h.check(`${who}: the mock model saw no protocol error`, errors.length === 0, JSON.stringify(errors));
    const main = requests.filter((q) => q.api === "gemini-stream" || (q.api === "gemini" && !q.body?.generationConfig?.responseMimeType));
    const decls = (main.at(-1)?.body?.tools ?? []).flatMap((t) => t.functionDeclarations ?? []);
    const defs = Object.fromEntries(decls.filter((d) => d.name.startsWith(prefix)).map((d) => [d.name.slice(prefix.length), d]));
    const schemaOf = (d) => d?.parametersJsonSchema ?? d?.parameters;
    h.check(`${who}: the server connects and its three tools reach the model with their schemas`,
      TOOLS.every((t) => schemaOf(defs[t])) && schemaOf(defs.execute_python)?.properties?.code?.type?.toLowerCase() === "string",
      JSON.stringify(decls.map((d) => d.name)));
    const skillSeen = JSON.stringify(main[0]?.body ?? {}).includes(SKILL);
    h.check(`${who}: Gemini CLI told the model about the skill`, skillSeen, "the skill's name is not in the first request");
    const models = [...new Set(main.map((q) => /models\/([^:]+):/.exec(q.path)?.[1]))];
    h.note(`${who}: main turn on model ${models.join(", ")} (model "auto": the router's side request was answered by the mock)`);

    const byStep = {};
    const wraps = {};
    for (const x of results) {
      if (typeof x.step !== "number") continue;
      const g = geminiBlocks(x.content);
      byStep[x.step] = { d: describeResult(g.blocks), isError: g.isError, wrap: g.wrap, raw: g.raw };
      wraps[x.step] = g.wrap;
    }
    const seen = checkModelSaw(h, who, byStep, proj, {
      imageExpected: true,
      errorFlag: (s) => {
        h.check(`${who}: the error reaches the model as Gemini CLI's error string around our result (isError: true)`,
          s.wrap.errorString && s.isError, String(s.raw).slice(0, 400));
      },
    });
    h.check(`${who}: our text blocks reach the model inside <untrusted_context>`,
      [0, 1, 2, 3].every((i) => wraps[i]?.untrusted), JSON.stringify(wraps));
    const s1 = byStep[1];
    if (s1) {
      h.note(`${who}: the chart's image went ${s1.wrap.imagesInside ? "inside functionResponse.parts" : "beside the functionResponse, as an inlineData part of the same turn"}`);
    }
    // Describe the wrapping in the report.
    for (const k of ["execute_python (ok)", "execute_python (chart)", "list_artifacts", "verify_outputs"]) {
      if (seen[k]) seen[k] = seen[k].replace(/^(our text block \(status line \+ sections\)|the JSON as text)/, "$1 in <untrusted_context>");
    }
    if (s1 && seen["execute_python (chart)"]) seen["execute_python (chart)"] += ` (image ${s1.wrap.imagesInside ? "inside the functionResponse" : "as a part beside the functionResponse"})`;
    if (seen["execute_python (1/0)"]) {
      seen["execute_python (1/0)"] += " (inside Gemini CLI's error string: 'MCP tool ... reported tool error ... with response: ' + the MCP result as JSON)";
    }
    h.check(`${who}: every tool call came from the scripted turn`, results.filter((x) => x.step === -1).length === 0,
      JSON.stringify(results.filter((x) => x.step === -1)));
    h.note(`${who}: agent run took ${r.ms} ms`);
    h.report.gemini = { default: seen };
  } finally {
    await mock.close();
  }
}
