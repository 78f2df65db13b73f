// `spotpatch-agent demo --serve` starts this: `vite dev` of the demo copy with this repository's plugin
// (the overlay on) and React, the engine run as `<python> -m spotpatch_agent serve`. Not for direct use.
//
//   node scripts/demo-serve.mjs --root DIR --cache-dir DIR --config FILE --python PATH [--host H] [--port N]
//
// `--config` is a JSON file with the trusted configuration (providers, checks: key variable names, no keys).
// Prints one line `SPOTPATCH_DEMO_URL http://HOST:PORT/` once the server listens. SIGINT/SIGTERM (or the
// parent's exit) close the dev server, which stops the engine; then the process exits 0.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import react from "@vitejs/plugin-react";
import { createServer } from "vite";

import { spotpatch } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    root: { type: "string" },
    "cache-dir": { type: "string" },
    config: { type: "string" },
    python: { type: "string" },
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "5173" },
  },
  strict: true,
});
for (const name of ["root", "cache-dir", "config", "python"]) {
  if (!values[name]) {
    console.error(`demo-serve: --${name} is required`);
    process.exit(2);
  }
}

const config = JSON.parse(readFileSync(values.config, "utf8"));
const server = await createServer({
  configFile: false,
  root: values.root,
  cacheDir: values["cache-dir"],
  clearScreen: false,
  server: { host: values.host, port: Number(values.port), strictPort: false },
  plugins: [spotpatch({ command: [values.python, "-m", "spotpatch_agent", "serve"], ...config }), react()],
});
await server.listen();
const { port } = server.httpServer.address();
console.log(`SPOTPATCH_DEMO_URL http://${values.host}:${port}/`);

let closing;
const stop = (code) => {
  closing ??= server.close().then(
    () => process.exit(code),
    (error) => {
      console.error(`demo-serve: closing the dev server failed: ${error?.message ?? error}`);
      process.exit(1);
    },
  );
  return closing;
};
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => void stop(0));
// A parent that died without signalling (e.g. SIGKILL) must not leave the dev server and engine behind.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) void stop(0);
}, 500).unref();
