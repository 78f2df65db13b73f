// Issue 29, acceptance 1 (and 4): `pip install` brings the plugin, `spotpatch-agent init` wires it up — on
// fresh `npm create vite` apps for react-ts, vue-ts, svelte-ts, preact-ts, solid-ts and vanilla-ts (npm),
// react-ts with pnpm and vue-ts with yarn: `init --yes`, the package manager's dev command, the overlay loads,
// a scripted job is picked, submitted, reviewed, applied and reverted through the page (Debian's Chromium);
// `init` again changes nothing; `init --undo` puts every file back byte for byte.
//
// Once per run: a fresh copy of this checkout (git's files; node-shim/node_modules linked to this checkout's,
// what `npm ci` there would install), the engine's WHEEL built from it the way pip builds one (the build hook,
// spotpatch_agent/init/_build.py, packs the plugin into it), and ONE virtualenv outside every app with that
// wheel installed offline (a wheelhouse of its dependencies made with the repository's .venv). That installed
// package is not a checkout: it has no node-shim/ to build from, so init must use the tarball the wheel carries.
//
// Per app: `npm create --yes vite@<create-vite of node-shim's devDependencies>` (the templates the scripted
// provider's edits know; `--yes`: no TTY), then its package manager's install (npm with --prefer-offline;
// pnpm and yarn are corepack's, at the versions this corepack knows: COREPACK_DEFAULT_TO_LATEST=0 makes them
// reproducible and skips the "latest" look-up, which a registry mirror without signatures fails). Every
// command runs with PATH holding no spotpatch-agent and its own XDG_CONFIG_HOME, so the plugin can only find
// the engine through the record init writes there (one folder per app: an app stands for a user's machine,
// and one app's `init --undo` must not take another's record away). The apps are made and set up at once
// (they mostly wait on the registry); the page jobs run one after another.
//
// The test's own change: the scripted provider goes into spotpatch.config.json (the file init writes for the
// user's providers, `providers: []`), committed as a user would. Putting it there, and not in vite.config.ts
// as a plugin option, leaves init's other edits as init made them; undo removes spotpatch.config.json only
// while it holds init's bytes, so the test first sees undo refuse (nothing changed), then puts init's bytes
// back — the one file it changed — and undo must restore everything else by itself.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";

import { HOST, launchBrowser, newPage, shot } from "../support/browser-support.mjs";
import { openPanel, panelOf } from "../support/overlay-flow-helpers.mjs";
import { NPM, copyCheckout } from "../support/pack-support.mjs";
import { NODE_SHIM, PYTHON, REPO, isAlive, providerConfig, startProvider, waitFor } from "../support/support.mjs";

const PACKAGE = JSON.parse(readFileSync(path.join(NODE_SHIM, "package.json"), "utf8"));
const CREATE_VITE = JSON.parse(readFileSync(path.join(NODE_SHIM, "node_modules", "create-vite", "package.json"), "utf8")).version;
const TARBALL = `${PACKAGE.name}-${PACKAGE.version}.tgz`;
const ASSETS = "spotpatch_agent/init/assets";
const GIT_ID = ["-c", "user.name=SpotPatch Test", "-c", "user.email=test@spotpatch.invalid"];
const INSTALL_TIMEOUT_MS = 600_000;

/** Each package manager: its install of a fresh app, and the dev command init's "Next" line names. */
const PMS = {
  npm: { install: ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], dev: ["run", "dev"] },
  pnpm: { install: ["install"], dev: ["dev"] },
  yarn: { install: ["install", "--non-interactive"], dev: ["dev"] },
};

/**
 * Each app: its template, package manager, framework plugin call in vite.config.ts (vanilla-ts has no config:
 * init creates one), the file the scripted provider edits, and the text it writes.
 */
const APPS = {
  "react-ts": { template: "react-ts", pm: "npm", plugin: "react()", file: "src/App.tsx", changed: "Clicks: {count}" },
  "vue-ts": { template: "vue-ts", pm: "npm", plugin: "vue()", file: "src/components/HelloWorld.vue", changed: "Clicks: {{ count }}" },
  "svelte-ts": { template: "svelte-ts", pm: "npm", plugin: "svelte()", file: "src/lib/Counter.svelte", changed: "Clicks: {count}" },
  "preact-ts": { template: "preact-ts", pm: "npm", plugin: "preact()", file: "src/app.tsx", changed: "Clicks: {count}" },
  "solid-ts": { template: "solid-ts", pm: "npm", plugin: "solid()", file: "src/App.tsx", changed: "Clicks: {count()}" },
  "vanilla-ts": { template: "vanilla-ts", pm: "npm", plugin: null, file: "src/counter.ts", changed: "Clicks: ${counter}" },
  "react-ts-pnpm": { template: "react-ts", pm: "pnpm", plugin: "react()", file: "src/App.tsx", changed: "Clicks: {count}" },
  "vue-ts-yarn": { template: "vue-ts", pm: "yarn", plugin: "vue()", file: "src/components/HelloWorld.vue", changed: "Clicks: {{ count }}" },
};

