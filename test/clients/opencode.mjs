// opencode (the real CLI from npm), offline: the server is registered in the
// project's opencode.json as a local MCP server; the model is a custom
// OpenAI-compatible provider whose baseURL is the mock's Chat Completions
// API; run with `opencode run --format json`. The checks read what opencode
// sent back to the "model".
import fs from "node:fs";
import path from "node:path";
import { startMock, readLog } from "./mock-model.mjs";
import { installSkill, run, tmpdir, cleanEnv, jsonLines, describeResult, checkModelSaw, SCRIPT, FINAL_TEXT, TOOLS, BIN_DIR } from "./lib.mjs";

const NAME = "python-sandbox"; // the name the docs register
const SKILL = "code-interpreter-sandbox-executor";

export async function runOpencode(h, { bin }) {
  const who = "opencode";
  const base = tmpdir("opencode");
  const home = path.join(base, "home");
  const proj = path.join(base, "project");
  const userCfg = path.join(home, ".config", "opencode");
  fs.mkdirSync(userCfg, { recursive: true });
  fs.mkdirSync(proj, { recursive: true });
  const log = path.join(base, "model.jsonl");
  const mock = await startMock({ script: SCRIPT, log, finalText: FINAL_TEXT });
  const opencode = path.join(BIN_DIR, "opencode");
  const env = cleanEnv({
    HOME: home,
    NO_COLOR: "1",
    // No network: no models.dev catalogue, no update check, no LSP
    // downloads; and opencode's own `npm install @opencode-ai/plugin` into
    // its config directory (done in the background at every start) is made
    // to fail at once from npm's cache instead of reaching the registry.
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    npm_config_offline: "true",
  });
  try {
    await installSkill(h, who, proj);
    // The user's model: a custom OpenAI-compatible provider (the mock),
    // declared as taking images.
    fs.writeFileSync(path.join(userCfg, "opencode.json"), JSON.stringify({
      $schema: "https://opencode.ai/config.json",
      provider: {
        mock: {
          npm: "@ai-sdk/openai-compatible",
          name: "Mock model API",
          options: { baseURL: `${mock.url}/v1`, apiKey: "dummy" },
          models: { "mock-vision": { name: "Mock vision model", tool_call: true, attachment: true,
                                     modalities: { input: ["text", "image"], output: ["text"] } } },
        },
      },
      model: "mock/mock-vision",
      autoupdate: false,
      share: "disabled",
    }, null, 2));
    // 1. Register the server as the docs say: the project's opencode.json.
    fs.writeFileSync(path.join(proj, "opencode.json"), JSON.stringify({
      $schema: "https://opencode.ai/config.json",
      mcp: { [NAME]: { type: "local", command: [bin, "--root", proj] } },
    }, null, 2));
    // (`opencode mcp list` would show it "connected"; the run below proves
    // more, and each opencode start costs seconds.)

    // 2. Run the agent non-interactively.
    const r = await run(opencode, ["run", "--format", "json", "Compute with the Python sandbox, chart it, list and verify the outputs."],
      { cwd: proj, env, timeout: 180000 });
    const events = jsonLines(r.stdout);
    h.check(`${who}: opencode run exits 0`, r.code === 0 && !r.timedOut, `code ${r.code}${r.timedOut ? " (timed out)" : ""}\n${r.stderr.slice(-2000)}`);
    const tools = events.filter((e) => e.type === "tool_use").map((e) => e.part);
    const prefix = `${NAME}_`;
    h.check(`${who}: every scripted tool call ran on the server`,
      tools.length === SCRIPT.length && tools.every((t, i) => t.tool === prefix + SCRIPT[i].tool),
      JSON.stringify(tools.map((t) => t.tool)));
    h.check(`${who}: opencode marks the error call as an error, the others as completed`,
      tools.slice(0, 4).every((t) => t.state?.status === "completed") && tools[4]?.state?.status === "error",
      JSON.stringify(tools.map((t) => t.state?.status)));
    const final = events.filter((e) => e.type === "text").map((e) => e.part?.text).join("");
    h.check(`${who}: the run ends with the model's final message`, final === FINAL_TEXT, JSON.stringify(final).slice(0, 600));

    // 3. What the model was sent.
    const { requests, results, errors } = readLog(log);
    h.check(`${who}: the mock model saw no protocol error`, errors.length === 0, JSON.stringify(errors));
    const main = requests.filter((q) => q.api === "chat" && (q.body?.tools ?? []).length);
    const fns = (main.at(-1)?.body?.tools ?? []).map((t) => t.function).filter(Boolean);
    const defs = Object.fromEntries(fns.filter((f) => f.name.startsWith(prefix)).map((f) => [f.name.slice(prefix.length), f]));
    h.check(`${who}: the server connects and its three tools reach the model with their schemas`,
      TOOLS.every((t) => defs[t]?.parameters?.type === "object") && defs.execute_python?.parameters?.properties?.code?.type === "string",
      JSON.stringify(fns.map((f) => f.name)));
    h.check(`${who}: opencode told the model about the skill`, JSON.stringify(main[0]?.body ?? {}).includes(SKILL),
      "the skill's name is not in the first request");

    const byStep = {};
    for (const x of results) {
      if (typeof x.step !== "number") continue;
      const content = Array.isArray(x.content) ? x.content : [{ type: "text", text: String(x.content ?? "") }];
      const sib = (x.siblings ?? []).flatMap((c) => (Array.isArray(c) ? c : [{ type: "text", text: String(c) }]));
      byStep[x.step] = { d: describeResult([...content, ...sib]), isError: null, inTool: describeResult(content), siblings: sib };
    }
    const seen = checkModelSaw(h, who, byStep, proj, {
      imageExpected: true,
      // Chat Completions has no error flag on a tool message: the model
      // learns of the error from our status line (checked in common).
      errorFlag: (s) => h.check(`${who}: the error's tool message carries only our text`, s.d.blocks.join() === "status", JSON.stringify(s.d.blocks)),
    });
    const s1 = byStep[1];
    if (s1) {
      const where = s1.inTool.images.length ? "inside the tool message" : s1.siblings.length ? "in a user message after the tool messages" : "nowhere";
      h.note(`${who}: the chart's image went ${where}`);
      const links = s1.d.blocks.filter((b) => b === "link").length;
      if (!links) h.note(`${who}: the chart call's resource_links did not reach the model (the artifacts: section names the files)`);
      seen["execute_python (chart)"] += ` (image ${where}${links ? "" : "; resource_links dropped"})`;
    }
    if (seen["execute_python (1/0)"]) seen["execute_python (1/0)"] += " (Chat Completions has no error flag)";
    h.check(`${who}: every tool call came from the scripted turn`, results.filter((x) => x.step === -1).length === 0,
      JSON.stringify(results.filter((x) => x.step === -1)));
    h.note(`${who}: agent run took ${r.ms} ms`);
    h.report.opencode = { default: seen };
  } finally {
    await mock.close();
  }
}
