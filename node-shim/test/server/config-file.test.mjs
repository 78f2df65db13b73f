// Issue 20, "one configuration" (acceptance 2: config file shared by `run` and the plugin with the
// override rule): spotpatch.config.json at the project root is the base of the plugin's trusted config;
// each top-level key given in spotpatch(options) replaces the file's key whole. The file's "$schema" line
// (the JSON Schema this package ships) is for editors and never reaches the engine. An invalid file stops
// the dev server's start with an error naming the file and the key. `spotpatch-agent run` reads the same file.
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { Ajv2020 } from "ajv/dist/2020.js";

import { TRUSTED_KEYS, checkConfigFile, mergeConfig, readConfigFile } from "../../dist/server/config-file.js";
import { CONFIG_SCHEMA_PATH } from "../../scripts/gen-protocol.mjs";
import { AGENT, TOUCHED, git, makeDemoProject, pageSession, providerConfig, rawPost, startDevServer, startProvider } from "../support/support.mjs";

const SCHEMA_LINE = "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json";

const profile = (id, baseUrl = "http://127.0.0.1:9/v1") => ({
  id,
  displayName: id,
  api: "chat",
  baseUrl,
  apiKeyEnv: "SPOTPATCH_TEST_PROVIDER_KEY",
  models: [{ id: `${id}-m`, model: "m", displayName: `${id} model` }],
});

test("the file's keys are exactly TrustedConfig's keys (no key of the engine's config is missing from the merge)", () => {
  const schema = JSON.parse(readFileSync(CONFIG_SCHEMA_PATH, "utf8"));
  const keys = Object.keys(schema.properties).filter((key) => key !== "$schema").sort();
  assert.deepEqual([...TRUSTED_KEYS].sort(), keys);
});

test("the override rule: options win key by key over the file (top-level keys, no deep merge)", () => {
  const file = { providers: [profile("file")], limits: { maxTurns: 5, maxTargets: 3 }, sandbox: "warn" };
  assert.deepEqual(mergeConfig({}, file), file);
  assert.deepEqual(mergeConfig({ limits: { maxTurns: 9 } }, file), {
    providers: [profile("file")],
    limits: { maxTurns: 9 }, // the file's maxTargets is not kept: the option replaces the whole key
    sandbox: "warn",
  });
  assert.deepEqual(mergeConfig({ providers: [] }, file).providers, [], "an empty list given as an option still wins");
  assert.deepEqual(mergeConfig({ checks: [] }, undefined), { checks: [] });
});

test("the file: $schema is dropped; bad keys are named with the file, plugin-only keys say where they belong", () => {
  assert.deepEqual(checkConfigFile({ $schema: SCHEMA_LINE, sandbox: "warn" }), { sandbox: "warn" });
  const fails = (value, pattern) => assert.throws(() => checkConfigFile(value), (e) => pattern.test(e.message) && /^vite-plugin-spotpatch: spotpatch\.config\.json \(at the project root\)/.test(e.message));
  fails({ command: ".venv/bin/spotpatch-agent" }, /command: is a Vite plugin option: give it in spotpatch\(\{ command: … \}\)/);
  fails({ provider: [] }, new RegExp(`provider: unknown key \\(allowed: ${TRUSTED_KEYS.join(", ")}, \\$schema\\)`));
  fails({ limits: { maxTurnz: 3 } }, /limits\.maxTurnz: unknown key \(not allowed here\)/);
  fails({ providers: [{ id: "x" }] }, /providers\.0\.displayName: is required/);
  fails({ $schema: 3 }, /\$schema: must be a string/);
  fails([], /must be a JSON object/);
});