let work;
let engine;
const apps = {};
const timings = {};

/** Timed `fn()`: its milliseconds land in `timings[name]`. */
async function timed(name, fn) {
  const started = Date.now();
  try {
    return await fn();
  } finally {
    timings[name] = Date.now() - started;
  }
}

/** `file args` to its end: `{code, stdout, stderr}`; never throws on a non-zero exit (`check` does). */
function exec(file, args, { check = true, timeout = INSTALL_TIMEOUT_MS, ...options } = {}) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 64 << 20, timeout, ...options }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      if (check && code !== 0) {
        reject(new Error(`${path.basename(file)} ${args.join(" ")} failed (${error.code ?? error.signal}) in ${options.cwd ?? "."}:\n${stderr}\n${stdout}`));
      } else resolve({ code, stdout, stderr });
    });
  });
}

/** PATH without any directory holding a spotpatch-agent (the plugin must find the engine through init's record). */
function pathWithoutEngine() {
  return (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((dir) => dir && !existsSync(path.join(dir, "spotpatch-agent")))
    .join(path.delimiter);
}

/** The environment of every command: a user's shell with corepack's pnpm and yarn, no engine on PATH. */
function baseEnv(bin) {
  const env = {
    ...process.env,
    PATH: [bin, pathWithoutEngine()].join(path.delimiter),
    NO_COLOR: "1",
    COREPACK_HOME: path.join(work, "corepack"),
    COREPACK_DEFAULT_TO_LATEST: "0",
    COREPACK_ENABLE_DOWNLOAD_PROMPT: "0",
    COREPACK_ENABLE_AUTO_PIN: "0",
  };
  // Not a user's shell: a virtualenv this run was started from, a real provider key (init would write an
  // OpenAI provider), and what `npm test` tells the scripts it runs (pnpm and yarn read the user agent).
  for (const key of Object.keys(env)) {
    if (/^(VIRTUAL_ENV|OPENAI_API_KEY|INIT_CWD)$|^npm_(config_user_agent|lifecycle_|package_|command|execpath|node_execpath)/.test(key)) delete env[key];
  }
  return env;
}

/** Every file under `dir` but its top-level node_modules/ and .git/, as path → bytes (a symlink: its target). */
function snapshot(dir) {
  const files = new Map();
  const walk = (rel) => {
    for (const name of readdirSync(path.join(dir, rel)).sort()) {
      const file = rel ? `${rel}/${name}` : name;
      if (!rel && (name === "node_modules" || name === ".git")) continue;
      const stat = lstatSync(path.join(dir, file));
      if (stat.isDirectory()) walk(file);
      else files.set(file, stat.isSymbolicLink() ? Buffer.from(`-> ${readlinkSync(path.join(dir, file))}`) : readFileSync(path.join(dir, file)));
    }
  };
  walk("");
  return files;
}

/** How snapshot `actual` differs from `expected` (empty when byte for byte the same). */
function differences(expected, actual) {
  const out = [];
  for (const [file, bytes] of expected) {
    if (!actual.has(file)) out.push(`missing ${file}`);
    else if (!bytes.equals(actual.get(file))) out.push(`changed ${file}`);
  }
  for (const file of actual.keys()) if (!expected.has(file)) out.push(`added ${file}`);
  return out;
}

before(() => {
  work = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-init-")));
  const bin = path.join(work, "bin");
  mkdirSync(bin);
  const env = baseEnv(bin);
  // pnpm and yarn on a PATH this test controls (corepack downloads them when first run).
  const corepack = timed("corepack", () => exec("corepack", ["enable", "--install-directory", bin, "pnpm", "yarn"], { env }));
  engine = timed("engine: wheel, wheelhouse, venv", () => installEngine(env));
  let creating = Promise.resolve();
  for (const [name, spec] of Object.entries(APPS)) {
    const created = (creating = creating.then(() => timed(`${name}: npm create`, () => createApp(name, spec, env))));
    apps[name] = (async () => {
      const app = await created;
      const appEnv = { ...env, XDG_CONFIG_HOME: path.join(work, name, "config") };
      if (spec.pm !== "npm") await corepack;
      await timed(`${name}: ${spec.pm} install`, () => exec(spec.pm, PMS[spec.pm].install, { cwd: app, env: appEnv }));
      const s0 = snapshot(app);
      const { agent } = await engine;
      const init = await timed(`${name}: init`, () => exec(agent, ["init", "--yes"], { cwd: app, env: appEnv, check: false }));
      const s1 = snapshot(app);
      if (init.code === 0) {
        // What init's "Next" line tells the user (the whole template too: init --yes made the repository).
        await exec("git", ["add", "-A"], { cwd: app });
        await exec("git", [...GIT_ID, "commit", "-q", "-m", "Add SpotPatch"], { cwd: app });
      }
      return { app, env: appEnv, s0, s1, init };
    })();
    apps[name].catch(() => undefined); // reported by that app's test
  }
  engine.catch(() => undefined); // reported by the wheel's test
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** `npm create vite` for `spec.template` in `<work>/<name>/my-app`; returns the app's path. */
async function createApp(name, spec, env) {
  const base = path.join(work, name);
  mkdirSync(base);
  await exec(NPM, ["create", "--yes", `vite@${CREATE_VITE}`, "my-app", "--", "--template", spec.template, "--no-interactive", "--no-immediate"], { cwd: base, env });
  return path.join(base, "my-app");
}

/** The wheel from a fresh copy of the checkout, installed offline into a virtualenv outside every app. */
async function installEngine(env) {
  const checkout = copyCheckout(path.join(work, "checkout"));
  assert.equal(existsSync(path.join(checkout, ASSETS)), false, "the copy carries no built assets");
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(checkout, "node-shim", "node_modules"), "dir");
  const wheels = path.join(work, "wheels");
  const [wheel, wheelhouse] = await Promise.all([
    timed("engine: pip wheel (the build hook packs the plugin)", async () => {
      await exec(PYTHON, ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet", "--disable-pip-version-check", "--wheel-dir", wheels, checkout], { cwd: work, env });
      const [file] = readdirSync(wheels).filter((f) => /^spotpatch_agent-.*\.whl$/.test(f));
      return path.join(wheels, file);
    }),
    timed("engine: wheelhouse", () => buildWheelhouse(path.join(work, "wheelhouse"), env)),
  ]);
  const venv = path.join(work, "venv");
  await timed("engine: venv + pip install --no-index", async () => {
    await exec(PYTHON, ["-m", "venv", venv], { cwd: work, env });
    await exec(path.join(venv, "bin", "pip"), ["install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", wheelhouse, wheel], { cwd: work, env });
  });
  return { wheel, venv, agent: path.join(venv, "bin", "spotpatch-agent"), python: path.join(venv, "bin", "python") };
}

/** Wheels of the engine's dependencies (pyproject.toml), made with the repository's .venv (pip's cache first). */
async function buildWheelhouse(dir, env) {
  const script = "import sys, tomllib; print('\\n'.join(tomllib.load(open(sys.argv[1], 'rb'))['project']['dependencies']))";
  const { stdout } = await exec(PYTHON, ["-c", script, path.join(REPO, "pyproject.toml")], { env });
  mkdirSync(dir);
  writeFileSync(path.join(dir, "requirements.txt"), stdout);
  await exec(PYTHON, ["-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--wheel-dir", dir, "-r", path.join(dir, "requirements.txt")], { cwd: work, env });
  return dir;
}

/** The pm's dev command in `app` (its own process group); resolves with its URL, output and `stop()`. */
async function startDev(app, pm, env) {
  const child = spawn(pm, PMS[pm].dev, { cwd: app, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const signal = (name) => {
    try {
      process.kill(-child.pid, name);
    } catch {
      /* gone already */
    }
  };
  const stop = async () => {
    signal("SIGTERM");
    const timer = setTimeout(() => signal("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const output = [];
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on("line", (line) => output.push(line));
  try {
    const url = await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`${pm} ${PMS[pm].dev.join(" ")} exited (${child.exitCode}):\n${output.join("\n")}`);
        return output.map((l) => /Local:\s+(http:\/\/\S+?)\/?$/.exec(l)?.[1]).find(Boolean);
      },
      { timeoutMs: 60_000, what: "vite's Local URL" },
    );
    return { url, output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

test("the wheel built from a fresh copy of the checkout carries the plugin; the installed package has no node-shim/", async (t) => {
  const { wheel, python, venv } = await engine;
  t.diagnostic(Object.entries(timings).filter(([k]) => k.startsWith("engine") || k === "corepack").map(([k, v]) => `${k} ${v} ms`).join("; "));
  const list = "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))";
  const names = (await exec(PYTHON, ["-c", list, wheel])).stdout.split("\n");
  assert.deepEqual(names.filter((n) => n.includes("/init/assets/")).sort(), [`${ASSETS}/config-edit.mjs`, `${ASSETS}/${TARBALL}`]);
  assert.ok(!names.some((n) => n.startsWith("node-shim/")), "no node-shim/ in the wheel");
  // What init will use: the installed package's assets (cwd outside the repository: nothing imports the checkout).
  const probe =
    "import json; from spotpatch_agent.init import assets as a; p = a.plugin_assets(); " +
    "print(json.dumps({'checkout': a.NODE_SHIM.exists(), 'tarball': str(p.tarball), 'editor': str(p.editor), 'version': p.version}))";
  const found = JSON.parse((await exec(python, ["-c", probe], { cwd: work })).stdout);
  assert.equal(found.checkout, false, "the installed package sits beside no node-shim/");
  assert.equal(found.version, PACKAGE.version);
  for (const file of [found.tarball, found.editor]) assert.ok(file.startsWith(`${venv}/`) && existsSync(file), file);
  assert.equal(path.basename(found.tarball), TARBALL);
});

for (const [name, { template, pm, plugin, file, changed }] of Object.entries(APPS)) {
  test(`${name}: init --yes, ${pm} ${PMS[pm].dev.join(" ")}, a job through the page; init again changes nothing; --undo restores every byte`, async (t) => {
    const { app, env, s0, s1, init } = await apps[name];
    const { agent, venv } = await engine;
    const phase = (label) => `${label} ${timings[`${name}: ${label}`]} ms`;
    t.diagnostic(`${name}: ${phase("npm create")}, ${phase(`${pm} install`)}, ${phase("init")}`);

    // init: exit 0, the plugin from the wheel's tarball, the next steps; nothing built (no node-shim/ here).
    assert.equal(init.code, 0, `init --yes failed:\n${init.stderr}\n${init.stdout}`);
    assert.ok(!`${init.stderr}${init.stdout}`.includes("Building the Vite plugin"), init.stderr);
    assert.match(init.stdout, /\nNext:\n {2}git add .* && git commit/, init.stdout);
    assert.ok(init.stdout.includes(`${pm} ${pm === "npm" ? "run dev" : "dev"}`), init.stdout);
    const [python] = readdirSync(path.join(venv, "lib"));
    const wheelTarball = readFileSync(path.join(venv, "lib", python, "site-packages", ASSETS, TARBALL));
    assert.deepEqual(readFileSync(path.join(app, ".spotpatch", TARBALL)), wheelTarball, "the app holds the wheel's tarball");
    const edited = readFileSync(path.join(app, "vite.config.ts"), "utf8");
    assert.match(edited, /^import spotpatch from 'vite-plugin-spotpatch'$/m, edited);
    assert.ok(edited.includes(`plugins: [${["spotpatch()", plugin].filter(Boolean).join(", ")}],`), `spotpatch() first in plugins:\n${edited}`);
    const configBytes = s1.get("spotpatch.config.json");
    assert.ok(configBytes, "init wrote spotpatch.config.json");
    const config = JSON.parse(configBytes.toString("utf8"));
    assert.ok(existsSync(path.join(app, config.$schema)), `its $schema resolves: ${config.$schema}`);
    assert.deepEqual(config.providers, [], "no provider key in the environment: no provider");
    t.diagnostic(`${name}: init's changes: ${differences(s0, s1).join(", ")}`);
    const tracked = (await exec("git", ["ls-files"], { cwd: app })).stdout.split("\n");
    assert.ok(!tracked.some((f) => f.startsWith("node_modules/")), "node_modules is ignored");

    // The test's provider, committed (see the header).
    const provider = await startProvider(t, template);
    writeFileSync(path.join(app, "spotpatch.config.json"), `${JSON.stringify({ ...config, ...providerConfig(provider.baseUrl) }, null, 2)}\n`);
    await exec("git", [...GIT_ID, "commit", "-q", "-m", "Test provider", "spotpatch.config.json"], { cwd: app });

    let started = Date.now();
    const dev = await startDev(app, pm, env);
    t.after(dev.stop);
    t.diagnostic(`${name}: ${pm} ${PMS[pm].dev.join(" ")} ready in ${Date.now() - started} ms at ${dev.url}`);

    started = Date.now();
    const browser = await launchBrowser(t);
    const context = await browser.newContext({ locale: "en-US" });
    t.after(() => context.close());
    const page = await newPage(context);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${dev.url}/`);
    const counter = page.getByRole("button", { name: /^(Count is|Clicks:) 0$/ });
    await counter.waitFor({ timeout: 30_000 });
    await page.waitForSelector(HOST, { state: "attached", timeout: 15_000 });
    const original = readFileSync(path.join(app, file));

    await openPanel(page);
    const panel = panelOf(page);
    await panel.getByText("Clean: no local changes.").waitFor();
    await panel.getByRole("button", { name: "Pick elements" }).click();
    await counter.click();
    const card = panel.getByRole("group", { name: "Target 1" });
    await card.getByText(/\.(tsx|vue|svelte|ts):\d+/).first().waitFor();
    await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Make the counter say Clicks.");
    await panel.getByRole("button", { name: "Submit" }).click();
    await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 60_000 });
    await panel.getByRole("region", { name: "Diff" }).getByText(changed).first().waitFor();
    assert.deepEqual(readFileSync(path.join(app, file)), original, "nothing written before Apply");

    await panel.getByRole("button", { name: "Apply" }).click();
    await page.getByRole("button", { name: "Clicks: 0" }).waitFor({ timeout: 15_000 }); // Vite's HMR (or reload)
    assert.ok(readFileSync(path.join(app, file), "utf8").includes(changed), "Apply wrote the change");
    // vanilla-ts reloads the whole page (counter.ts accepts no HMR update): the panel comes back with the job.
    await panel.getByRole("button", { name: "Revert" }).waitFor({ timeout: 15_000 });
    await shot(page, `init-${name}-applied`);
    await panel.getByRole("button", { name: "Revert" }).click();
    await panel.getByText(/^Reverted: your files/).waitFor();
    await page.getByRole("button", { name: "Count is 0" }).waitFor({ timeout: 15_000 });
    assert.deepEqual(readFileSync(path.join(app, file)), original, "Revert restores the exact bytes");
    assert.deepEqual(page.errors, []);
    t.diagnostic(`${name}: the page job (load, pick, Submit, Apply, Revert) in ${Date.now() - started} ms`);

    // The engine came from init's record: PATH had none, the app has no virtualenv.
    const log = dev.output.join("\n");
    assert.ok(!log.includes("SpotPatch engine not found"), log);
    const pid = Number(/\[spotpatch\] engine started \(pid (\d+)\)/.exec(log)?.[1]);
    assert.ok(pid > 0 && isAlive(pid), log);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    assert.ok(cmdline.includes(agent), cmdline.join(" "));
    await dev.stop();
    assert.equal((await exec("git", ["status", "--porcelain"], { cwd: app })).stdout, "", "the job left the work tree clean");

    // init again: exit 0, nothing changed.
    started = Date.now();
    const s2 = snapshot(app);
    const again = await exec(agent, ["init", "--yes"], { cwd: app, env, check: false });
    assert.equal(again.code, 0, `${again.stderr}\n${again.stdout}`);
    assert.match(again.stdout, /nothing to change/, again.stdout);
    assert.deepEqual(differences(s2, snapshot(app)), [], "init again changes no file");
    t.diagnostic(`${name}: init again in ${Date.now() - started} ms`);

    // --undo: refused while spotpatch.config.json holds the test's provider (nothing undone) …
    started = Date.now();
    const refused = await exec(agent, ["init", "--undo"], { cwd: app, env, check: false });
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(refused.stderr, /changed since init: spotpatch\.config\.json\b/, refused.stderr);
    assert.deepEqual(differences(s2, snapshot(app)), [], "a refused undo changes no file");
    // … then, with init's bytes back in that file, every file as before init, byte for byte.
    writeFileSync(path.join(app, "spotpatch.config.json"), configBytes);
    const undo = await exec(agent, ["init", "--undo"], { cwd: app, env, check: false });
    assert.equal(undo.code, 0, `${undo.stderr}\n${undo.stdout}`);
    assert.deepEqual(differences(s0, snapshot(app)), [], `init --undo restores every file:\n${undo.stdout}`);
    assert.equal(existsSync(path.join(app, "node_modules", PACKAGE.name)), false, "the plugin left node_modules");
    t.diagnostic(`${name}: undo in ${Date.now() - started} ms`);
  });
}
