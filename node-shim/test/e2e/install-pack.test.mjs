// Issue 20, scope "installable from source": a fresh checkout of node-shim/ (its files as git sees them,
// no dist/) packed with `npm pack` builds itself (the `prepack` script) and the tarball holds the built
// plugin, the page client, the overlay, the types and the config file's JSON Schema; installed into a
// fresh project with npm, it imports. The npm registry is reachable in CI (vite, the peer dependency,
// and the plugin's dependencies come from npm's cache when they are there: --prefer-offline).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { NPM, packFreshCheckout } from "../support/pack-support.mjs";

test("npm pack of a fresh checkout builds the plugin; the tarball installs into a new project and imports", async (t) => {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-pack-")));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let started = Date.now();
  const tarball = await packFreshCheckout(dir);
  t.diagnostic(`npm pack (with its build): ${Date.now() - started} ms`);
  assert.match(path.basename(tarball), /^vite-plugin-spotpatch-\d+\.\d+\.\d+\.tgz$/);

  const listed = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).split("\n").filter(Boolean);
  for (const file of [
    "dist/index.js",
    "dist/index.d.ts",
    "dist/protocol/client.js",
    "dist/overlay.js",
    "dist/overlay-loader.js",
    "dist/overlay-screenshot.js",
    "dist/protocol/spotpatch.schema.json",
    "virtual.d.ts",
    "spotpatch.config.schema.json",
    "package.json",
    "README.md",
  ]) {
    assert.ok(listed.includes(`package/${file}`), `the tarball holds ${file}`);
  }
  assert.ok(!listed.some((f) => f.startsWith("package/src/") || f.startsWith("package/test/")), "no sources or tests in the tarball");
  // npm runs none of its scripts when it installs the tarball (npm 11 warns about a `prepare` there).
  const { scripts } = JSON.parse(execFileSync("tar", ["xzfO", tarball, "package/package.json"], { encoding: "utf8" }));
  for (const name of ["preinstall", "install", "postinstall", "prepare"]) assert.equal(scripts[name], undefined, name);

  const app = path.join(dir, "app");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "fresh-app", private: true, type: "module" }));
  started = Date.now();
  execFileSync(NPM, ["install", "--save-dev", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], {
    cwd: app,
    stdio: ["ignore", "ignore", "pipe"],
  });
  t.diagnostic(`npm install of the tarball: ${Date.now() - started} ms`);
  const probe = `
    const { spotpatch } = await import("vite-plugin-spotpatch");
    const client = await import("vite-plugin-spotpatch/client");
    const names = spotpatch({ overlay: false }).map((p) => p.name);
    const fs = await import("node:fs");
    const schema = "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json"; // the "$schema" line's path
    console.log(JSON.stringify({ names, client: typeof client.createSpotPatchClient, schema: JSON.parse(fs.readFileSync(schema, "utf8")).title }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", probe], { cwd: app, encoding: "utf8" }));
  assert.deepEqual(out.names.slice(0, 2), ["spotpatch:server", "spotpatch:locate"]);
  assert.equal(out.client, "function");
  // The shipped file is the engine's generated config schema (protocol/spotpatch.config.schema.json).
  const shipped = JSON.parse(readFileSync(new URL("../../../protocol/spotpatch.config.schema.json", import.meta.url), "utf8"));
  assert.equal(out.schema, shipped.title);
  assert.match(out.schema, /spotpatch\.config\.json/);
});
