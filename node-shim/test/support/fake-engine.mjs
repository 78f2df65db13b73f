// A stand-in engine for the process-control tests (engine.test.mjs): speaks just enough of the
// protocol over stdio. Usage: node fake-engine.mjs MODE
//   ok        — answers initialize / health/get / shutdown, exits on `exit`; logs "fake engine up" to stderr
//   exit      — exits with code 3 before reading anything
//   stubborn  — like ok, but never answers shutdown, ignores exit and SIGTERM, and keeps a grandchild
//               (its pid is printed to stderr as "grandchild <pid>")
//   flood     — announces a 1 TB frame on stdout and streams zeros (a wrong `command`, a broken engine)
import { spawn } from "node:child_process";

import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

const mode = process.argv[2];
if (mode === "exit") process.exit(3);
if (mode === "flood") {
  const zeros = Buffer.alloc(1 << 20);
  const more = () => {
    while (process.stdout.write(zeros));
    process.stdout.once("drain", more);
  };
  process.stdout.write("Content-Length: 1000000000000\r\n\r\n");
  more();
}

const connection = createMessageConnection(new StreamMessageReader(process.stdin), new StreamMessageWriter(process.stdout));
connection.onRequest("initialize", () => ({
  protocolVersion: "0.1",
  serverInfo: { name: "fake-engine", version: "0" },
  capabilities: { aiEnabled: false, applyModes: ["review"], tools: [] },
}));
connection.onRequest("health/get", () => ({ state: "clean", reasons: [], counts: { staged: 0, unstaged: 0, untracked: 0, conflicted: 0 } }));
connection.onRequest("shutdown", () => (mode === "stubborn" ? new Promise(() => {}) : null));
connection.onNotification("exit", () => {
  if (mode !== "stubborn") process.exit(0);
});
connection.listen();
process.stderr.write("fake engine up\n");
if (mode === "stubborn") {
  process.on("SIGTERM", () => {});
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  process.stderr.write(`grandchild ${child.pid}\n`);
  process.stdin.on("end", () => {}); // keep running after EOF
  setInterval(() => {}, 1000);
}
