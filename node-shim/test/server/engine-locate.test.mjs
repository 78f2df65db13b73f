// Issue 20, "the engine is found or the reason is loud" (acceptance 2: the engine-not-found message at
// start names what was tried). Without `command`/`python` the plugin runs `spotpatch-agent` from PATH,
// else from the project's `.venv/` or `venv/` (bin/ or Scripts/); when none is there, the dev server
// still starts at once, the Vite log says so in one line naming every place tried and the fix, nothing
// is spawned, and the page's panel shows the same message. Issue 29: last, the engine `spotpatch-agent init`
// recorded for the user ($XDG_CONFIG_HOME/spotpatch/engine.json, default ~/.config/spotpatch/engine.json).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { locateEngine } from "../../dist/server/engine-locate.js";
import { launchBrowser, newPage, HOST } from "../support/browser-support.mjs";
import { panelOf } from "../support/overlay-flow-helpers.mjs";
import {
  AGENT,
  engineProcesses,
  makeDemoProject,
  pageSession,
  startDevServer,
} from "../support/support.mjs";

function tempDir(t) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-locate-")));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function executable(file) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, "#!/bin/sh\nexit 0\n");
  chmodSync(file, 0o755);
  return file;
}

const EMPTY_PATH = { PATH: "" };
const INIT_TRIED = "the engine spotpatch-agent init recorded (~/.config/spotpatch/engine.json)";

test("order: PATH first, then .venv and venv (bin/ and Scripts/ layouts) of Vite's root, then of the project root", (t) => {
  const dir = tempDir(t);
  const project = path.join(dir, "repo");
  const root = path.join(project, "web");
  mkdirSync(root, { recursive: true });
  const onPath = executable(path.join(dir, "bin", "spotpatch-agent"));

  const look = (env = EMPTY_PATH) => locateEngine({ given: undefined, root, projectRoot: project, env, platform: "linux", home: dir });
  assert.deepEqual(look({ PATH: path.dirname(onPath) }).command, { file: onPath, args: ["serve"] });
  assert.equal(look({ PATH: path.dirname(onPath) }).source, "path");

  const projectVenv = executable(path.join(project, "venv", "Scripts", "spotpatch-agent.exe"));
  assert.deepEqual(look().command, { file: projectVenv, args: ["serve"] }, "the project root's venv/Scripts layout");
  const rootVenv = executable(path.join(root, ".venv", "bin", "spotpatch-agent"));
  const found = look();
  assert.deepEqual(found.command, { file: rootVenv, args: ["serve"] }, "Vite's root before the project root");
  assert.equal(found.source, "venv");
  assert.deepEqual(found.tried, ["spotpatch-agent on PATH", "web/.venv/bin/spotpatch-agent"]);
  assert.equal(found.problem, undefined);

  const notExecutable = path.join(root, "venv", "bin", "spotpatch-agent");
  rmSync(rootVenv);
  mkdirSync(path.dirname(notExecutable), { recursive: true });
  writeFileSync(notExecutable, "not executable");
  assert.deepEqual(look().command.file, projectVenv, "a file without the executable bit is skipped");
});

test("nothing found: one message naming every place tried (project-relative, no absolute path) and the fix", (t) => {
  const dir = tempDir(t);
  const found = locateEngine({ given: undefined, root: dir, projectRoot: dir, env: EMPTY_PATH, platform: "linux", home: dir });
  assert.equal(found.source, undefined);
  assert.deepEqual(found.tried, [
    "spotpatch-agent on PATH",
    ".venv/bin/spotpatch-agent",
    ".venv/Scripts/spotpatch-agent.exe",
    "venv/bin/spotpatch-agent",
    "venv/Scripts/spotpatch-agent.exe",
    INIT_TRIED,
  ]);
  assert.equal(
    found.problem,
    "SpotPatch engine not found: tried spotpatch-agent on PATH, .venv/bin/spotpatch-agent, .venv/Scripts/spotpatch-agent.exe, " +
      `venv/bin/spotpatch-agent, venv/Scripts/spotpatch-agent.exe, ${INIT_TRIED}. Install it (pip install <path or git URL of the ` +
      "SpotPatch repository>) and run `spotpatch-agent init` in this app, which records where the engine is; or install it into " +
      "the project's virtualenv (.venv/bin/spotpatch-agent), or point the plugin at it: " +
      'spotpatch({ command: "path/to/spotpatch-agent" }) or spotpatch({ python: "path/to/python" }).',
  );
  assert.ok(!found.problem.includes(dir));
});