test("a file with tens of thousands of wrong items: every one counted, the first 30 listed, in linear time", () => {
  // A pasted file can hold a huge array of wrong items. The problems used to be deduplicated by scanning the
  // list for each error (60,000 items took 62 s at every dev-server start); now Set and Map (tests/bench: none;
  // this run takes well under a second).
  const n = 150_000; // problems are added by a loop: a spread of this many arguments can overflow the stack
  const checks = Array.from({ length: n }, () => 1);
  let error;
  try {
    checkConfigFile({ checks });
  } catch (e) {
    error = e;
  }
  assert.ok(error, "the file is refused");
  assert.equal(error.problems.length, 30, "the first 30 problems are listed");
  assert.match(error.message, new RegExp(`\\(${n} errors, the first 30 listed\\)`), error.message.slice(0, 200));
  assert.match(error.problems[0], /^checks\.0: /);
  assert.match(error.problems[29], /^checks\.29: /);
});

test("the shipped JSON Schema accepts a documented config file (with its $schema line) and rejects a bad key", () => {
  const schema = JSON.parse(readFileSync(CONFIG_SCHEMA_PATH, "utf8"));
  const validate = new Ajv2020({ strict: false, allErrors: true }).compile(schema);
  assert.equal(validate({ $schema: SCHEMA_LINE, providers: [profile("openai")], limits: { maxTurns: 16 } }), true, JSON.stringify(validate.errors));
  assert.equal(validate({ providers: [profile("openai")], limitz: {} }), false);
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.name, "vite-plugin-spotpatch", "the $schema line's package folder");
  assert.ok(pkg.files.includes("spotpatch.config.schema.json"), "shipped in the package");
});

/** The demo app with `config` committed as spotpatch.config.json at its root. */
function projectWithConfig(t, config) {
  return makeDemoProject(t, { edit: (root) => writeFileSync(path.join(root, "spotpatch.config.json"), `${JSON.stringify(config, null, 2)}\n`) });
}

test("dev server: the file's providers serve the page; a providers option replaces them, other file keys stay", async (t) => {
  const provider = await startProvider(t, "demo");
  const fileConfig = { $schema: SCHEMA_LINE, ...providerConfig(provider.baseUrl), limits: { maxTargets: 3 } };
  const project = projectWithConfig(t, fileConfig);

  const fromFile = await startDevServer(t, project);
  const { client } = await pageSession(fromFile.url);
  assert.deepEqual((await client.providers()).providers.map((p) => [p.id, p.available]), [["scripted", true]]);
  assert.equal((await client.session()).limits.maxTargets, 3, "limits from the file");
  assert.equal((await client.health()).state, "clean", "the committed config file leaves the tree clean");

  const overridden = await startDevServer(t, project, { options: { providers: [profile("option")] } });
  const { client: client2 } = await pageSession(overridden.url);
  assert.deepEqual((await client2.providers()).providers.map((p) => p.id), ["option"]);
  assert.equal((await client2.session()).limits.maxTargets, 3, "the file's other keys stay");
});

test("dev server: an invalid spotpatch.config.json never stops the start: one block lists every problem, every endpoint says CONFIG_INVALID", async (t) => {
  const project = projectWithConfig(t, { providers: [{ id: "openai", displayName: "OpenAI", api: "chat" }], limits: { maxTurns: "nine" }, bogus: 1 });
  const { url, logger } = await startDevServer(t, project);
  assert.equal((await fetch(`${url}/`)).status, 200, "the app is served");
  const block = logger.lines.find((l) => l.level === "error" && l.msg.includes("is not a valid SpotPatch config"))?.msg ?? "";
  for (const line of ["bogus: unknown key", "limits.maxTurns: must be integer", "providers.0.baseUrl: is required", "providers.0.models: is required", "providers.0.apiKeyEnv: is required"]) {
    assert.ok(block.includes(`  - ${line}`), `${line} in:\n${block}`);
  }
  assert.match(block, /^\[spotpatch\] spotpatch\.config\.json \(at the project root\) is not a valid SpotPatch config \(5 errors\):\n/);
  assert.match(block, /fix: fix the keys listed \(docs\/configuration\.md; unknown keys are errors\)\. `spotpatch-agent doctor` checks the file\.\n {2}SpotPatch is off until the file is fixed/);
  const { token } = await pageSession(url);
  const refused = await rawPost(url, "rpc/session/get", {}, { token });
  assert.equal(refused.status, 503);
  assert.equal(refused.body.error.code, "CONFIG_INVALID");
  assert.match(refused.body.error.message, /^SpotPatch is off: spotpatch\.config\.json \(at the project root\) is not a valid SpotPatch config \(5 errors\): /);

  writeFileSync(path.join(project.root, "spotpatch.config.json"), "{ providers: [] }");
  const second = await startDevServer(t, project);
  assert.match(second.logger.text(), /spotpatch\.config\.json \(at the project root\) is not valid JSON: .*\n {2}fix: fix the file: valid JSON in UTF-8/);
});

