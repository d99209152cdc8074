// --venv: a virtual environment made by Debian's python3 with
// --system-site-packages, holding a small pure-Python package made here,
// is importable in a session and read-only to the Python code.
import fs from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { run, tmpdir, cleanEnv } from "./lib.mjs";

const PY = "/usr/bin/python3";

export async function runVenv(h, { bin }) {
  const base = tmpdir("venv");
  const venv = path.join(base, "venv");
  const root = path.join(base, "project");
  fs.mkdirSync(root, { recursive: true });
  const mk = await run(PY, ["-m", "venv", "--system-site-packages", "--without-pip", venv], { env: cleanEnv(), timeout: 120000 });
  if (!h.check("venv: python3 -m venv --system-site-packages works", mk.code === 0, mk.stderr)) return;
  const libs = fs.readdirSync(path.join(venv, "lib")).filter((d) => d.startsWith("python3"));
  const site = path.join(venv, "lib", libs[0], "site-packages");
  const pkg = path.join(site, "psm_venv_probe");
  fs.mkdirSync(pkg, { recursive: true });
  fs.writeFileSync(path.join(pkg, "__init__.py"),
    "\"\"\"A package that only this test's virtual environment has.\"\"\"\nMAGIC = 'venv-probe-ok'\n\ndef twice(x):\n    return 2 * x\n");
  fs.mkdirSync(path.join(pkg + "-0.1.dist-info"));
  fs.writeFileSync(path.join(pkg + "-0.1.dist-info", "METADATA"), "Metadata-Version: 2.1\nName: psm-venv-probe\nVersion: 0.1\n");
  fs.writeFileSync(path.join(pkg + "-0.1.dist-info", "RECORD"), "");

  const transport = new StdioClientTransport({ command: bin, args: ["--root", root, "--venv", venv, "--log-level", "warning"],
                                               env: cleanEnv({ HOME: base }), stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "venv-test", version: "1.0.0" });
  try {
    await client.connect(transport);
    const exec = async (code) => {
      const r = await client.callTool({ name: "execute_python", arguments: { code } });
      return { r, text: r.content?.find((b) => b.type === "text")?.text ?? "" };
    };
    const a = await exec("import psm_venv_probe, importlib.metadata\n" +
      "print(psm_venv_probe.MAGIC, psm_venv_probe.twice(21))\n" +
      "print(importlib.metadata.version('psm-venv-probe'))\npsm_venv_probe.__file__");
    h.check("venv: the venv's package imports in a session", a.r.isError === false && /venv-probe-ok 42/.test(a.text), a.text);
    h.check("venv: it is imported from the venv's site-packages", a.text.includes(pkg), a.text);
    h.check("venv: its metadata is visible (importlib.metadata)", /\n0\.1\n/.test(a.text), a.text);
    const b = await exec("import numpy, matplotlib\nprint('system-site ok', numpy.__name__)");
    h.check("venv: system site-packages (numpy, matplotlib) still import", b.r.isError === false && /system-site ok numpy/.test(b.text), b.text);
    const targets = [path.join(pkg, "evil.py"), path.join(site, "dropped.pth"), path.join(venv, "newfile")];
    const c = await exec(targets.map((t, i) => [
      `try:`,
      `    open(${JSON.stringify(t)}, 'w').write('x = 1\\n')`,
      `    print('WRITE-${i}-SUCCEEDED')`,
      `except OSError as e:`,
      `    print('WRITE-${i}-REFUSED', e.errno, type(e).__name__)`,
    ].join("\n")).join("\n"));
    const wrote = targets.filter((t) => fs.existsSync(t));
    h.check("venv: writing into the venv from Python fails (read-only)", !/SUCCEEDED/.test(c.text) && wrote.length === 0,
      `${c.text}\nfiles written: ${wrote.join(", ")}`);
    const d = await exec("import os\nos.makedirs('workspace/outputs', exist_ok=True)\nopen('workspace/outputs/ok.txt', 'w').write('fine')\n'written'");
    h.check("venv: the workspace stays writable", /result:\n'written'/.test(d.text), d.text);
  } catch (e) {
    h.check("venv: server session", false, `${e?.stack || e}\n${stderr.slice(-1500)}`);
  } finally {
    await client.close().catch(() => {});
  }
}
