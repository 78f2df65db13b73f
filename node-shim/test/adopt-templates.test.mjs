// Issue 20, acceptance 1: the top README's "Use it in your app" steps, followed for the official
// `react-ts`, `vue-ts` and `svelte-ts` templates, give an app in which a job is created, applied and
// reverted through the page (Debian's Chromium, the real overlay, the scripted provider).
//
// The steps as the README prints them are checked to be in the README (README_STEPS); the test runs each
// of them, with these substitutions, all of them about where packages come from, none about what is done:
//   step 0  `npm create vite@latest` → `npm create --yes vite@<create-vite of node-shim's devDependencies>`
//           (the templates the other tests and the scripted provider's edits know; `--yes`: no TTY);
//           `npm install` → with `--prefer-offline` (npm's cache first; the npm registry is reachable in CI);
//   step 1  `.venv/bin/pip install /path/to/spotpatch` → the same plus `--no-index --find-links <wheelhouse>`,
//           a wheelhouse of the engine's dependencies and its build backend made once per run with the
//           repository's own .venv (so the three installs build and install the engine offline);
//           `/path/to/spotpatch` is a fresh copy of this checkout (git's files; one per app, since pip
//           builds in the source tree);
//   step 2  `(cd node-shim && npm ci && npm pack)` → `npm pack` in a fresh copy of node-shim/ whose
//           node_modules is node-shim's own (what `npm ci` installs there); `npm install --save-dev <tgz>`
//           → with `--prefer-offline`;
//   step 4  the provider is the scripted one (its base URL and key variable), the rest of the file as shown;
//   step 6  `npx vite` with PATH holding no spotpatch-agent, so the engine must be found in the app's .venv.
// Steps 0–3 run for the three apps at once (they mostly wait on npm and pip); each test then does 4–6 and
// the job. Nothing is skipped: without the registry the npm steps fail, and so does the test.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { HOST, launchBrowser, newPage, shot } from "./browser-support.mjs";
import { openPanel, panelOf } from "./overlay-flow-helpers.mjs";
import { NPM, copyCheckout, packFreshCheckout } from "./pack-support.mjs";
import { KEY_ENV, NODE_SHIM, PYTHON, REPO, isAlive, startProvider, waitFor } from "./support.mjs";

const PACKAGE = JSON.parse(readFileSync(path.join(NODE_SHIM, "package.json"), "utf8"));
const CREATE_VITE = JSON.parse(readFileSync(path.join(NODE_SHIM, "node_modules", "create-vite", "package.json"), "utf8")).version;
const NPX = process.platform === "win32" ? "npx.cmd" : "npx";
const NPM_FLAGS = ["--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"];
const GIT_ID = ["-c", "user.name=SpotPatch Test", "-c", "user.email=test@spotpatch.invalid"];
const SCHEMA_LINE = "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json";

/** Each template: its framework plugin call in vite.config.ts and the counter the scripted provider edits. */
const TEMPLATES = {
  "react-ts": { plugin: "react()", file: "src/App.tsx", after: "Clicks: {count}" },
  "vue-ts": { plugin: "vue()", file: "src/components/HelloWorld.vue", after: "Clicks: {{ count }}" },
  "svelte-ts": { plugin: "svelte()", file: "src/lib/Counter.svelte", after: "Clicks: {count}" },
};

/** The README's commands and snippets this test runs (with the substitutions above). */
const README_STEPS = [
  "npm create vite@latest my-app -- --template react-ts     # or vue-ts, svelte-ts",
  "cd my-app && npm install",
  "python3 -m venv .venv",
  ".venv/bin/pip install /path/to/spotpatch",
  "(cd /path/to/spotpatch/node-shim && npm ci && npm pack)",
  `npm install --save-dev /path/to/spotpatch/node-shim/${PACKAGE.name}-${PACKAGE.version}.tgz`,
  "import spotpatch from 'vite-plugin-spotpatch'",
  "plugins: [spotpatch(), react()],",
  `"$schema": "${SCHEMA_LINE}",`,
  "echo .venv >> .gitignore",
  'git init && git add -A && git commit -m "SpotPatch set-up"',
  "OPENAI_API_KEY=… npx vite",
];

const run = (file, args, options = {}) =>
  promisify(execFile)(file, args, { maxBuffer: 64 << 20, ...options }).catch((error) => {
    throw new Error(`${path.basename(file)} ${args.join(" ")} failed in ${options.cwd ?? "."}: ${error.message}\n${error.stderr ?? ""}`);
  });

