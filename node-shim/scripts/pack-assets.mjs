// The two files the Python package carries (spotpatch_agent/init/assets/, docs/architecture.md "Packaging"):
//   node scripts/pack-assets.mjs --out <dir>
// writes into <dir> the plugin's tarball, vite-plugin-spotpatch-<version>.tgz (`npm pack` of node-shim/ with
// its built dist/), and config-edit.mjs (the vite.config editor, bundled by scripts/build-config-edit.mjs);
// removes older vite-plugin-spotpatch-*.tgz there; prints the two file names, one a line (npm's output goes
// to stderr). node-shim's node_modules is installed (`npm ci`) only when it is missing. The plugin is built
// once: `npm run build`, then `npm pack --ignore-scripts` (its `prepack` would build it a second time).
// Run by the Python build (spotpatch_agent/init/_build.py) and by `spotpatch-agent init` in a source
// checkout. On any failure: exit 1 with a one-line reason on stderr, <dir> as it was (exit 2: usage).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const NODE_SHIM = fileURLToPath(new URL("..", import.meta.url));
const CONFIG_EDIT_SCRIPT = path.join(NODE_SHIM, "scripts", "build-config-edit.mjs");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const TARBALL = /^vite-plugin-spotpatch-.*\.tgz$/;
const EDITOR = "config-edit.mjs";

class Failure extends Error {
  constructor(reason, code = 1) {
    super(reason);
    this.code = code;
  }
}

function fail(reason, code = 1) {
  throw new Failure(reason, code);
}

/** Runs `command` in node-shim/; its stdout goes to our stderr unless `capture`; returns spawnSync's result. */
function run(command, args, { capture = false } = {}) {
  const done = spawnSync(command, args, {
    cwd: NODE_SHIM,
    stdio: ["ignore", capture ? "pipe" : 2, 2],
    encoding: "utf8",
    maxBuffer: 64 << 20,
    shell: process.platform === "win32" && command === NPM,
  });
  if (done.error?.code === "ENOENT" && command === NPM) {
    fail("npm is not on PATH: Node.js 20 or newer with npm is needed to build the Vite plugin");
  }
  if (done.error) fail(`\`${path.basename(command)} ${args.join(" ")}\` could not start: ${done.error.message}`);
  return done;
}

function main() {
  const argv = process.argv.slice(2);
  if (argv.length !== 2 || argv[0] !== "--out" || !argv[1]) fail("usage: node scripts/pack-assets.mjs --out <dir>", 2);
  const out = path.resolve(argv[1]);
  if (!existsSync(CONFIG_EDIT_SCRIPT)) {
    fail("node-shim/scripts/build-config-edit.mjs is missing: cannot bundle the config editor (config-edit.mjs)");
  }
  if (run(NPM, ["--version"], { capture: true }).status !== 0) fail("`npm --version` failed: npm is needed to build the Vite plugin");

  if (!existsSync(path.join(NODE_SHIM, "node_modules"))) {
    process.stderr.write("pack-assets: node-shim has no node_modules: running `npm ci` there (once)…\n");
    const ci = run(NPM, ["ci", "--no-audit", "--no-fund", "--loglevel=error"]);
    if (ci.status !== 0) fail(`\`npm ci\` in node-shim/ failed (exit ${ci.status}): the npm registry may be unreachable`);
  }
  const build = run(NPM, ["run", "build", "--silent"]);
  if (build.status !== 0) fail(`\`npm run build\` in node-shim/ failed (exit ${build.status})`);

  mkdirSync(out, { recursive: true });
  // Both files are made in a folder inside <dir> and moved in at the end: a failure leaves <dir> as it was.
  const staging = mkdtempSync(path.join(out, ".pack-"));
  try {
    const pack = run(NPM, ["pack", "--ignore-scripts", "--loglevel=error", "--pack-destination", staging], { capture: true });
    if (pack.status !== 0) fail(`\`npm pack\` in node-shim/ failed (exit ${pack.status})`);
    const packed = readdirSync(staging).filter((name) => TARBALL.test(name));
    if (packed.length !== 1) fail(`\`npm pack\` wrote ${packed.length} tarballs, expected one`);
    const [tarball] = packed;

    const editor = run(process.execPath, [CONFIG_EDIT_SCRIPT, "--out", path.join(staging, EDITOR)]);
    if (editor.status !== 0) fail(`node-shim/scripts/build-config-edit.mjs failed (exit ${editor.status})`);
    if (!existsSync(path.join(staging, EDITOR))) fail(`node-shim/scripts/build-config-edit.mjs wrote no ${EDITOR}`);

    for (const name of readdirSync(out)) {
      if (TARBALL.test(name)) rmSync(path.join(out, name), { force: true });
    }
    renameSync(path.join(staging, tarball), path.join(out, tarball));
    renameSync(path.join(staging, EDITOR), path.join(out, EDITOR));
    process.stdout.write(`${tarball}\n${EDITOR}\n`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

try {
  main();
} catch (error) {
  if (!(error instanceof Failure)) throw error;
  process.stderr.write(`pack-assets: ${error.message}\n`);
  process.exitCode = error.code;
}
