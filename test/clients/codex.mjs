// Codex (the real CLI from npm), offline: the server is registered in
// $CODEX_HOME/config.toml as the README tells users, with execute_python
// approved; the model provider is the mock Responses API; run with
// `codex exec --json`. The checks read what Codex sent back to the "model".
import fs from "node:fs";
import path from "node:path";
import { startMock, readLog } from "./mock-model.mjs";
import { installSkill, run, tmpdir, cleanEnv, jsonLines, describeResult, checkModelSaw, readTap, wireEra, SCRIPT, FINAL_TEXT, TOOLS, BIN_DIR, HERE } from "./lib.mjs";

const NAME = "python-sandbox"; // the name the README registers
// A model from Codex's own catalog that takes images, so that Codex hands
// image content to it. Its catalog entry caps a tool result at 10,000
// tokens; a model outside the catalog gets Codex's fallback metadata,
// whose cap is the documented one, about 10,000 bytes: the 2026-07-28 run
// uses one, so that a reply over that cap shows as Codex's own cut.
const MODEL = "gpt-5.5";
const FALLBACK_MODEL = "mock-model-outside-the-catalog";

const toml = (s) => JSON.stringify(s); // a TOML basic string is a JSON string

// Codex 0.171 speaks 2026-07-28 to a stdio server only with both its
// feature flag and the server's CODEX_MCP_PROTOCOL_VERSION; else the
// legacy initialize (2025-06-18).
const MODERN_FEATURE = "mcp_2026_07_28";