let work;
let shared;
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

before(() => {
  work = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-adopt-")));
  shared = (async () => {
    const plugin = copyCheckout(path.join(work, "plugin-clone"));
    const [tarball, wheelhouse] = await Promise.all([
      timed("npm pack", () => packFreshCheckout(work, path.join(plugin, "node-shim"))),
      timed("wheelhouse", () => buildWheelhouse(path.join(work, "wheelhouse"))),
    ]);
    return { tarball, wheelhouse };
  })();
  for (const name of Object.keys(TEMPLATES)) {
    apps[name] = shared.then(({ tarball, wheelhouse }) => timed(`${name} steps 0-3`, () => stepsZeroToThree(name, tarball, wheelhouse)));
    apps[name].catch(() => undefined); // reported by that template's test
  }
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Wheels of the engine's dependencies and build backend (pyproject.toml), made with the repository's .venv. */
async function buildWheelhouse(dir) {
  const script =
    "import sys, tomllib; p = tomllib.load(open(sys.argv[1], 'rb')); " +
    "print('\\n'.join(p['project']['dependencies'] + p['build-system']['requires']))";
  const { stdout } = await run(PYTHON, ["-c", script, path.join(REPO, "pyproject.toml")]);
  mkdirSync(dir);
  writeFileSync(path.join(dir, "requirements.txt"), stdout);
  await run(PYTHON, ["-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--wheel-dir", dir, "-r", path.join(dir, "requirements.txt")]);
  return dir;
}

/** README steps 0–3 for `name`, in `<work>/<name>/my-app`; returns the app's path. */
async function stepsZeroToThree(name, tarball, wheelhouse) {
  const base = path.join(work, name);
  mkdirSync(base);
  // 0. The app.
  await run(NPM, ["create", "--yes", `vite@${CREATE_VITE}`, "my-app", "--", "--template", name, "--no-interactive", "--no-immediate"], { cwd: base });
  const app = path.join(base, "my-app");
  const engine = (async () => {
    // 1. The engine, into the app's .venv, from a clone of the repository.
    await run("python3", ["-m", "venv", ".venv"], { cwd: app });
    const clone = copyCheckout(path.join(base, "spotpatch"));
    await run(path.join(app, ".venv", "bin", "pip"), ["install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", wheelhouse, clone], { cwd: app });
  })();
  // 0 (npm install), then 2. The plugin from the packed tarball.
  await run(NPM, ["install", ...NPM_FLAGS], { cwd: app });
  await run(NPM, ["install", "--save-dev", ...NPM_FLAGS, tarball], { cwd: app });
  await engine;
  // 3. vite.config.ts: the import, and spotpatch() first in plugins.
  const configFile = path.join(app, "vite.config.ts");
  const config = readFileSync(configFile, "utf8");
  const { plugin } = TEMPLATES[name];
  assert.ok(config.includes(`plugins: [${plugin}],`), `the template's vite.config.ts lists ${plugin}:\n${config}`);
  writeFileSync(configFile, `import spotpatch from 'vite-plugin-spotpatch'\n${config.replace(`plugins: [${plugin}],`, `plugins: [spotpatch(), ${plugin}],`)}`);
  // 5 (first half). .venv in .gitignore.
  appendFileSync(path.join(app, ".gitignore"), ".venv\n");
  return app;
}

/** PATH without any directory holding a spotpatch-agent (the engine must come from the app's .venv). */
function pathWithoutEngine() {
  return (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((dir) => dir && !existsSync(path.join(dir, "spotpatch-agent")))
    .join(path.delimiter);
}

/** Step 6: `npx vite` in `app` (its own process group, stopped after the test); resolves with its URL and output. */
async function startVite(t, app) {
  const child = spawn(NPX, ["vite"], {
    cwd: app,
    env: { ...process.env, PATH: pathWithoutEngine(), NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  t.after(async () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      /* gone already */
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }, 10_000);
    await exited;
    clearTimeout(timer);
  });
  const output = [];
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on("line", (line) => output.push(line));
  const url = await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`vite exited (${child.exitCode}):\n${output.join("\n")}`);
      return output.map((l) => /Local:\s+(http:\/\/\S+?)\/?$/.exec(l)?.[1]).find(Boolean);
    },
    { timeoutMs: 60_000, what: "vite's Local URL" },
  );
  return { url, output, exited };
}

