// The MCP Inspector CLI (@modelcontextprotocol/inspector --cli) against the
// stdio server: it lists the tools and calls each one. Every invocation starts
// a new server process, so no call relies on an earlier one's session.
import fs from "node:fs";
import path from "node:path";
import { run, tmpdir, cleanEnv, isPng, BIN_DIR, TOOLS } from "./lib.mjs";

export async function runInspector(h, { bin }) {
  // The project lies inside the 0700 temporary directory, as a user's would.
  const root = path.join(tmpdir("inspector"), "project");
  fs.mkdirSync(root);
  const inspector = path.join(BIN_DIR, "inspector");
  // HOME beside the project, not the project: a server started in the
  // user's home directory refuses to run code.
  const home = path.join(path.dirname(root), "home");
  fs.mkdirSync(home, { recursive: true });
  const env = cleanEnv({ HOME: home });
  const call = async (args, label) => {
    const r = await run(inspector, ["--cli", bin, "--root", root, "-q", ...args], { cwd: root, env, timeout: 60000 });
    let json = null;
    try { json = JSON.parse(r.stdout); } catch {}
    if (json === null) h.check(`inspector: ${label}: output is JSON`, false, `code ${r.code}\n${r.stdout.slice(0, 500)}\n${r.stderr.slice(-1000)}`);
    return { ...r, json };
  };
  const seen = {};

  const list = await call(["--method", "tools/list", "--strict"], "tools/list");
  const tools = list.json?.tools ?? [];
  h.check("inspector: tools/list lists execute_python, list_artifacts, verify_outputs",
    JSON.stringify(tools.map((t) => t.name).sort()) === JSON.stringify([...TOOLS].sort()), JSON.stringify(tools.map((t) => t.name)));
  h.check("inspector: --strict finds no schema portability error", list.code === 0, list.stderr.slice(-1000));
  const ex = tools.find((t) => t.name === "execute_python");
  h.check("inspector: execute_python requires code (a string)",
    ex?.inputSchema?.required?.includes("code") && ex?.inputSchema?.properties?.code?.type === "string", JSON.stringify(ex?.inputSchema));
  h.check("inspector: list_artifacts is annotated readOnlyHint",
    tools.find((t) => t.name === "list_artifacts")?.annotations?.readOnlyHint === true, JSON.stringify(tools.map((t) => t.annotations)));

  const ok = await call(["--method", "tools/call", "--tool-name", "execute_python", "--tool-arg", "code=print('hello from inspector')\n6*7"], "execute_python");
  const okText = ok.json?.content?.[0]?.text ?? "";
  h.check("inspector: execute_python returns stdout and the value", ok.json?.isError === false &&
    /stdout:\nhello from inspector\n/.test(okText) && /result:\n42\b/.test(okText), JSON.stringify(ok.json)?.slice(0, 500));
  seen.execute_python = (ok.json?.content ?? []).map((b) => b.type).join(", ");

  const chart = await call(["--method", "tools/call", "--tool-name", "execute_python", "--tool-arg",
    "code=import matplotlib.pyplot as plt\nplt.plot([1, 4, 9]); plt.show()"], "execute_python chart");
  const img = chart.json?.content?.find((b) => b.type === "image");
  h.check("inspector: a chart comes back as a PNG image block",
    img?.mimeType === "image/png" && isPng(Buffer.from(img.data || "", "base64")), JSON.stringify(chart.json?.content?.map((b) => b.type)));
  seen["execute_python (chart)"] = (chart.json?.content ?? []).map((b) => b.type).join(", ");

  fs.mkdirSync(path.join(root, "workspace", "outputs"), { recursive: true });
  fs.writeFileSync(path.join(root, "workspace", "outputs", "table.csv"), "a,b\n1,2\n3,4\n");
  const la = await call(["--method", "tools/call", "--tool-name", "list_artifacts", "--tool-arg", "pattern=*.csv"], "list_artifacts");
  const sc = la.json?.structuredContent;
  h.check("inspector: list_artifacts returns structuredContent with the file",
    sc?.count === 1 && sc?.artifacts?.[0]?.path === "workspace/outputs/table.csv" && /^[0-9a-f]{64}$/.test(sc?.artifacts?.[0]?.sha256 ?? ""),
    JSON.stringify(la.json)?.slice(0, 600));
  h.check("inspector: list_artifacts' text block is the same JSON",
    (() => { try { return JSON.stringify(JSON.parse(la.json.content[0].text)) === JSON.stringify(sc); } catch { return false; } })(),
    la.json?.content?.[0]?.text?.slice(0, 300));
  seen.list_artifacts = `${(la.json?.content ?? []).map((b) => b.type).join(", ")} + structuredContent`;

  const vo = await call(["--method", "tools/call", "--tool-name", "verify_outputs", "--tool-args-json",
    JSON.stringify({ files: [{ path: "workspace/outputs/table.csv", min_rows: 2 }], require_success: false })], "verify_outputs");
  h.check("inspector: verify_outputs passes the CSV", vo.json?.structuredContent?.status === "completed" &&
    vo.json?.structuredContent?.failed === 0 && vo.json?.isError === false, JSON.stringify(vo.json)?.slice(0, 600));
  const vf = await call(["--method", "tools/call", "--tool-name", "verify_outputs", "--tool-args-json",
    JSON.stringify({ files: ["workspace/outputs/missing.png"], require_success: false, write_summary: false })], "verify_outputs (missing)");
  h.check("inspector: verify_outputs fails a missing file as a normal result", vf.json?.structuredContent?.status === "failed" &&
    vf.json?.isError === false, JSON.stringify(vf.json)?.slice(0, 600));
  seen.verify_outputs = `${(vo.json?.content ?? []).map((b) => b.type).join(", ")} + structuredContent`;

  const err = await call(["--method", "tools/call", "--tool-name", "execute_python", "--tool-arg", "code=1/0"], "execute_python error");
  h.check("inspector: 1/0 is a result with isError: true", err.json?.isError === true &&
    /ZeroDivisionError/.test(err.json?.content?.[0]?.text ?? ""), JSON.stringify(err.json)?.slice(0, 500));

  const res = await call(["--method", "resources/list"], "resources/list");
  const csv = res.json?.resources?.find((r) => r.uri?.endsWith("/workspace/outputs/table.csv"));
  h.check("inspector: resources/list has the workspace file", csv && csv.uri.startsWith("file://"), JSON.stringify(res.json)?.slice(0, 500));
  if (csv) {
    const rd = await call(["--method", "resources/read", "--uri", csv.uri], "resources/read");
    h.check("inspector: resources/read returns its text", rd.json?.contents?.[0]?.text === "a,b\n1,2\n3,4\n", JSON.stringify(rd.json)?.slice(0, 300));
  }
  // A project directory that is itself private (mode 0700, as mktemp -d
  // makes it): an earlier jail could not mount its workspace.
  const priv = tmpdir("inspector-0700");
  const pr = await run(inspector, ["--cli", bin, "--root", priv, "-q", "--method", "tools/call", "--tool-name", "execute_python",
    "--tool-arg", "code=6*7"], { cwd: priv, env, timeout: 60000 });
  let prText = "";
  try { prText = JSON.parse(pr.stdout).content[0].text; } catch {}
  h.check("inspector: execute_python works when ROOT itself is mode 0700", /result:\n42\b/.test(prText), pr.stdout.slice(0, 500));
  const lv = await run(inspector, ["--cli", bin, "--root", root, "-q", "--method", "logging/setLevel", "--log-level", "debug"], { cwd: root, env, timeout: 60000 });
  h.check("inspector: logging/setLevel is accepted", lv.code === 0, lv.stdout + lv.stderr.slice(-500));
  h.report.inspector = seen;
}
