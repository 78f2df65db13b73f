// A newcomer's set-up while Vite runs (issue 20 follow-up): spotpatch.config.json is watched — an edit
// restarts the dev server (one log line) and the page gets the new configuration; an invalid edit is said
// in the words of a failed start and the server keeps serving the previous one; a job the engine is
// working on delays the restart until it ends. A configured provider whose key variable is unset is said
// in the Vite log at start (its id and the variable's name, never a value). The project's own `.venv/`
// and `venv/` are kept out of Vite's watcher without dropping the user's `server.watch.ignored`.
import assert from "node:assert/strict";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { createServer } from "vite";

import { spotpatch } from "../../dist/index.js";
import {
  AGENT,
  CANARY,
  collectEvents,
  demoAnnotation,
  isStatus,
  makeDemoProject,
  NODE_SHIM,
  pageSession,
  providerConfig,
  rawPost,
  recordingLogger,
  startDevServer,
  startProvider,
  waitFor,
} from "../support/support.mjs";

const profile = (id, apiKeyEnv = "SPOTPATCH_TEST_PROVIDER_KEY") => ({
  id,
  displayName: id,
  api: "chat",
  baseUrl: "http://127.0.0.1:9/v1",
  apiKeyEnv,
  models: [{ id: `${id}-m`, model: "m", displayName: `${id} model` }],
});

const writeConfig = (project, config) =>
  writeFileSync(path.join(project.root, "spotpatch.config.json"), typeof config === "string" ? config : `${JSON.stringify(config, null, 2)}\n`);

/** The ids of the providers the page is offered now (a new page session: the token changes on restart). */
async function pageProviders(url) {
  const { client, token } = await pageSession(url);
  return { ids: (await client.providers()).providers.map((p) => p.id), token, client };
}

const count = (logger, pattern) => logger.lines.filter((l) => pattern.test(l.msg)).length;
const RESTARTING = /^\[spotpatch\] spotpatch\.config\.json changed: restarting$/;

test("spotpatch.config.json edited while Vite runs: one log line, a restart, the page gets the new providers; an invalid edit keeps the previous ones with the start's error", async (t) => {
  const project = makeDemoProject(t, { edit: (root) => writeConfig({ root }, { providers: [profile("first")] }) });
  const { url, logger } = await startDevServer(t, project);
  const start = await pageProviders(url);
  assert.deepEqual(start.ids, ["first"]);

  writeConfig(project, { providers: [profile("second")] });
  await waitFor(() => count(logger, RESTARTING) === 1, { what: "the restart line" });
  const second = await waitFor(async () => {
    const now = await pageProviders(url).catch(() => undefined);
    return now?.ids[0] === "second" && now;
  }, { what: "the new provider on the page" });
  assert.notEqual(second.token, start.token, "a new dev-server instance (new token)");
  assert.equal((await rawPost(url, "rpc/health/get", {}, { token: start.token })).status, 401, "the old token is gone");

  // An invalid edit: the start's message (file and key), no restart, the page keeps "second".
  writeConfig(project, { providers: [{ id: "broken", displayName: "Broken", api: "chat" }] });
  await waitFor(() => count(logger, /not restarting \(the file is invalid, see above\)/) === 1, { what: "the invalid-file line" });
  const error = logger.lines.find((l) => l.level === "error" && l.msg.includes("is not a valid SpotPatch config"));
  assert.match(
    error?.msg ?? "",
    /^\[spotpatch\] spotpatch\.config\.json \(at the project root\) is not a valid SpotPatch config \(3 errors\):\n {2}- providers\.0\.baseUrl: is required\n/,
  );
  writeConfig(project, "{ not json");
  await waitFor(() => count(logger, /not restarting/) === 2, { what: "the second invalid-file line" });
  assert.ok(logger.lines.some((l) => l.level === "error" && /spotpatch\.config\.json \(at the project root\) is not valid JSON/.test(l.msg)));
  assert.equal(count(logger, RESTARTING), 1, "no restart for an invalid file");
  const still = await second.client.providers(); // the same token still works: the server was not restarted
  assert.deepEqual(still.providers.map((p) => p.id), ["second"]);

  // Fixed again: restarts; saved unchanged: no restart; removed: restarts without the file's providers.
  writeConfig(project, { providers: [profile("third")] });
  await waitFor(() => count(logger, RESTARTING) === 2, { what: "the second restart" });
  const third = await waitFor(async () => {
    const now = await pageProviders(url).catch(() => undefined);
    return now?.ids[0] === "third" && now;
  }, { what: "the fixed file's provider" });
  writeConfig(project, { providers: [profile("third")] });
  await waitFor(() => count(logger, /changed: no restart needed/) === 1, { what: "the unchanged-file line" });
  assert.deepEqual((await third.client.providers()).providers.map((p) => p.id), ["third"], "same token: no restart");

  rmSync(path.join(project.root, "spotpatch.config.json"));
  await waitFor(() => count(logger, RESTARTING) === 3, { what: "the restart on removal" });
  await waitFor(async () => (await pageProviders(url).catch(() => undefined))?.ids.length === 0, { what: "no providers" });
  assert.ok(!logger.text().includes(CANARY));
});

