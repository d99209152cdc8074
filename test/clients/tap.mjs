// A wire tap for a client that starts the server itself:
//   node tap.mjs LOG -- BIN ARGS...
// runs BIN with ARGS, passes stdin and stdout through unchanged, and appends
// every JSON-RPC line to LOG as {"dir": "out" | "in", "msg": ...}, seen
// from the client as sdk.mjs records them (out: from the client; readTap in
// lib.mjs reads it back). SIGINT, SIGTERM and SIGHUP go on to the server; the tap exits
// with the server's status. Used where a client's own logs do not say which
// protocol it spoke (Codex).
import { spawn } from "node:child_process";
import fs from "node:fs";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [log] = argv;
const [bin, ...args] = argv.slice(sep + 1);
const out = fs.openSync(log, "a");

function recorder(dir) {
  let buf = "";
  return (chunk) => {
    buf += chunk.toString("utf8");
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg;
      try { msg = JSON.parse(line); } catch { msg = { unparsed: line.slice(0, 200) }; }
      fs.writeSync(out, JSON.stringify({ dir, msg }) + "\n");
    }
  };
}

const child = spawn(bin, args, { stdio: ["pipe", "pipe", "inherit"] });
const fromClient = recorder("out");
const fromServer = recorder("in");
process.stdin.on("data", (c) => { fromClient(c); child.stdin.write(c); });
process.stdin.on("end", () => child.stdin.end());
child.stdin.on("error", () => {});
child.stdout.on("data", (c) => { fromServer(c); process.stdout.write(c); });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));

