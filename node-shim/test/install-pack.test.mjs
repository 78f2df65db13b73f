// Issue 20, scope "installable from source": a fresh checkout of node-shim/ (its files as git sees them,
// no dist/) packed with `npm pack` builds itself (the `prepare` script) and the tarball holds the built
// plugin, the page client, the overlay, the types and the config file's JSON Schema; installed into a
// fresh project with npm, it imports. The npm registry is reachable in CI (vite, the peer dependency,
// and the plugin's dependencies come from npm's cache when they are there: --prefer-offline).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { NODE_SHIM } from "./support.mjs";

const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

/** The files of node-shim/ a fresh clone has (tracked, plus new files not ignored), as paths relative to it. */
export function checkoutFiles() {
  return execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "."], { cwd: NODE_SHIM, encoding: "utf8" })
    .split("\0")
    .filter((file) => file && existsSync(path.join(NODE_SHIM, file)));
}

/** `npm pack` of a fresh copy of node-shim/ (its node_modules linked, no dist/); returns the tarball's path. */
export function packFreshCheckout(dir) {
  const copy = path.join(dir, "node-shim");
  for (const file of checkoutFiles()) {
    mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
    cpSync(path.join(NODE_SHIM, file), path.join(copy, file));
  }
  assert.equal(existsSync(path.join(copy, "dist")), false, "the copy starts without dist/");
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(copy, "node_modules"), "dir");
  const out = path.join(dir, "packed");
  mkdirSync(out);
  execFileSync(NPM, ["pack", "--pack-destination", out, "--loglevel=error"], { cwd: copy, stdio: ["ignore", "ignore", "pipe"] });
  const [tarball] = readdirSync(out);
  return path.join(out, tarball);
}

test("npm pack of a fresh checkout builds the plugin; the tarball installs into a new project and imports", async (t) => {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-pack-")));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let started = Date.now();
  const tarball = packFreshCheckout(dir);
  t.diagnostic(`npm pack (with its build): ${Date.now() - started} ms`);
  assert.match(path.basename(tarball), /^vite-plugin-spotpatch-\d+\.\d+\.\d+\.tgz$/);

  const listed = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).split("\n").filter(Boolean);
  for (const file of [
    "dist/index.js",
    "dist/index.d.ts",
    "dist/client.js",
    "dist/overlay.js",
    "dist/overlay-loader.js",
    "dist/spotpatch.schema.json",
    "virtual.d.ts",
    "spotpatch.config.schema.json",
    "package.json",
    "README.md",
  ]) {
    assert.ok(listed.includes(`package/${file}`), `the tarball holds ${file}`);
  }
  assert.ok(!listed.some((f) => f.startsWith("package/src/") || f.startsWith("package/test/")), "no sources or tests in the tarball");

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
  assert.equal(out.schema, "TrustedConfig");
});