test("spotpatch-agent run reads the same file (with its $schema line): the file's provider makes the job", async (t) => {
  const provider = await startProvider(t, "demo");
  const project = projectWithConfig(t, { $schema: SCHEMA_LINE, ...providerConfig(provider.baseUrl) });
  const { stdout } = await promisify(execFile)(
    AGENT,
    [
      "run", "--project", project.root,
      "--target", `${TOUCHED}:12:7`, "--instruction", "Make the Save button the primary button (class `btn-primary`).",
      "--target", `${TOUCHED}:11:7`, "--instruction", "Show the price with two decimals.",
    ],
    { encoding: "utf8", timeout: 60_000 },
  );
  assert.match(stdout, /\+ {6}<button className="btn btn-primary" onClick=\{onSave\}>Save<\/button>/);
  assert.equal(git(project.root, "status", "--porcelain"), "", "without --apply nothing is written");
});

test("the file: a JSON error never quotes the text (a pasted key, a link to another file); a BOM is allowed; $schema as run judges it", (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "spotpatch-config-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "spotpatch.config.json");
  const canary = "sk-breaker-canary-3c9d1e7a";
  const readFails = (pattern) => assert.throws(() => readConfigFile(dir), (e) => {
    assert.match(e.message, pattern);
    assert.ok(!e.message.includes("sk-") && !e.message.includes("root:"), e.message);
    return true;
  });
  writeFileSync(file, `{"providers": [{"id": "openai", "apiKey": ${canary}}]}`);
  readFails(/is not valid JSON: Unexpected token 's'\.$/);
  writeFileSync(file, `{"providers": [{"id": "openai", "apiKey": '${canary}'}]}`);
  readFails(/is not valid JSON: Unexpected token '''\.$/);
  rmSync(file);
  symlinkSync("/etc/passwd", file);
  readFails(/is not valid JSON: Unexpected token 'r'\.$/);
  rmSync(file);

  writeFileSync(file, `\uFEFF${JSON.stringify({ $schema: SCHEMA_LINE, sandbox: "warn" })}`);
  assert.deepEqual(readConfigFile(dir), { sandbox: "warn" }, "a BOM is skipped, as spotpatch-agent run does");
  assert.deepEqual(checkConfigFile({ $schema: null, sandbox: "warn" }), { sandbox: "warn" }, "the engine accepts a null $schema");
  assert.throws(() => checkConfigFile({ $schema: "x".repeat(2049) }), /\$schema: must NOT have more than 2048 characters/);
  writeFileSync(file, Buffer.concat([Buffer.from('{"providers": [{"id": "caf'), Buffer.from([0xe9]), Buffer.from('"}]}')]));
  readFails(/spotpatch\.config\.json \(at the project root\) is not UTF-8 text\.$/); // Latin-1: refused as run refuses it, not read as U+FFFD
  rmSync(file);
  execFileSync("mkfifo", [file]); // no writer: reading it would block the dev server's start for good
  readFails(/spotpatch\.config\.json \(at the project root\) is not a regular file\.$/);
  rmSync(file);
  mkdirSync(file);
  readFails(/spotpatch\.config\.json \(at the project root\) is not a regular file\.$/);
  rmSync(file, { recursive: true });
  writeFileSync(file, "{}" + " ".repeat(1 << 20)); // refused before parsing, as run and doctor refuse it
  readFails(/spotpatch\.config\.json \(at the project root\) is 1048578 bytes, over the 1048576 a config may have\.$/);
});