test("last, the engine spotpatch-agent init recorded for the user: XDG_CONFIG_HOME, else ~/.config; a stale or foreign record is named, never quoted", (t) => {
  const dir = tempDir(t);
  const home = path.join(dir, "home");
  const engine = executable(path.join(dir, "tools", "venv", "bin", "spotpatch-agent"));
  const record = (base, body) => {
    mkdirSync(path.join(base, "spotpatch"), { recursive: true });
    writeFileSync(path.join(base, "spotpatch", "engine.json"), body);
  };
  const look = (env = EMPTY_PATH) => locateEngine({ given: undefined, root: dir, projectRoot: dir, env, platform: "linux", home });
  assert.equal(look().source, undefined, "no record: not found");

  record(path.join(home, ".config"), JSON.stringify({ command: [engine, "serve"] }));
  assert.deepEqual([look().command, look().source, look().problem], [{ file: engine, args: ["serve"] }, "init", undefined]);
  assert.equal(look().tried.at(-1), INIT_TRIED);
  const onPath = executable(path.join(dir, "bin", "spotpatch-agent"));
  assert.equal(look({ PATH: path.dirname(onPath) }).command.file, onPath, "PATH (and the virtualenvs) come first");

  const xdg = path.join(dir, "xdg");
  record(xdg, JSON.stringify({ command: [path.join(dir, "gone", "spotpatch-agent"), "serve"] }));
  const stale = look({ PATH: "", XDG_CONFIG_HOME: xdg });
  assert.equal(stale.source, undefined, "XDG_CONFIG_HOME's record wins over ~/.config, and it names a program that is gone");
  assert.match(stale.problem, /init recorded \(~\/\.config\/spotpatch\/engine\.json\) \(it names a program that is no longer there: run spotpatch-agent init again\)\. Install it/);
  assert.ok(!stale.problem.includes(dir), "never the record's path or content");
  assert.equal(look({ PATH: "", XDG_CONFIG_HOME: "relative/dir" }).source, "init", "a relative XDG_CONFIG_HOME is ignored (XDG spec)");

  rmSync(path.join(xdg, "spotpatch", "engine.json"));
  mkdirSync(path.join(xdg, "spotpatch", "engine.json")); // not a file (a FIFO would block a read)
  assert.match(look({ PATH: "", XDG_CONFIG_HOME: xdg }).problem, /is not a file: run spotpatch-agent init again\)/);
  rmSync(path.join(xdg, "spotpatch", "engine.json"), { recursive: true });

  for (const body of ["{not json", JSON.stringify({ command: ["relative/spotpatch-agent"] }), JSON.stringify({ command: "x" }), "null"]) {
    record(xdg, body);
    const bad = look({ PATH: "", XDG_CONFIG_HOME: xdg });
    assert.equal(bad.source, undefined, body);
    assert.match(bad.problem, /is not a record init wrote: run spotpatch-agent init again\)/, body);
  }
});

test("the command and python options are used as given, and checked: a missing one names the option", (t) => {
  const dir = tempDir(t);
  const agent = executable(path.join(dir, "tools", "agent"));
  const given = (command, source = "command") => locateEngine({ given: { command, source }, root: dir, projectRoot: dir, env: { PATH: path.join(dir, "tools") }, platform: "linux" });
  assert.deepEqual(given({ file: "tools/agent", args: ["serve"] }).command, { file: agent, args: ["serve"] }, "relative to Vite's root");
  assert.deepEqual(given({ file: "agent", args: ["x"] }).command, { file: agent, args: ["x"] }, "a bare name from PATH");
  const missing = given({ file: ".venv/bin/python", args: ["-m", "spotpatch_agent", "serve"] }, "python");
  assert.match(missing.problem, /^SpotPatch engine not found: the python option names \.venv\/bin\/python, which is not an executable file\. Fix the python option/);
  const bare = given({ file: "uvx", args: ["spotpatch-agent", "serve"] });
  assert.match(bare.problem, /the command option names "uvx" on PATH, which is not there/);
});

