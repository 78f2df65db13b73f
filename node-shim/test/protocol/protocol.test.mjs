// Issue 4, acceptance 5 (second half): the schema copy and the generated TypeScript types do not drift
// from the engine's contract (protocol/spotpatch.schema.json, printed by `spotpatch-agent schema`).
// Fix a failure with `npm run protocol` (copies the schema, regenerates src/protocol/protocol.generated.ts).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  CONFIG_SCHEMA_PATH,
  GENERATED_PATH,
  SCHEMA_PATH,
  UPSTREAM_CONFIG_SCHEMA_PATH,
  UPSTREAM_SCHEMA_PATH,
  generateProtocolTypes,
} from "../../scripts/gen-protocol.mjs";
import { PAGE_METHODS } from "../../dist/protocol/client.js";
import { SCHEMA, paramsModel, validatorFor } from "../../dist/protocol/schema.js";

test("src/protocol/spotpatch.schema.json is byte-identical to protocol/spotpatch.schema.json", () => {
  assert.ok(
    readFileSync(SCHEMA_PATH).equals(readFileSync(UPSTREAM_SCHEMA_PATH)),
    "the schema copy drifted: run `npm run protocol` in node-shim",
  );
});

test("spotpatch.config.schema.json (shipped for the config file's $schema line) is byte-identical to protocol/'s", () => {
  assert.ok(
    readFileSync(CONFIG_SCHEMA_PATH).equals(readFileSync(UPSTREAM_CONFIG_SCHEMA_PATH)),
    "the config schema copy drifted: run `npm run protocol` in node-shim",
  );
});

test("the shipped schema is the source one", () => {
  assert.deepEqual(
    JSON.parse(readFileSync(new URL("../../dist/protocol/spotpatch.schema.json", import.meta.url), "utf8")),
    JSON.parse(readFileSync(SCHEMA_PATH, "utf8")),
  );
});

test("src/protocol/protocol.generated.ts is what the generator makes from the schema", async () => {
  const expected = await generateProtocolTypes(JSON.parse(readFileSync(SCHEMA_PATH, "utf8")));
  assert.equal(readFileSync(GENERATED_PATH, "utf8"), expected, "generated types drifted: run `npm run protocol` in node-shim");
});

test("every page method is a client → engine request of the schema, with a compilable params model", () => {
  for (const method of PAGE_METHODS) {
    const spec = SCHEMA["x-methods"][method];
    assert.equal(spec?.kind, "request", method);
    assert.equal(spec.direction, "client-to-engine", method);
    assert.equal(typeof validatorFor(paramsModel(method)), "function");
  }
  assert.ok(!PAGE_METHODS.includes("provider/probe") && !PAGE_METHODS.includes("initialize"));
});

test("every $def compiles with ajv (discriminated unions included)", () => {
  for (const name of Object.keys(SCHEMA.$defs)) validatorFor(name);
  const event = validatorFor("JobEventNotification");
  assert.equal(event({ jobId: "j", seq: 1, at: "2026-11-30T09:56:33.401Z", kind: "status", status: "running" }), true);
  assert.equal(event({ jobId: "j", seq: 1, at: "x", kind: "status", status: "running", extra: 1 }), false);
  assert.equal(event({ jobId: "j", seq: 1, at: "x", kind: "nope" }), false);
});
