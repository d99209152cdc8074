// The MCP conformance suite (@modelcontextprotocol/conformance, Node 22)
// against the server behind bridge.mjs (stdio <-> Streamable HTTP).
//
// Scenarios that apply to a tools-and-resources server without prompts run
// and must pass. The others need the suite's own fixture server (tools named
// test_*, resources test://..., prompts, completions, subscriptions) and are
// listed with the reason they do not apply.
import fs from "node:fs";
import path from "node:path";
import { startBridge } from "./bridge.mjs";
import { run, tmpdir, cleanEnv, BIN_DIR } from "./lib.mjs";

export const APPLICABLE = {
  "server-initialize": "initialize handshake",
  "ping": "ping",
  "tools-list": "tools/list",
  "logging-set-level": "logging/setLevel",
  "resources-list": "resources/list (workspace files)",
  "server-sse-multiple-streams": "concurrent requests on several POST streams (our server answers them concurrently; the SSE part is the bridge's)",
  "dns-rebinding-protection": "Host/Origin checks: a property of the HTTP bridge (SDK transport), not of the stdio server; run to keep the bridge honest",
};

export const NOT_APPLICABLE = {
  "completion-complete": "no completions capability: the server has no prompts or resource templates to complete",
  "tools-call-simple-text": "calls the suite's fixture tool test_simple_text",
  "tools-call-image": "calls the fixture tool test_image_content",
  "tools-call-audio": "calls the fixture tool test_audio_content",
  "tools-call-embedded-resource": "calls the fixture tool test_embedded_resource",
  "tools-call-mixed-content": "calls the fixture tool test_multiple_content_types",
  "tools-call-with-logging": "calls the fixture tool test_tool_with_logging",
  "tools-call-error": "calls the fixture tool test_error_handling",
  "tools-call-with-progress": "calls the fixture tool test_tool_with_progress",
  "tools-call-sampling": "calls the fixture tool test_sampling (the server never asks the client for sampling)",
  "tools-call-elicitation": "calls the fixture tool test_elicitation (the server never elicits)",
  "elicitation-sep1034-defaults": "calls the fixture tool test_elicitation_sep1034_defaults",
  "elicitation-sep1330-enums": "calls the fixture tool test_elicitation_sep1330_enums",
  "json-schema-2020-12": "inspects the fixture tool json_schema_2020_12_tool",
  "server-sse-polling": "calls the fixture tool test_reconnection",
  "resources-read-text": "reads the fixture resource test://static-text (ours are file:// URIs of workspace files)",
  "resources-read-binary": "reads the fixture resource test://static-binary",
  "resources-templates-read": "reads the fixture template test://template/{id}/data (the server has no templates)",
  "resources-subscribe": "resources.subscribe is not declared",
  "resources-unsubscribe": "resources.subscribe is not declared",
  "prompts-list": "the server has no prompts capability",
  "prompts-get-simple": "the server has no prompts capability",
  "prompts-get-with-args": "the server has no prompts capability",
  "prompts-get-embedded-resource": "the server has no prompts capability",
  "prompts-get-with-image": "the server has no prompts capability",
};

export async function runConformance(h, { bin }) {
  const root = tmpdir("conformance");
  fs.mkdirSync(path.join(root, "workspace", "outputs"), { recursive: true });
  fs.writeFileSync(path.join(root, "workspace", "outputs", "hello.txt"), "hello\n");
  const bridgeLog = [];
  const bridge = await startBridge({ command: bin, args: ["--root", root, "--log-level", "warning"], stderr: "ignore",
                                     log: (m) => bridgeLog.push(m) });
  const conformance = path.join(BIN_DIR, "conformance");
  const env = cleanEnv({ HOME: root });
  const report = { ran: {}, not_applicable: NOT_APPLICABLE };
  try {
    // Every scenario the installed suite knows must be classified here.
    const ls = await run(conformance, ["list", "--server"], { env, timeout: 60000 });
    const known = [...ls.stdout.matchAll(/^\s*-\s+([a-z0-9-]+)/gm)].map((m) => m[1]);
    const unclassified = known.filter((s) => !(s in APPLICABLE) && !(s in NOT_APPLICABLE));
    h.check("conformance: every server scenario of the suite is classified", known.length > 0 && unclassified.length === 0,
      `unclassified: ${unclassified.join(", ")}\n${ls.stdout.slice(0, 400)}${ls.stderr.slice(-400)}`);
    for (const scenario of Object.keys(APPLICABLE)) {
      if (!known.includes(scenario)) { h.note(`conformance: scenario ${scenario} is not in this suite version`); continue; }
      const out = path.join(root, "results", scenario);
      const r = await run(conformance, ["server", "--url", bridge.url, "--scenario", scenario, "-o", out], { env, timeout: 120000 });
      const checks = [];
      for (const dir of fs.existsSync(out) ? fs.readdirSync(out) : []) {
        const f = path.join(out, dir, "checks.json");
        if (fs.existsSync(f)) checks.push(...JSON.parse(fs.readFileSync(f, "utf8")));
      }
      const graded = checks.filter((c) => c.status !== "INFO");
      const bad = graded.filter((c) => c.status === "FAILURE");
      const warn = graded.filter((c) => c.status === "WARNING");
      report.ran[scenario] = { passed: graded.length - bad.length, failed: bad.length, warnings: warn.map((c) => c.id) };
      h.check(`conformance: ${scenario}`, r.code === 0 && graded.length > 0 && bad.length === 0,
        `exit ${r.code}; ${bad.map((c) => `${c.id}: ${c.errorMessage}`).join("; ")}\n${r.stdout.slice(-800)}${r.stderr.slice(-800)}`);
      for (const w of warn) h.note(`conformance: ${scenario}: warning ${w.id}: ${w.errorMessage ?? ""}`);
    }
  } finally {
    await bridge.close();
  }
  const errs = bridgeLog.filter((m) => /^(to server|to client|bridge|server):/.test(m));
  h.check("conformance: the bridge forwarded every message", errs.length === 0, errs.join("\n"));
  h.report.conformance = report;
}