test("the README's \"Use it in your app\" section holds the steps this test follows", () => {
  const readme = readFileSync(path.join(REPO, "README.md"), "utf8");
  const start = readme.indexOf("## Use it in your app\n");
  assert.ok(start >= 0, "the section exists");
  const section = readme.slice(start, readme.indexOf("\n## ", start + 1));
  for (const step of README_STEPS) assert.ok(section.includes(step), `the README says: ${step}`);
});

for (const [name, { file, after: changed }] of Object.entries(TEMPLATES)) {
  test(`${name}: the README steps, then a job through the page — pick, Submit, review, Apply, Revert`, async (t) => {
    const app = await apps[name];
    t.diagnostic(`shared: npm pack ${timings["npm pack"]} ms, wheelhouse ${timings.wheelhouse} ms; ${name} steps 0-3: ${timings[`${name} steps 0-3`]} ms`);
    assert.ok(existsSync(path.join(app, ".venv", "bin", "spotpatch-agent")), "step 1 installed the engine in .venv");
    assert.ok(existsSync(path.join(app, "node_modules", "vite-plugin-spotpatch", "dist", "index.js")), "step 2 installed the built plugin");

    // 4. spotpatch.config.json.
    const provider = await startProvider(t, name);
    const config = {
      $schema: SCHEMA_LINE,
      providers: [
        {
          id: "scripted", displayName: "Scripted", api: "chat", baseUrl: provider.baseUrl, apiKeyEnv: KEY_ENV,
          models: [{ id: "m1", model: "scripted-model", displayName: "Scripted model" }],
        },
      ],
    };
    writeFileSync(path.join(app, "spotpatch.config.json"), `${JSON.stringify(config, null, 2)}\n`);
    // 5. Commit.
    await run("git", ["init", "-q"], { cwd: app });
    await run("git", ["add", "-A"], { cwd: app });
    await run("git", [...GIT_ID, "commit", "-q", "-m", "SpotPatch set-up"], { cwd: app });
    const tracked = (await run("git", ["ls-files"], { cwd: app })).stdout.split("\n");
    assert.ok(!tracked.some((f) => f.startsWith(".venv/") || f.startsWith("node_modules/")), ".venv and node_modules are ignored");

    // 6. npx vite.
    const started = Date.now();
    const vite = await startVite(t, app);
    t.diagnostic(`${name}: vite ready in ${Date.now() - started} ms at ${vite.url}`);

    const browser = await launchBrowser(t);
    const context = await browser.newContext({ locale: "en-US" });
    t.after(() => context.close());
    const page = await newPage(context);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${vite.url}/`);
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
    await card.getByText(`${file}:`).first().waitFor();
    await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Make the counter say Clicks.");
    await panel.getByRole("button", { name: "Submit" }).click();
    await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 60_000 });
    await panel.getByRole("region", { name: "Diff" }).getByText(changed).first().waitFor();
    assert.deepEqual(readFileSync(path.join(app, file)), original, "nothing written before Apply");

    await panel.getByRole("button", { name: "Apply" }).click();
    await panel.getByRole("button", { name: "Revert" }).waitFor();
    await page.getByRole("button", { name: "Clicks: 0" }).waitFor({ timeout: 15_000 }); // Vite's HMR
    assert.match(readFileSync(path.join(app, file), "utf8"), new RegExp(changed.replace(/[{}]/g, "\\$&")));
    await shot(page, `adopt-${name}-applied`);
    await panel.getByRole("button", { name: "Revert" }).click();
    await panel.getByText(/^Reverted: your files/).waitFor();
    await page.getByRole("button", { name: "Count is 0" }).waitFor({ timeout: 15_000 });
    assert.deepEqual(readFileSync(path.join(app, file)), original, "Revert restores the exact bytes");
    assert.deepEqual(page.errors, []);

    // The engine came from the app's .venv (PATH had none), and Vite said nothing about a missing one.
    const log = vite.output.join("\n");
    assert.ok(!log.includes("SpotPatch engine not found"), log);
    const pid = Number(/\[spotpatch\] engine started \(pid (\d+)\)/.exec(log)?.[1]);
    assert.ok(pid > 0, log);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    assert.ok(cmdline.includes(path.join(app, ".venv", "bin", "spotpatch-agent")), cmdline.join(" "));
    assert.ok(isAlive(pid));
  });
}