async function oneRun(h, bin, { structured, modern = false }) {
  const who = `codex${structured ? " (--structured-content)" : ""}${modern ? " (2026-07-28 opt-in)" : ""}`;
  const base = tmpdir("codex");
  const home = path.join(base, "home");
  const codexHome = path.join(home, ".codex");
  const proj = path.join(base, "project");
  fs.mkdirSync(codexHome, { recursive: true });
  fs.mkdirSync(proj, { recursive: true });
  const log = path.join(base, "model.jsonl");
  const mock = await startMock({ script: SCRIPT, log, finalText: FINAL_TEXT });
  const codex = path.join(BIN_DIR, "codex");
  const env = cleanEnv({ HOME: home, CODEX_HOME: codexHome, MOCK_API_KEY: "dummy" });
  try {
    await installSkill(h, who, proj);
    // No --root, as the README registers it: the client starts the server
    // in the project (Claude Code also sets CLAUDE_PROJECT_DIR), and a
    // project-scope .mcp.json is shared by everyone who checks it out.
    const serverArgs = structured ? ["--structured-content"] : [];
    const provider = [
      `model = ${toml(modern ? FALLBACK_MODEL : MODEL)}`,
      `model_provider = "mock"`,
      `check_for_update_on_startup = false`,
      ``,
      ...(modern ? [`[features]`, `${MODERN_FEATURE} = true`, ``] : []),
      `[model_providers.mock]`,
      `name = "Mock model API"`,
      `base_url = ${toml(mock.url + "/v1")}`,
      `wire_api = "responses"`,
      `env_key = "MOCK_API_KEY"`,
      ``,
    ].join("\n");
    const cfg = path.join(codexHome, "config.toml");
    // In the 2026-07-28 run the server is started through tap.mjs, which
    // records the wire: Codex's own output does not say which era it spoke.
    const tapLog = path.join(base, "wire.jsonl");
    const [command, args] = modern ? [process.execPath, [path.join(HERE, "tap.mjs"), tapLog, "--", bin, ...serverArgs]] : [bin, serverArgs];
    if (structured || modern) {
      // The README's form: config.toml written by hand, all tools approved.
      fs.writeFileSync(cfg, provider + [
        `[mcp_servers.${NAME}]`,
        `command = ${toml(command)}`,
        `args = [${args.map(toml).join(", ")}]`,
        `tool_timeout_sec = 660`,
        `default_tools_approval_mode = "approve"`,
        ...(modern ? [`env = { CODEX_MCP_PROTOCOL_VERSION = "2026-07-28" }`] : []),
        ``,
      ].join("\n"));
    } else {
      // Registered with `codex mcp add`, then execute_python approved per tool.
      fs.writeFileSync(cfg, provider);
      const add = await run(codex, ["mcp", "add", NAME, "--", bin, ...serverArgs], { cwd: proj, env, timeout: 60000 });
      h.check(`${who}: 'codex mcp add' succeeds`, add.code === 0, add.stdout + add.stderr);
      fs.appendFileSync(cfg, `\n[mcp_servers.${JSON.stringify(NAME)}.tools.execute_python]\napproval_mode = "approve"\n`);
    }

    const list = await run(codex, ["mcp", "list", "--json"], { cwd: proj, env, timeout: 60000 });
    let listed = null;
    try { listed = JSON.parse(list.stdout); } catch {}
    const entry = Array.isArray(listed) ? listed.find((s) => s.name === NAME) : null;
    h.check(`${who}: 'codex mcp list' shows the server enabled`, entry && entry.enabled !== false, list.stdout + list.stderr);

    const r = await run(codex, ["exec", "--strict-config", "--skip-git-repo-check", "--json",
      "Compute with the Python sandbox, chart it, list and verify the outputs."], { cwd: proj, env, timeout: 180000 });
    const events = jsonLines(r.stdout);
    h.check(`${who}: codex exec exits 0`, r.code === 0 && !r.timedOut, `code ${r.code}${r.timedOut ? " (timed out)" : ""}\n${r.stderr.slice(-2000)}`);
    const calls = events.filter((e) => e.type === "item.completed" && e.item?.type === "mcp_tool_call");
    const final = events.filter((e) => e.type === "item.completed" && e.item?.type === "agent_message").at(-1);
    h.check(`${who}: every scripted tool call ran on the server`, calls.length === SCRIPT.length && calls.every((c) => c.item.server === NAME),
      JSON.stringify(calls.map((c) => [c.item.tool, c.item.status, c.item.error])));
    h.check(`${who}: the run ends with the model's final message`, final?.item?.text === FINAL_TEXT, JSON.stringify(final));

    const { requests, results, errors } = readLog(log);
    h.check(`${who}: the mock model saw no protocol error`, errors.length === 0, JSON.stringify(errors));
    h.check(`${who}: Codex told the model about the skill`,
      JSON.stringify(requests.find((q) => q.api === "responses")?.body ?? {}).includes("code-interpreter-sandbox-executor"),
      "the skill's name is not in the first request");
    // Tools: offered directly, or (deferred) through tool_search.
    const search = results.find((x) => x.step === "search");
    let offered = [];
    const collect = (list) => {
      for (const t of list || []) {
        if (t?.type === "namespace" && Array.isArray(t.tools)) for (const s of t.tools) offered.push({ ns: t.name, ...s });
      }
    };
    collect(requests.find((q) => q.api === "responses")?.body?.tools);
    if (search) collect(search.content);
    // Codex may rewrite characters of the server name in the namespace.
    const nsNames = [`mcp__${NAME}`, `mcp__${NAME.replace(/[^A-Za-z0-9_]/g, "_")}`];
    const mine = offered.filter((t) => nsNames.includes(t.ns));
    h.check(`${who}: the server connects and its three tools reach the model`,
      TOOLS.every((t) => mine.some((m) => m.name === t)) &&
      mine.find((m) => m.name === "execute_python")?.parameters?.properties?.code?.type === "string",
      JSON.stringify(offered.map((t) => `${t.ns}.${t.name}`)));
    if (search) h.note(`${who}: MCP tools are deferred behind tool_search; it returned namespace ${mine[0]?.ns} with ${mine.map((m) => m.name).join(", ")}`);

    const byStep = {};
    for (const x of results) if (typeof x.step === "number") byStep[x.step] = { d: describeResult(x.content), isError: x.is_error };
    const seen = checkModelSaw(h, who, byStep, proj, {
      structured,
      imageExpected: !structured,
      errorFlag: (s) => {
        // The Responses API has no error flag on a function_call_output: the
        // model sees our status line (or the JSON's status); Codex itself
        // marks the call failed in its event stream.
        const ev = calls[4]?.item;
        h.check(`${who}: Codex marks the error call failed`, ev?.status === "failed", JSON.stringify(ev)?.slice(0, 400));
        const marked = structured && s.d.json ? s.d.json.status === "error" && s.d.json.exit_code === 1 : /^error · exit 1 · /.test(s.d.text);
        h.check(`${who}: the model-visible result says error, exit 1`, marked, s.d.text.slice(0, 300));
      },
    });
    h.check(`${who}: every tool call came from the scripted turn`, results.filter((x) => x.step === -1).length === 0,
      JSON.stringify(results.filter((x) => x.step === -1)));
    if (modern) {
      const era = wireEra(readTap(tapLog));
      h.check(`${who}: Codex spoke 2026-07-28 (server/discover, _meta on every request, resultType on every result)`,
        era.era === "modern" && era.first === "server/discover", era.describe);
      seen.protocol = `${era.era} ${era.version} (${era.describe})`;
    }
    return { seen, ms: r.ms };
  } finally {
    await mock.close();
  }
}

export async function runCodex(h, { bin }) {
  const out = {};
  for (const [mode, opts] of [["default", { structured: false }], ["with --structured-content", { structured: true }],
                               ["2026-07-28 opt-in", { structured: false, modern: true }]]) {
    const { seen, ms } = await oneRun(h, bin, opts);
    out[mode] = seen;
    h.note(`codex (${mode}): agent run took ${ms} ms`);
  }
  h.report.codex = out;
}
