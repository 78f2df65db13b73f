// Issue 15, acceptance 4 (React): a Vite app in a subfolder of its git repository (Vite's root is
// packages/web, the git top level two levels up). Every location and every usage site is relative to the
// git top level — the project root the engine reads files from — and exact there.
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, renameSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import react from "@vitejs/plugin-react";

import { APPS, launchBrowser, newPage } from "../support/browser-support.mjs";
import { formatMeasurement, measureLocations } from "../support/locate-accuracy.mjs";
import { openPanel, panelOf, recordCalls } from "../support/overlay-flow-helpers.mjs";
import { makeDemoProject, startDevServer, waitFor } from "../support/support.mjs";

test("monorepo (React): an app in packages/web gets git-top-level paths, 100 % exact, and so does its usage chain", async (t) => {
  const project = makeDemoProject(t, {
    source: path.join(APPS, "nested-react"),
    edit(root) {
      const web = path.join(root, "packages", "web");
      mkdirSync(web, { recursive: true });
      for (const name of readdirSync(root)) {
        if (name !== "packages" && name !== "node_modules") renameSync(path.join(root, name), path.join(web, name));
      }
    },
  });
  const app = { ...project, root: path.join(project.root, "packages", "web") };
  const { url } = await startDevServer(t, app, { plugins: [react()], optimizeDeps: {}, options: { providers: [] } });
  const browser = await launchBrowser(t);
  const context = await browser.newContext({ locale: "en-US", permissions: ["clipboard-read", "clipboard-write"] });
  t.after(() => context.close());
  const page = await newPage(context);
  await page.goto(`${url}/`);
  await page.getByRole("button", { name: "Buy Chair" }).waitFor();

  const r = await measureLocations(page, project.root);
  t.diagnostic(`monorepo react: ${formatMeasurement(r)}`);
  assert.ok(r.total >= 10, formatMeasurement(r));
  assert.equal(r.exact, r.total, formatMeasurement(r));
  const files = await page.evaluate(() => [...new Set([...document.querySelectorAll("[data-spotpatch-loc]")].map((e) => e.getAttribute("data-spotpatch-loc").replace(/:\d+:\d+$/, "")))].sort());
  assert.deepEqual(files, ["packages/web/index.html", "packages/web/src/components/Button.tsx", "packages/web/src/components/Card.tsx", "packages/web/src/pages/ProductPage.tsx"]);

  const renders = recordCalls(page, "prompt/render");
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Buy Chair" }).click();
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill("Say Order.");
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await waitFor(() => renders.length > 0, { what: "prompt/render" });
  const sent = renders[0].annotation.targets[0];
  assert.equal(sent.source.file, "packages/web/src/components/Button.tsx");
  assert.deepEqual(sent.usageChain.map((s) => `${s.component} ${s.file}:${s.line}:${s.column}`), [
    "Button packages/web/src/components/Card.tsx:7:7",
    "Card packages/web/src/pages/ProductPage.tsx:8:7",
    "ProductPage packages/web/src/App.tsx:4:10",
    "App packages/web/src/main.tsx:5:53",
  ]);
  const clipboard = await waitFor(async () => {
    const c = await page.evaluate(() => navigator.clipboard.readText());
    return c.includes("Source check: exact") ? c : null;
  }, { what: "the copy prompt" });
  assert.ok(clipboard.includes("  1. packages/web/src/components/Card.tsx:7:7 (component \"Button\")"), clipboard);
  assert.deepEqual(page.errors, []);
});
