// Issue 13, picker findings through the real overlay on the demo app (real `vite dev` + plugin + engine,
// React dev build): badges cost nothing while the panel is closed and nothing moves (Cost), a target
// re-rendered by HMR keeps its element and gets its new source line, and keyboard picking never starts on
// <html>/<body>. Mouse and keys only; no client API from the test.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { shot } from "../support/browser-support.mjs";
import { waitFor } from "../support/support.mjs";
import { openDemo, openPanel, panelOf, pickSaveAndPrice } from "../support/overlay-flow-helpers.mjs";

/** Counts requestAnimationFrame callbacks from now on (window.__raf). */
const countFrames = (page) =>
  page.evaluate(() => {
    window.__raf = 0;
    const raf = window.requestAnimationFrame.bind(window);
    window.requestAnimationFrame = (cb) =>
      raf((ts) => {
        window.__raf++;
        cb(ts);
      });
  });

test("Cost: with targets and the panel closed, no animation frame runs while nothing moves", async (t) => {
  const { page } = await openDemo(t, { script: null });
  await openPanel(page);
  await pickSaveAndPrice(page);
  await panelOf(page).getByRole("button", { name: "Close panel" }).click();
  await panelOf(page).waitFor({ state: "hidden" });
  await page.waitForTimeout(300);
  await countFrames(page);
  await page.waitForTimeout(1000);
  assert.equal(await page.evaluate(() => window.__raf), 0, "closed, idle: no animation frame");
  // Closed, the badges are hidden and listen to nothing: a resize or a scroll costs no frame at all.
  const shownBadges = () =>
    page.evaluate(() =>
      [...document.querySelector("spotpatch-overlay").shadowRoot.querySelectorAll('[part="badge"]')].filter(
        (b) => b.style.display !== "none",
      ).length,
    );
  assert.equal(await shownBadges(), 0, "no badge on the page while the panel is closed");
  await page.setViewportSize({ width: 1200, height: 780 });
  await page.mouse.wheel(0, 200);
  await page.waitForTimeout(1000);
  assert.equal(await page.evaluate(() => window.__raf), 0, "closed: a resize and a scroll cost no frame");
  // Opened again: the badges come back on their elements.
  await openPanel(page);
  await waitFor(async () => (await shownBadges()) === 2, { what: "both badges shown again" });
  await shot(page, "picker-closed-idle");
});

test("HMR: a picked element re-rendered one line lower keeps its target, with the new line, never 'left the page'", async (t) => {
  const { page, project } = await openDemo(t, { script: null });
  await openPanel(page);
  const panel = panelOf(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.locator("span.price").click();
  const card = panel.getByRole("group", { name: "Target 1" });
  await card.getByText("src/components/ProductCard.tsx:11").waitFor();
  const before = await page.locator("span.price").elementHandle();

  // Composing: a line goes in above the price; Vite's HMR re-renders the card with a new <span>.
  const file = path.join(project.root, "src/components/ProductCard.tsx");
  const src = readFileSync(file, "utf8");
  writeFileSync(file, src.replace('<span className="price">', '<div style={{ height: 40 }} />\n      <span className="price">'));
  await page.waitForFunction(
    (old) => !old.isConnected && document.querySelector("span.price")?.getAttribute("data-spotpatch-loc")?.includes(":12:"),
    before,
    { timeout: 20_000 },
  );
  await page.waitForTimeout(1000); // past the picker's re-find window
  await card.getByRole("textbox", { name: "Instruction for target 1" }).fill("Show the price with two decimals.");
  await card.getByText("src/components/ProductCard.tsx:12").waitFor();
  assert.doesNotMatch(await card.innerText(), /left the page/);
  assert.doesNotMatch(await card.innerText(), /ProductCard\.tsx:11/);
  // The badge is on the new price element.
  const badge = await page.evaluate(() => {
    const b = document.querySelector("spotpatch-overlay").shadowRoot.querySelector('[data-spotpatch-badge="1"]');
    return b && b.style.display;
  });
  assert.equal(badge, "flex");
  await shot(page, "picker-hmr-rebound");
});

test("keyboard: the shortcut then Enter with the focus in the panel picks a located element, never <html>", async (t) => {
  const { page } = await openDemo(t, { script: null });
  await page.setViewportSize({ width: 1280, height: 1600 }); // the viewport centre is below the app: empty page
  await openPanel(page);
  await page.waitForTimeout(300);
  await page.keyboard.press("Alt+Shift+S");
  await page.getByRole("button", { name: "Pick elements", pressed: true }).waitFor();
  await page.keyboard.press("Enter");
  const card = panelOf(page).getByRole("group", { name: "Target 1" });
  await card.waitFor();
  const text = await card.innerText();
  assert.doesNotMatch(text, /<(html|body|head)>/);
  assert.match(text, /(src\/[\w/]+\.tsx|index\.html):\d+/); // the first located element (the app's mount point counts)
  await shot(page, "picker-keyboard-start");
});
