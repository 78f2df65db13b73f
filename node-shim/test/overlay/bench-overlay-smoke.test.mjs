// Keeps the overlay benchmark (scripts/bench-overlay.mjs, tests/bench/README.md "Overlay") from rotting:
// `--quick` runs every part against the real dev server, engine, provider and Chromium with tiny counts;
// every figure must be printed. The budgets are not asserted here (a shared test machine), only that the
// command runs and reports each line with its budget and verdict.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

test("bench-overlay --quick prints every figure with its budget", async () => {
  const script = fileURLToPath(new URL("../../scripts/bench-overlay.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script, "--quick", "--json"], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    timeout: 300_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  for (const metric of [
    /^injected at page load \(loader \+ client, gzip\)\s+\d+\.\d KB\s+≤ 8\.0 KB\s+(PASS|FAIL)/m,
    /^after first open \(\+ overlay, gzip\)\s+\d+\.\d KB/m,
    /^hover CPU p95 per mousemove \(\d{4} elements\)\s+[\d.]+ ms\s+≤ 8 ms\s+(PASS|FAIL)/m,
    /^hover wall p95 per mousemove/m,
    /^hover wall max per mousemove/m,
    /^long tasks > 50 ms at the same move in every sweep\s+\d+/m,
    /^Submit → first progress event p50 \(1 warm runs\)\s+[\d.]+ ms\s+≤ 500 ms\s+(PASS|FAIL)/m,
    /^hover CPU per move by trace event/m,
  ]) {
    assert.match(stdout, metric);
  }
  const json = JSON.parse(stdout.split("\n").find((line) => line.startsWith("{")));
  assert.ok(json.sizes.loadGzip > 1000 && json.sizes.overlay.gzip > json.sizes.loadGzip, JSON.stringify(json.sizes));
  assert.ok(json.hover.elements >= 5000, `the generated page has ${json.hover.elements} elements`);
  assert.equal(json.submit.firstEvent.length, 2);
  assert.ok(json.submit.firstEvent.every((ms) => ms > 0));
});
