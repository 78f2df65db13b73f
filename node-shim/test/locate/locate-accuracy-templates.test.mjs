// Issue 15, acceptance 1 (JSX frameworks, plain scripts and HTML): the official create-vite templates
// react-ts, preact-ts, solid-ts and vanilla-ts, each in a temp git copy served by a real `vite dev` with
// spotpatch() listed first and the template's own framework plugin, opened in Debian's Chromium. Every
// element of the rendered page that comes from a project file (test/support/locate-accuracy.mjs says which) must
// carry a location, and every location must be exact: its element's start tag at that line and column.
import assert from "node:assert/strict";
import { test } from "node:test";

import { openApp } from "../support/browser-support.mjs";
import { formatMeasurement, measureLocations } from "../support/locate-accuracy.mjs";

/** Template → the selector of an element the app renders (the page is measured once it is there). */
const TEMPLATES = {
  "react-ts": "#root button.counter",
  "preact-ts": "#app button",
  "solid-ts": "#root button.counter",
  "vanilla-ts": "#app button#counter",
};

for (const [app, ready] of Object.entries(TEMPLATES)) {
  test(`${app} template: every project element carries its exact location`, async (t) => {
    const { page, project } = await openApp(t, { app, script: null, waitForOverlay: false });
    await page.waitForSelector(ready, { timeout: 20_000 });
    const r = await measureLocations(page, project.root);
    t.diagnostic(`${app}: ${formatMeasurement(r)}`);
    assert.ok(r.total >= 20, `a real page was measured: ${formatMeasurement(r)}`);
    assert.equal(r.located, r.total, formatMeasurement(r));
    assert.equal(r.exact, r.total, formatMeasurement(r));
    const files = await page.evaluate(() => [...new Set([...document.querySelectorAll("[data-spotpatch-loc]")].map((e) => e.getAttribute("data-spotpatch-loc").replace(/:\d+:\d+$/, "")))].sort());
    t.diagnostic(`${app}: files ${files.join(", ")}`);
    assert.ok(files.includes("index.html"), "the HTML entry's elements are located too");
    assert.deepEqual(page.errors, []);
  });
}
