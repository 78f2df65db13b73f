// Breaker 12, F2: on Vite 6.0–6.4.1, 7.0–7.3.1 and 8.0.0–8.0.4 (GHSA-p9ff-h696-f583) another localhost
// page can read Vite's websocket token from /@vite/client, open the HMR websocket and `fetchModule`
// `virtual:spotpatch/client`, session token included. SpotPatch refuses to run on those versions: the
// gate's boundaries are unit-tested here, and a real (patched) Vite whose plugin context reports an
// affected version shows the refusal end to end: no token anywhere, `/__spotpatch/` answers
// `503 VITE_UNSUPPORTED`, the log says "update Vite" once. The real-old-Vite reproduction is a manual
// check (tests never reach the npm registry): see docs/security.md §8, "Vite versions".
import assert from "node:assert/strict";
import { test } from "node:test";

import react from "@vitejs/plugin-react";
import { createServer, version as installedVite } from "vite";

import { spotpatch } from "../../dist/index.js";
import { FIRST_PATCHED, runningViteVersion, viteVersionRefusal } from "../../dist/server/vite-version.js";
import { AGENT, CLIENT_URL, makeDemoProject, pageSession, recordingLogger, serverUrl } from "../support/support.mjs";

test("affected Vite versions are refused and name the first patched release of their major", () => {
  const refused = {
    "6.0.0": "6.4.2",
    "6.4.1": "6.4.2",
    "6.4.2-beta.0": "6.4.2",
    "7.0.0": "7.3.2",
    "7.3.1": "7.3.2",
    "8.0.0": "8.0.5",
    "8.0.4": "8.0.5",
    "8.0.5-beta.1": "8.0.5",
    "5.4.19": "6.4.2", // below the supported range
  };
  for (const [version, floor] of Object.entries(refused)) {
    const message = viteVersionRefusal(version);
    assert.ok(message, `${version} must be refused`);
    assert.match(message, new RegExp(`Update Vite to ≥ ${floor.replaceAll(".", "\\.")}\\.$`), version);
    assert.match(message, /GHSA-p9ff-h696-f583/);
  }
  for (const version of ["6.4.2", "6.5.0", "7.3.2", "7.4.0", "8.0.5", "8.0.5+build.3", "8.1.0", "8.3.8", "9.0.0", "9.0.0-alpha.1"]) {
    assert.equal(viteVersionRefusal(version), undefined, `${version} must be accepted`);
  }
  assert.deepEqual(FIRST_PATCHED, { 6: "6.4.2", 7: "7.3.2", 8: "8.0.5" });
});

test("a Vite version that cannot be read is refused (fail closed)", () => {
  for (const version of [undefined, "", "8", "8.0", "v8.0.5", "8.0.x", "latest"]) {
    assert.match(viteVersionRefusal(version) ?? "", /cannot tell which Vite version runs.*Update Vite to ≥ 8\.0\.5\.$/, String(version));
  }
});

test("the running Vite's version comes from the hook context, else the imported one", () => {
  assert.equal(runningViteVersion({ meta: { viteVersion: "8.0.4" } }, "8.3.8"), "8.0.4");
  assert.equal(runningViteVersion({ meta: {} }, "8.3.8"), "8.3.8");
  assert.equal(runningViteVersion(undefined, "8.3.8"), "8.3.8");
  assert.equal(runningViteVersion({ meta: { viteVersion: 8 } }, undefined), undefined);
});

/** The SpotPatch plugins, with `configureServer` seeing `meta.viteVersion = reported` (an older Vite). */
function spotpatchOnVite(reported) {
  const plugins = spotpatch({ command: [AGENT, "serve"] });
  const server = plugins.find((plugin) => plugin.name === "spotpatch:server");
  const configureServer = server.configureServer;
  server.configureServer = function (devServer) {
    return configureServer.call({ ...this, meta: { ...this?.meta, viteVersion: reported } }, devServer);
  };
  return plugins;
}

async function startOn(t, reported) {
  const project = makeDemoProject(t);
  const logger = recordingLogger();
  const server = await createServer({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: logger,
    clearScreen: false,
    optimizeDeps: { noDiscovery: true, include: [] },
    server: { host: "127.0.0.1", port: 0, strictPort: false },
    plugins: [spotpatchOnVite(reported), react()],
  });
  t.after(() => server.close());
  await server.listen();
  return { url: serverUrl(server), logger };
}

test("on an affected Vite SpotPatch makes no token, serves only the error and says so once", async (t) => {
  const { url, logger } = await startOn(t, "8.0.4");

  const html = await (await fetch(`${url}/`)).text();
  const module = await (await fetch(`${url}${CLIENT_URL}`)).text();
  assert.match(module, /console\.error\(.*SpotPatch is off: Vite 8\.0\.4 .*Update Vite to ≥ 8\.0\.5\./);
  assert.doesNotMatch(module, /createSpotPatchClient|token:/, "the client (and a token) must not be served");
  assert.doesNotMatch(html, /token/);
  const loader = await (await fetch(`${url}/@id/__x00__virtual:spotpatch/loader`)).text(); // the overlay's entry
  assert.match(loader, /console\.error\(.*Update Vite to ≥ 8\.0\.5\./);
  assert.doesNotMatch(loader, /virtual:spotpatch\/client|createSpotPatchClient/);

  const rpc = await fetch(`${url}/__spotpatch/rpc/health/get`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Origin: url },
    body: "{}",
  });
  assert.equal(rpc.status, 503);
  const body = await rpc.json();
  assert.equal(body.error.code, "VITE_UNSUPPORTED");
  assert.match(body.error.message, /Update Vite to ≥ 8\.0\.5\./);

  const said = logger.lines.filter((line) => line.msg.includes("Update Vite to ≥ 8.0.5"));
  assert.equal(said.length, 1, logger.text());
  assert.equal(said[0].level, "error");
});

test("on the installed (patched) Vite SpotPatch runs as before", async (t) => {
  assert.equal(viteVersionRefusal(installedVite), undefined, `the dev dependency ${installedVite} must be a patched Vite`);
  const { url, logger } = await startOn(t, installedVite);
  const { token } = await pageSession(url);
  assert.ok(token.length >= 32);
  assert.doesNotMatch(logger.text(), /Update Vite/);
});