test("a config edit while a job runs: the restart waits for the job to end, then happens", async (t) => {
  const provider = await startProvider(t, "stall-demo"); // the job's model turn never ends until cancelled
  const project = makeDemoProject(t, { edit: (root) => writeConfig({ root }, providerConfig(provider.baseUrl)) });
  const { url, logger } = await startDevServer(t, project);
  const { client, token } = await pageSession(url);
  const job = await client.createJob({ annotation: demoAnnotation(), modelProfileId: "m1" });
  await collectEvents(client, job.jobId, isStatus("running"));
  await provider.waitForRequests(1);

  writeConfig(project, { ...providerConfig(provider.baseUrl), limits: { maxTargets: 3 } });
  await waitFor(() => count(logger, new RegExp(`changed: restarting once the engine has finished job ${job.jobId}$`)) === 1, {
    what: "the deferred-restart line",
  });
  assert.equal(count(logger, RESTARTING), 0, logger.text());
  assert.equal((await client.getJob(job.jobId)).status, "running", `the job is not killed\n${logger.text()}`);

  await client.cancel(job.jobId);
  await waitFor(() => count(logger, RESTARTING) === 1, { what: "the restart after the job" });
  await waitFor(async () => {
    const now = await pageSession(url).catch(() => undefined);
    return now && now.token !== token && (await now.client.session()).limits.maxTargets === 3;
  }, { what: "the new limits on the page" });
});

test("at start: one warn line per provider whose key variable is unset, naming the provider and the variable, never a value", async (t) => {
  delete process.env.SPOTPATCH_TEST_UNSET_KEY;
  process.env.SPOTPATCH_TEST_EMPTY_KEY = "";
  t.after(() => delete process.env.SPOTPATCH_TEST_EMPTY_KEY);
  const project = makeDemoProject(t, {
    edit: (root) => writeConfig({ root }, { providers: [profile("fake", "SPOTPATCH_TEST_UNSET_KEY"), profile("set"), profile("empty", "SPOTPATCH_TEST_EMPTY_KEY")] }),
  });
  const { logger } = await startDevServer(t, project);
  const lines = logger.lines.filter((l) => l.msg.includes("API key variable"));
  assert.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [
      [
        "warn",
        '[spotpatch] AI is off for provider "fake": its API key variable SPOTPATCH_TEST_UNSET_KEY is not set. ' +
          "Set SPOTPATCH_TEST_UNSET_KEY in the environment of the Vite process and restart Vite; `spotpatch-agent doctor` checks it.",
      ],
      [
        "warn",
        '[spotpatch] AI is off for provider "empty": its API key variable SPOTPATCH_TEST_EMPTY_KEY is not set. ' +
          "Set SPOTPATCH_TEST_EMPTY_KEY in the environment of the Vite process and restart Vite; `spotpatch-agent doctor` checks it.",
      ],
    ],
  );
  assert.ok(!logger.text().includes(CANARY), "the set key's value is never logged");
});

