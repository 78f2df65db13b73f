// Keeps scripts/bench-locate.mjs from rotting (tests/bench/README.md "Locator"): a tiny run prints a row per
// framework with both medians, the stamped-output check passed, and the Vue/Svelte slots. Figures not asserted.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";

import { NODE_SHIM } from "../support/support.mjs";

test("bench-locate --json: a row per framework with both medians", () => {
  const out = execFileSync(process.execPath, ["scripts/bench-locate.mjs", "--lines", "60", "--runs", "1", "--json"], {
    cwd: NODE_SHIM,
    encoding: "utf8",
    timeout: 240_000,
  });
  const { rows } = JSON.parse(out);
  assert.deepEqual(rows.map((r) => r.framework), ["react (.tsx)", "preact (.tsx)", "solid (.tsx)", "vanilla (.ts innerHTML)", "HTML page (index.html)", "vue (.vue)", "svelte (.svelte)"]);
  for (const r of rows.slice(0, 5)) assert.ok(r.lines >= 60 && r.baselineMs > 0 && r.withLocateMs > 0, JSON.stringify(r));
  for (const r of rows.slice(5)) assert.match(r.note, /^n\/a/);
});
