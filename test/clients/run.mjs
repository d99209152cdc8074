// Runs the client suites against a built server and prints the closing line
// "N passed, N failed". Usage: node run.mjs BIN [suite ...]
// Suites: sdk claude codex gemini opencode inspector conformance venv (default: all).
import fs from "node:fs";
import path from "node:path";
import { Harness, REPO, TMPDIRS, strayProcesses } from "./lib.mjs";
import { runClaude } from "./claude.mjs";
import { runCodex } from "./codex.mjs";
import { runInspector } from "./inspector.mjs";
import { runConformance } from "./conformance.mjs";
import { runVenv } from "./venv.mjs";
import { runGemini } from "./gemini.mjs";
import { runOpencode } from "./opencode.mjs";
import { runSdk } from "./sdk.mjs";

const SUITES = { sdk: runSdk, claude: runClaude, codex: runCodex, gemini: runGemini, opencode: runOpencode,
                 inspector: runInspector, conformance: runConformance, venv: runVenv };

const [binArg, ...wanted] = process.argv.slice(2);
if (!binArg) {
  console.error("usage: node run.mjs BIN [" + Object.keys(SUITES).join("|") + " ...]");
  process.exit(2);
}
const bin = path.resolve(binArg);
if (!fs.existsSync(bin)) {
  console.error(`no server binary at ${bin}: run make first`);
  process.exit(2);
}
const names = wanted.length ? wanted : Object.keys(SUITES);
for (const n of names) if (!SUITES[n]) { console.error(`unknown suite ${n}`); process.exit(2); }

const h = new Harness();
// Whatever goes wrong, the run still ends with its closing line.
process.on("uncaughtException", (e) => {
  h.check("the test runner itself", false, e?.stack || String(e));
  console.log(`${h.passed} passed, ${h.failed} failed`);
  process.exit(1);
});
const t0 = Date.now();
const timings = {};
for (const n of names) {
  console.log(`\n== ${n}`);
  const t = Date.now();
  try {
    await SUITES[n](h, { bin });
  } catch (e) {
    h.check(`${n}: suite ran to its end`, false, e?.stack || String(e));
  }
  const mine = TMPDIRS.splice(0);
  const strays = await strayProcesses(mine);
  h.check(`${n}: no server process outlives its client`, strays.length === 0, strays.join("\n"));
  if (process.env.KEEP_CLIENT_TMP) console.log(`   (kept: ${mine.join(" ")})`);
  else for (const d of mine) fs.rmSync(d, { recursive: true, force: true });
  timings[n] = Date.now() - t;
  console.log(`   (${n}: ${(timings[n] / 1000).toFixed(1)} s)`);
}

// What each client showed its model, per tool.
for (const client of ["claude", "codex", "gemini", "opencode"]) {
  if (!h.report[client]) continue;
  console.log(`\nwhat ${client} showed its model:`);
  for (const [mode, seen] of Object.entries(h.report[client])) {
    console.log(`  ${mode}:`);
    for (const [tool, what] of Object.entries(seen)) console.log(`    ${tool.padEnd(24)} ${what}`);
  }
}
if (h.report.conformance) {
  const ran = Object.entries(h.report.conformance.ran);
  console.log(`\nconformance: ran ${ran.length} (${ran.map(([s, r]) => `${s} ${r.failed ? "FAILED" : "passed"}`).join(", ")}); ` +
              `not applicable ${Object.keys(h.report.conformance.not_applicable).length}`);
}

const reportDir = process.env.CLIENTS_REPORT_DIR || path.join(REPO, "build", "clients");
try {
  fs.mkdirSync(reportDir, { recursive: true });
  fs.writeFileSync(path.join(reportDir, "report.json"),
    JSON.stringify({ bin, seconds: (Date.now() - t0) / 1000, timings, passed: h.passed, failed: h.failed,
                     failures: h.failures, notes: h.notes, report: h.report }, null, 2));
  console.log(`\nreport: ${path.join(reportDir, "report.json")}`);
} catch (e) {
  console.log(`(could not write the report: ${e})`);
}
console.log(`total time ${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(`${h.passed} passed, ${h.failed} failed`);
process.exit(h.failed ? 1 : 0);
