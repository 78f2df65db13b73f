// Issue 15, acceptance 2 (React, Preact) and 3 (stale locations): a page using a shared `Button` inside a
// `Card` inside a page component (test/apps/nested-react, nested-preact) in a real `vite dev` and Debian's
// Chromium. The person picks the second card's button in the overlay; the card shows the usage chain, and
// the copy prompt (AI off: `prompt/render` through the real engine) lists the usage sites exactly:
// `<Button>` in Card.tsx, `<Card>` (the second one) in ProductPage.tsx, `<ProductPage>` in App.tsx, `<App>`
// in main.tsx. Then an edit shifts Button.tsx (HMR): the picked location is marked approximate with the
// nearest `<button`; the same button picked again after the module reloaded is exact.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { openApp } from "../support/browser-support.mjs";
import { openPanel, panelOf, recordCalls, waitFor } from "../support/overlay-flow-helpers.mjs";

/** The clipboard's text once it contains `text` (the copy prompt is written after an engine round trip). */
const clipboardWith = (page, text) =>
  waitFor(async () => {
    const c = await page.evaluate(() => navigator.clipboard.readText());
    return c.includes(text) ? c : null;
  }, { what: `the clipboard to contain ${text}` });

/** 1-based line/column of the first `needle` in the project file at or after `from` (a line number). */
function where(root, file, needle, from = 1) {
  const lines = readFileSync(path.join(root, file), "utf8").split("\n");
  for (let i = from - 1; i < lines.length; i++) {
    const col = lines[i].indexOf(needle);
    if (col >= 0) return { file, line: i + 1, column: col + 1 };
  }
  throw new Error(`${needle} not in ${file}`);
}

async function pickChairButton(page, n) {
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Buy Chair" }).click();
  await panel.getByRole("group", { name: `Target ${n}` }).waitFor();
  await page.getByRole("textbox", { name: `Instruction for target ${n}` }).fill("Make this one say Order.");
}

for (const app of ["nested-react", "nested-preact"]) {
  test(`${app}: the inner button's usage chain is exact (card, copy prompt); a stale location is marked after an HMR edit`, async (t) => {
    const { page, project } = await openApp(t, { app, script: null, options: { providers: [] } });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByRole("button", { name: "Buy Chair" }).waitFor();
    const root = project.root;
    const expected = [
      { component: "Button", ...where(root, "src/components/Card.tsx", "<Button") },
      { component: "Card", ...where(root, "src/pages/ProductPage.tsx", '<Card title="Chair"') },
      { component: "ProductPage", ...where(root, "src/App.tsx", "<ProductPage") },
      { component: "App", ...where(root, "src/main.tsx", "<App") },
    ];
    const own = where(root, "src/components/Button.tsx", "<button");
    // The spread props put the usage prop on the DOM button too; its own location is untouched.
    const attrs = await page.getByRole("button", { name: "Buy Chair" }).evaluate((el) => [el.getAttribute("data-spotpatch-loc"), el.getAttribute("data-spotpatch-use")]);
    assert.deepEqual(attrs, [`${own.file}:${own.line}:${own.column}`, `${expected[0].file}:${expected[0].line}:${expected[0].column}`]);

    const renders = recordCalls(page, "prompt/render");
    await openPanel(page);
    const panel = panelOf(page);
    await pickChairButton(page, 1);
    const card = panel.getByRole("group", { name: "Target 1" });
    const shown = expected.map((s) => `<${s.component}> ${s.file}:${s.line}`).join(" ← ");
    await card.getByText(`Used at ${shown}`).waitFor();

    await panel.getByRole("button", { name: "Copy prompt" }).click();
    await panel.getByText("The prompt for 1 target is on the clipboard.").waitFor();
    assert.deepEqual(renders[0].annotation.targets[0].usageChain, expected, "sent exactly, innermost first");
    // React names the element's component from its fiber; Preact's name is in the chain only.
    const named = app === "nested-react" ? { component: "Button" } : {};
    assert.deepEqual(renders[0].annotation.targets[0].source, { ...own, ...named });
    const sourceLine = (loc) => `Source: ${loc}${app === "nested-react" ? " (component Button)" : ""}`;
    let clipboard = await page.evaluate(() => navigator.clipboard.readText());
    const listed = expected.map((s, i) => `  ${i + 1}. ${s.file}:${s.line}:${s.column} (component "${s.component}")`).join("\n");
    assert.ok(clipboard.includes(`Used at (component usage chain, innermost first; the usage the user clicked through):\n${listed}\n`), clipboard);
    assert.ok(clipboard.includes(`Source check: exact (\`<button\` starts at that line and column in the file now).`), clipboard);

    // An edit that shifts lines (as a person saving in the editor): HMR updates the page, the card's
    // location is now stale and the prompt says so, with the nearest <button.
    const file = path.join(root, own.file);
    writeFileSync(file, `// one\n// two\n${readFileSync(file, "utf8")}`);
    const moved = `${own.file}:${own.line + 2}:${own.column}`;
    await page.waitForFunction((v) => document.querySelector("button.btn")?.getAttribute("data-spotpatch-loc") === v, moved, { timeout: 20_000 });
    await panel.getByRole("button", { name: "Copy prompt" }).click();
    clipboard = await clipboardWith(page, "APPROXIMATE");
    assert.ok(clipboard.includes(sourceLine(`${own.file}:${own.line}:${own.column}`)), clipboard);
    assert.ok(clipboard.includes(`Source check: APPROXIMATE`) && clipboard.includes(`nearest \`<button\` at line ${own.line + 2}, column ${own.column}`), clipboard);

    // Removed and picked again after the module reloaded: exact again.
    await panel.getByRole("button", { name: "Remove target 1" }).click();
    await card.waitFor({ state: "detached" });
    await page.evaluate(() => navigator.clipboard.writeText(""));
    await pickChairButton(page, 1);
    await panel.getByRole("button", { name: "Copy prompt" }).click();
    clipboard = await clipboardWith(page, "## Target 1");
    assert.ok(clipboard.includes(`${sourceLine(moved)}\nSource check: exact`), clipboard);
    assert.deepEqual(page.errors, []);
  });
}

test("nested-react: a usage prop with an absolute or node_modules path (written by hand, not by the locator) never leaves the page", async (t) => {
  const { page } = await openApp(t, {
    app: "nested-react",
    script: null,
    options: { providers: [] },
    edit(root) {
      const file = path.join(root, "src/pages/ProductPage.tsx");
      const extra = `      <Card title="Desk" data-spotpatch-use="/home/me/secret/Card.tsx:1:1" />\n      <Card title="Shelf" data-spotpatch-use="node_modules/ui/Card.tsx:1:1" />\n`;
      writeFileSync(file, readFileSync(file, "utf8").replace("    </main>", `${extra}    </main>`));
    },
  });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.getByRole("button", { name: "Buy Shelf" }).waitFor();
  const renders = recordCalls(page, "prompt/render");
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Buy Desk" }).click({ modifiers: ["Shift"] });
  await page.getByRole("button", { name: "Buy Shelf" }).click();
  for (const n of [1, 2]) await page.getByRole("textbox", { name: `Instruction for target ${n}` }).fill("Say Order.");
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await waitFor(() => renders.length > 0, { what: "prompt/render" });
  for (const target of renders[0].annotation.targets) {
    assert.deepEqual(target.usageChain.map((s) => s.component), ["Button", "ProductPage", "App"], "the Card site is dropped");
  }
  const sent = JSON.stringify(renders[0]);
  assert.ok(!sent.includes("/home/me") && !sent.includes("node_modules"), sent);
  assert.deepEqual(page.errors, []);
});
