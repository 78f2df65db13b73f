// Smoke test of the shared accuracy harness (test/support/locate-accuracy.mjs) on a hand-written page in Debian's
// Chromium: exact, wrong-line, missing, node_modules and tooling-excluded elements are each counted right.
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { launchBrowser } from "../support/browser-support.mjs";
import { measureLocations } from "../support/locate-accuracy.mjs";

test("measureLocations: exact, stale, missing, node_modules and tooling elements", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "spotpatch-acc-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, "src"));
  // "é" and "😀" are one column each (code points); the BOM is not counted.
  writeFileSync(path.join(dir, "src", "App.tsx"), "\uFEFF<main>\r\n  é😀<button>\n\t<svg><linearGradient/></svg>\n");
  const browser = await launchBrowser(t);
  const page = await browser.newPage();
  await page.setContent(`<!doctype html><html data-spotpatch-loc="src/App.tsx:1:1"><head>
    <script type="module">/* preamble */</script><style data-vite-dev-id="x">p{}</style></head>
    <body data-spotpatch-loc="src/App.tsx:1:1">
    <main data-spotpatch-loc="src/App.tsx:1:1">
      <button data-spotpatch-loc="src/App.tsx:2:5">ok</button>
      <button data-spotpatch-loc="src/App.tsx:3:5">stale</button>
      <svg data-spotpatch-loc="src/App.tsx:3:2"><linearGradient data-spotpatch-loc="src/App.tsx:3:7"></linearGradient></svg>
      <p>no loc</p>
      <i data-spotpatch-loc="node_modules/x/i.js:1:1"></i>
      <span class="lib" data-x>library</span>
    </main><spotpatch-overlay><b></b></spotpatch-overlay></body></html>`);
  const r = await measureLocations(page, dir, { exclude: [{ selector: "span.lib", reason: "built by a library" }] });
  assert.equal(r.total, 10, JSON.stringify(r));
  assert.equal(r.located, 8);
  assert.equal(r.exact, 4); // main, the first button, svg, linearGradient (html and body point at <main)
  assert.deepEqual(r.excluded, { "framework plugin preamble": 1, "Vite CSS injection": 1, "built by a library": 1, "SpotPatch overlay host": 2 });
  const problems = Object.fromEntries(r.misses.map((m) => [m.element.split(" ")[0], m.problem]));
  assert.match(problems.html, /expected <html at src\/App.tsx:1:1, found "<main>"/);
  assert.match(problems.body, /expected <body at src\/App.tsx:1:1/);
  assert.match(problems.head, /no location/);
  assert.match(problems.p, /no location/);
  assert.match(problems.i, /node_modules/);
  assert.ok(r.misses.some((m) => /expected <button at src\/App.tsx:3:5.*nearest <button at 2:5/.test(m.problem)), JSON.stringify(r.misses));
});