/** Until the test ends, PATH holds only git and ps (the dev server and engineProcesses need them), no spotpatch-agent. */
async function withoutEngineOnPath(t) {
  const bin = path.join(tempDir(t), "bin");
  mkdirSync(bin);
  for (const tool of ["git", "ps"]) symlinkSync(execFileSync("which", [tool], { encoding: "utf8" }).trim(), path.join(bin, tool));
  const saved = { PATH: process.env.PATH, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME };
  process.env.PATH = bin;
  process.env.XDG_CONFIG_HOME = path.dirname(bin); // no engine recorded by init there
  t.after(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
}

test("dev server without an engine: starts at once, one Vite error line names what was tried, nothing spawned; the page says the same; an engine installed meanwhile is found", async (t) => {
  await withoutEngineOnPath(t);
  const project = makeDemoProject(t, { edit: (root) => writeFileSync(path.join(root, ".gitignore"), "node_modules\n.venv\n") });
  const started = Date.now();
  const { url, logger } = await startDevServer(t, project, { options: { command: undefined } });
  const startMs = Date.now() - started;
  const lines = logger.lines.filter((l) => l.msg.includes("SpotPatch engine not found"));
  assert.equal(lines.length, 1, logger.text());
  assert.equal(lines[0].level, "error");
  const message = lines[0].msg.replace(/^\[spotpatch\] /, "");
  assert.match(message, /tried spotpatch-agent on PATH, \.venv\/bin\/spotpatch-agent, .*venv\/Scripts\/spotpatch-agent\.exe, the engine spotpatch-agent init recorded \(~\/\.config\/spotpatch\/engine\.json\)\. Install it/);
  assert.deepEqual(await engineProcesses(), [], "the check starts no process");
  t.diagnostic(`createServer + listen: ${startMs} ms`);

  // The page surface: the session request fails with that message (ENGINE_UNAVAILABLE) …
  const { client } = await pageSession(url);
  const error = await client.session().then(() => null, (e) => e);
  assert.equal(error?.code, "ENGINE_UNAVAILABLE");
  assert.equal(error.message, message);

  // … and the overlay's panel shows it.
  const browser = await launchBrowser(t);
  const context = await browser.newContext({ locale: "en-US" });
  t.after(() => context.close());
  const page = await newPage(context);
  await page.goto(`${url}/`);
  await page.waitForSelector(HOST, { state: "attached", timeout: 15_000 });
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  await panelOf(page).getByText(`The engine is not available. ${message}`).waitFor({ timeout: 15_000 });
  assert.ok(!(await panelOf(page).innerText()).includes("SpotPatch could not reach the engine: SpotPatch"), "the name once");

  // A set-up problem, not a crash: every request keeps saying it (no ENGINE_FAILED after "restarts"),
  // and the log still has the one line.
  for (let i = 0; i < 6; i += 1) {
    const again = await client.health().then(() => null, (e) => e);
    assert.deepEqual([again?.code, again?.message], ["ENGINE_UNAVAILABLE", message]);
  }
  assert.equal(logger.lines.filter((l) => l.msg.includes("SpotPatch engine not found")).length, 1, logger.text());

  // The engine installed into the project's .venv while Vite runs: the next request finds and starts it.
  mkdirSync(path.join(project.root, ".venv", "bin"), { recursive: true });
  symlinkSync(AGENT, path.join(project.root, ".venv", "bin", "spotpatch-agent"));
  assert.equal((await client.health()).state, "clean");
  const [engine] = await engineProcesses();
  assert.match(engine.args, /\.venv\/bin\/spotpatch-agent serve$/);
});

test("dev server with the engine in the project's .venv (gitignored) and no command option: found and used", async (t) => {
  await withoutEngineOnPath(t);
  const project = makeDemoProject(t, {
    edit(root) {
      mkdirSync(path.join(root, ".venv", "bin"), { recursive: true });
      symlinkSync(AGENT, path.join(root, ".venv", "bin", "spotpatch-agent"));
      writeFileSync(path.join(root, ".gitignore"), "node_modules\n.venv\n");
    },
  });
  const { url, logger } = await startDevServer(t, project, { options: { command: undefined } });
  assert.ok(!logger.text().includes("not found"), logger.text());
  const { client } = await pageSession(url);
  assert.equal((await client.health()).state, "clean");
  const [engine] = await engineProcesses();
  assert.match(engine.args, /\.venv\/bin\/spotpatch-agent serve$/);
});

test("Vite's root through a symlink (a linked home or /tmp): each folder tried once, named relative to the project", (t) => {
  // Breaker (issue 20): git spells the project root without the link, Vite's root with it; compared as
  // given, the message listed every virtualenv twice, once as a bare "spotpatch-agent".
  const dir = tempDir(t);
  const project = path.join(dir, "real", "app");
  mkdirSync(project, { recursive: true });
  symlinkSync(path.join(dir, "real"), path.join(dir, "link"));
  const look = () => locateEngine({ given: undefined, root: path.join(dir, "link", "app"), projectRoot: project, env: EMPTY_PATH, platform: "linux", home: dir });
  assert.deepEqual(look().tried, [
    "spotpatch-agent on PATH",
    ".venv/bin/spotpatch-agent",
    ".venv/Scripts/spotpatch-agent.exe",
    "venv/bin/spotpatch-agent",
    "venv/Scripts/spotpatch-agent.exe",
    INIT_TRIED,
  ]);
  const engine = executable(path.join(project, ".venv", "bin", "spotpatch-agent"));
  assert.deepEqual([look().command.file, look().source], [engine, "venv"]);
});
