// Claude Code (the real CLI from npm), offline: registered with
// `claude mcp add --scope project`, pointed at the mock Messages API, run with
// `claude -p`. The mock's script makes it call every tool once; the checks
// read what Claude Code sent back to the "model".
import fs from "node:fs";
import path from "node:path";
import { startMock, readLog } from "./mock-model.mjs";
import { installSkill, run, tmpdir, cleanEnv, jsonLines, describeResult, checkModelSaw, SCRIPT, FINAL_TEXT, TOOLS, BIN_DIR } from "./lib.mjs";

const NAME = "python-sandbox"; // the name the README registers

// MCP_PROTOCOL_NEGOTIATION: "auto" probes with server/discover and speaks
// 2026-07-28 to a server that answers it; "legacy" only initializes.
// (Unset, 2.1.332 probes stdio servers too, behind a feature flag that is
// on by default.)
async function oneRun(h, bin, { structured, negotiation, era, version }) {
  const who = `claude${structured ? " (--structured-content)" : ""} (MCP_PROTOCOL_NEGOTIATION=${negotiation})`;
  const base = tmpdir("claude");
  const home = path.join(base, "home");
  const proj = path.join(base, "project");
  fs.mkdirSync(home, { recursive: true });
  fs.mkdirSync(proj, { recursive: true });
  const log = path.join(base, "model.jsonl");
  const mock = await startMock({ script: SCRIPT, log, finalText: FINAL_TEXT });
  const claude = path.join(BIN_DIR, "claude");
  const env = cleanEnv({
    HOME: home,
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: "dummy",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    MCP_PROTOCOL_NEGOTIATION: negotiation,
  });
  try {
    // 1. Install the skill and register the server as the README says.
    await installSkill(h, who, proj);
    // No --root, as the README registers it: the client starts the server
    // in the project (Claude Code also sets CLAUDE_PROJECT_DIR), and a
    // project-scope .mcp.json is shared by everyone who checks it out.
    const serverArgs = structured ? ["--structured-content"] : [];
    const add = await run(claude, ["mcp", "add", "--scope", "project", NAME, "--", bin, ...serverArgs], { cwd: proj, env, timeout: 60000 });
    h.check(`${who}: 'claude mcp add --scope project' succeeds`, add.code === 0, add.stdout + add.stderr);
    let mcpJson = null;
    try { mcpJson = JSON.parse(fs.readFileSync(path.join(proj, ".mcp.json"), "utf8")); } catch {}
    h.check(`${who}: .mcp.json names the server`, mcpJson?.mcpServers?.[NAME]?.command === bin, JSON.stringify(mcpJson));
    h.check(`${who}: .mcp.json holds no path of this user's project`, !JSON.stringify(mcpJson).includes(proj), JSON.stringify(mcpJson));

    if (!structured) {
      // What approving the project's servers in the trust dialog records.
      fs.mkdirSync(path.join(proj, ".claude"), { recursive: true });
      fs.writeFileSync(path.join(proj, ".claude", "settings.local.json"), JSON.stringify({ enabledMcpjsonServers: [NAME] }));
      const cfgFile = path.join(home, ".claude.json");
      let cfg = {};
      try { cfg = JSON.parse(fs.readFileSync(cfgFile, "utf8")); } catch {}
      cfg.projects = { ...(cfg.projects || {}), [proj]: { ...(cfg.projects?.[proj] || {}), hasTrustDialogAccepted: true } };
      fs.writeFileSync(cfgFile, JSON.stringify(cfg));
      const list = await run(claude, ["mcp", "list"], { cwd: proj, env, timeout: 60000 });
      h.check(`${who}: 'claude mcp list' shows the server connected`,
        new RegExp(`^${NAME}: .*(✔|✓) Connected`, "m").test(list.stdout), list.stdout + list.stderr);
    }

    // 2. Run the agent non-interactively.
    const allowed = TOOLS.map((t) => `mcp__${NAME}__${t}`);
    const r = await run(claude, ["-p", "Compute with the Python sandbox, chart it, list and verify the outputs.",
      "--output-format", "stream-json", "--verbose", "--allowedTools", ...allowed],
      { cwd: proj, env, timeout: 180000 });
    const events = jsonLines(r.stdout);
    const init = events.find((e) => e.type === "system" && e.subtype === "init");
    const result = events.find((e) => e.type === "result");
    h.check(`${who}: claude -p exits 0`, r.code === 0 && !r.timedOut, `code ${r.code}${r.timedOut ? " (timed out)" : ""}\n${r.stderr.slice(-2000)}`);
    const srv = init?.mcp_servers?.find((s) => s.name === NAME);
    h.check(`${who}: the server connects`, srv?.status === "connected", JSON.stringify(init?.mcp_servers));
    h.check(`${who}: the three tools are listed`, allowed.every((t) => init?.tools?.includes(t)),
      JSON.stringify(init?.tools?.filter((t) => t.startsWith("mcp__"))));
    h.check(`${who}: Claude Code found the skill`, init?.skills?.includes("code-interpreter-sandbox-executor"),
      JSON.stringify(init?.skills));
    h.check(`${who}: the run ends with the model's final message`, result?.result === FINAL_TEXT && result?.is_error === false,
      JSON.stringify(result)?.slice(0, 600));

    // 3. What the model was sent.
    const { requests, results, errors } = readLog(log);
    h.check(`${who}: the mock model saw no protocol error`, errors.length === 0, JSON.stringify(errors));
    const msgReqs = requests.filter((q) => q.api === "anthropic");
    const lastTools = (msgReqs.at(-1)?.body?.tools ?? []);
    const defs = Object.fromEntries(lastTools.filter((t) => allowed.includes(t.name)).map((t) => [t.name, t]));
    h.check(`${who}: the model got the three tools' schemas`, allowed.every((t) => defs[t]?.input_schema?.type === "object") &&
      defs[`mcp__${NAME}__execute_python`]?.input_schema?.properties?.code?.type === "string",
      JSON.stringify(lastTools.map((t) => t.name)));
    const search = results.find((x) => x.step === "search");
    if (search) {
      const refs = (search.content || []).map((b) => b.tool_name).filter(Boolean);
      h.note(`${who}: MCP tools are deferred behind ToolSearch; the search returned ${refs.join(", ")}`);
    }
    const byStep = {};
    for (const x of results) if (typeof x.step === "number") byStep[x.step] = { d: describeResult(x.content), isError: x.is_error };
    const seen = checkModelSaw(h, who, byStep, proj, {
      structured,
      imageExpected: true,
      errorFlag: (s) => h.check(`${who}: the error result is flagged is_error`, s.isError === true, JSON.stringify(s.d.blocks)),
    });
    // Claude Code's own MCP log of this server (~/.cache/claude-cli-nodejs/<project>/mcp-logs-NAME/).
    const logs = [];
    const cache = path.join(home, ".cache", "claude-cli-nodejs");
    for (const p of fs.existsSync(cache) ? fs.readdirSync(cache) : []) {
      const d = path.join(cache, p, `mcp-logs-${NAME}`);
      for (const f of fs.existsSync(d) ? fs.readdirSync(d).sort() : []) logs.push(fs.readFileSync(path.join(d, f), "utf8"));
    }
    const agentLog = logs.find((l) => /Calling MCP tool/.test(l)) ?? "";
    const est = /Connection established with capabilities: (\{.*?\})","timestamp/.exec(agentLog);
    let caps = null;
    try { caps = JSON.parse(JSON.parse(`"${est?.[1]}"`)); } catch {}
    h.check(`${who}: Claude Code's MCP log shows the connection (tools and resources)`, caps?.hasTools === true && caps?.hasResources === true,
      agentLog.slice(0, 800));
    h.check(`${who}: Claude Code speaks ${version} (${era} era)`, caps?.protocolEra === era && caps?.negotiatedProtocolVersion === version,
      `protocolEra ${caps?.protocolEra}, negotiated protocol version ${caps?.negotiatedProtocolVersion}`);
    seen.protocol = `${caps?.protocolEra} ${caps?.negotiatedProtocolVersion}`;
    // Claude Code ends a server with SIGINT, polling every 50 ms for its exit
    // ("MCP server process exited cleanly"); a server still running after
    // 100 ms gets "SIGINT failed, sending SIGTERM", after 400 ms more
    // "SIGTERM failed, sending SIGKILL". Those deadlines are tight on a
    // loaded machine (a server with a live session usually exits in
    // 40-200 ms), so the check is that Claude Code ends the server with
    // SIGINT first; which signal it took is a note, and that no server
    // outlives its client is checked for every suite.
    const signals = /SIGTERM failed, sending SIGKILL/.test(agentLog) ? "SIGINT, SIGTERM, then SIGKILL"
      : /SIGINT failed, sending SIGTERM/.test(agentLog) ? "SIGINT, then SIGTERM" : "SIGINT";
    h.check(`${who}: Claude Code ends the server with SIGINT`, /Sending SIGINT to MCP server process/.test(agentLog),
      agentLog.split("\n").slice(-5).join("\n"));
    h.note(`${who}: the server ended on ${signals}`);
    // Side requests (titles, summaries) must not have been given tools.
    h.check(`${who}: every tool call came from the scripted turn`, results.filter((x) => x.step === -1).length === 0,
      JSON.stringify(results.filter((x) => x.step === -1)));
    return { seen, ms: r.ms };
  } finally {
    await mock.close();
  }
}

export async function runClaude(h, { bin }) {
  const out = {};
  for (const [mode, opts] of [
    ["default, MCP_PROTOCOL_NEGOTIATION=auto", { structured: false, negotiation: "auto", era: "modern", version: "2026-07-28" }],
    ["with --structured-content, MCP_PROTOCOL_NEGOTIATION=legacy", { structured: true, negotiation: "legacy", era: "legacy", version: "2025-11-25" }],
  ]) {
    const { seen, ms } = await oneRun(h, bin, opts);
    out[mode] = seen;
    h.note(`claude (${mode}): agent run took ${ms} ms`);
  }
  h.report.claude = out;
}
