// Packing the plugin as a user would from a fresh clone (install-pack.test.mjs; init-templates.test.mjs copies one):
// the repository's files as git sees them (tracked, plus new files not ignored), copied without dist/,
// build/ or node_modules, and `npm pack` there (its `prepack` script builds dist/).
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";

import { NODE_SHIM, REPO } from "./support.mjs";

export const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

/** The files of `dir` (default node-shim/) a fresh clone has, as paths relative to `dir`. */
export function checkoutFiles(dir = NODE_SHIM) {
  return execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "."], { cwd: dir, encoding: "utf8" })
    .split("\0")
    .filter((file) => file && existsSync(path.join(dir, file)));
}

/** A fresh-clone copy of the whole repository at `dest` (no .venv, node_modules, dist); returns `dest`. */
export function copyCheckout(dest) {
  for (const file of checkoutFiles(REPO)) {
    mkdirSync(path.dirname(path.join(dest, file)), { recursive: true });
    cpSync(path.join(REPO, file), path.join(dest, file));
  }
  return dest;
}

/**
 * `npm pack` in `<dir>/node-shim`, a fresh copy of node-shim/ unless `copy` is given (its node_modules
 * linked to this checkout's: what `npm ci` there would install; no dist/); returns the tarball's path.
 */
export async function packFreshCheckout(dir, copy = path.join(dir, "node-shim")) {
  if (!existsSync(copy)) {
    for (const file of checkoutFiles()) {
      mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
      cpSync(path.join(NODE_SHIM, file), path.join(copy, file));
    }
  }
  assert.equal(existsSync(path.join(copy, "dist")), false, "the copy starts without dist/");
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(copy, "node_modules"), "dir");
  const out = path.join(dir, "packed");
  mkdirSync(out);
  await promisify(execFile)(NPM, ["pack", "--pack-destination", out, "--loglevel=error"], { cwd: copy, maxBuffer: 64 << 20 });
  const [tarball] = readdirSync(out);
  return path.join(out, tarball);
}