/** Paths Vite's watcher watches (directories and files), relative to `root`. */
function watchedUnder(server, root) {
  const watched = server.watcher.getWatched();
  return Object.entries(watched).flatMap(([dir, names]) => [dir, ...names.map((n) => path.join(dir, n))]).map((p) => path.relative(root, p));
}

test("Vite's watcher ignores the project's .venv/ and venv/ (a venv made while Vite runs: no tsconfig full-reload) and keeps the user's ignored function", async (t) => {
  const project = makeDemoProject(t);
  const userIgnored = (file) => file.split(path.sep).includes("mine-only");
  const { server, logger } = await startDevServer(t, project, { server: { watch: { ignored: userIgnored } } });

  const events = [];
  server.watcher.on("all", (event, file) => events.push([event, path.relative(project.root, file)]));
  // What `python -m venv .venv && pip install <spotpatch>` leaves: the engine's demo app with its tsconfig.
  const demo = (venv) => path.join(project.root, venv, "lib", "python3.12", "site-packages", "spotpatch_agent", "demo", "app");
  for (const dir of [".venv", "venv", "mine-only", "control"]) {
    mkdirSync(demo(dir), { recursive: true });
    writeFileSync(path.join(project.root, dir, "pyvenv.cfg"), "home = /usr/bin\n");
    writeFileSync(path.join(demo(dir), "tsconfig.json"), "{}\n");
  }
  // `control/` (same layout, not a venv) is watched: once its tsconfig is seen, the others would have been too.
  const controlTsconfig = path.join("control", path.relative(path.join(project.root, "control"), demo("control")), "tsconfig.json");
  await waitFor(() => events.some(([event, file]) => event === "add" && file === controlTsconfig), { what: "the control folder's tsconfig" });
  await waitFor(() => count(logger, /changed tsconfig file detected: .*control/) === 1, { what: "the control's full-reload line" });
  const seen = events.map(([, file]) => file).filter((file) => /^(\.venv|venv|mine-only)(\/|$)/.test(file));
  assert.deepEqual(seen, [], "no event from the virtualenvs or the user's ignored folder");
  assert.deepEqual(watchedUnder(server, project.root).filter((p) => /^(\.venv|venv|mine-only)(\/|$)/.test(p)), []);
  assert.equal(count(logger, /changed tsconfig file detected: .*(\.venv|\/venv\/)/), 0, logger.text());
  assert.ok([server.config.server.watch.ignored].flat().includes(userIgnored), "the user's function is kept");
});

test("the ignore list is added to the user's (a RegExp and strings stay), and server.watch: null stays off", async () => {
  const resolved = async (watch) => {
    const server = await createServer({
      configFile: false,
      root: NODE_SHIM,
      logLevel: "silent",
      customLogger: recordingLogger(),
      server: { watch, middlewareMode: true, hmr: false },
      plugins: [spotpatch({ command: [AGENT, "serve"], overlay: false })],
    });
    try {
      return server.config.server.watch;
    } finally {
      await server.close();
    }
  };
  const regex = /secret/;
  const ignored = (await resolved({ ignored: [regex, "**/drafts/**"] })).ignored;
  assert.equal(ignored[0], regex);
  assert.equal(ignored[1], "**/drafts/**");
  assert.equal(ignored.length, 3);
  const ours = ignored[2];
  const root = path.resolve(NODE_SHIM);
  assert.equal(ours(path.join(root, ".venv", "lib", "x.py")), true);
  assert.equal(ours(path.join(root, "venv")), true);
  assert.equal(ours(path.join(root, "src", "venv.ts")), false);
  assert.equal(ours(path.join(root, "src", ".venvrc")), false);
  assert.equal(await resolved(null), null, "a watcher turned off stays off");
});
