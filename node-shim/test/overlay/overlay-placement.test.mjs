// Issue 26 "Panel placement": the panel docks right, left or bottom, resizes by its inner edge (pointer and
// keys), collapses to a pill showing the job's state, and keeps all that per project across a reload; in
// review (and while picking) it moves off the picked elements by itself and says so; at 390×844 pick mode
// collapses it so the page can be picked with the pointer, and a review docks it at the bottom with the
// targets in view. Boxes are measured with getBoundingClientRect in the page; screenshots go to docs/.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { HOST, axeScan, seriousViolations, shot } from "../support/browser-support.mjs";
import {
  inBodyView,
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  focusedName,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  tabTo,
} from "../support/overlay-flow-helpers.mjs";
import { REPO } from "../support/support.mjs";

const DOCS = path.join(REPO, "docs");
const MOBILE = { width: 390, height: 844 };

/**
 * A screenshot under test-artifacts/; with SPOTPATCH_UPDATE_SCREENSHOTS=1 also docs/<name>.png (looked at by
 * a person, referenced from docs/node-shim.md "Placement").
 */
async function docShot(page, name) {
  await shot(page, `overlay-placement-${name}`);
  if (process.env.SPOTPATCH_UPDATE_SCREENSHOTS !== "1") return;
  mkdirSync(DOCS, { recursive: true });
  await page.screenshot({ path: path.join(DOCS, `${name}.png`) });
}

/** The panel's box (viewport px, from getBoundingClientRect in the page), its dock, or null when not shown. */
const panelBox = (page) =>
  page.evaluate((host) => {
    const panel = document.querySelector(host)?.shadowRoot?.querySelector(".sp-panel");
    if (!panel) return null;
    const r = panel.getBoundingClientRect();
    return { left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height, dock: panel.dataset.dock };
  }, HOST);

/** The boxes of the demo's picked elements (the Save button and the price), measured in the page. */
const targetBoxes = (page) =>
  page.evaluate(() =>
    [...document.querySelectorAll("button, span.price")]
      .filter((el) => el.matches("span.price") || el.textContent.trim() === "Save")
      .map((el) => {
        const r = el.getBoundingClientRect();
        return { what: el.textContent.trim(), left: r.left, top: r.top, right: r.right, bottom: r.bottom };
      }),
  );

/** The overlay's box that could cover the page now: the panel, else the pill. */
const overlayBox = (page) =>
  page.evaluate((host) => {
    const root = document.querySelector(host)?.shadowRoot;
    const el = root?.querySelector(".sp-panel") ?? root?.querySelector(".sp-pill");
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return { left: r.left, top: r.top, right: r.right, bottom: r.bottom, kind: el.className };
  }, HOST);

const intersects = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

/** No picked element's box meets the overlay's box (the panel or the pill). */
async function assertUncovered(page, step) {
  const overlay = await overlayBox(page);
  assert.ok(overlay, `${step}: the panel or its pill is shown`);
  const targets = await targetBoxes(page);
  assert.equal(targets.length, 2, `${step}: both targets are on the page`);
  for (const target of targets)
    assert.ok(!intersects(overlay, target), `${step}: ${overlay.kind} ${JSON.stringify(overlay)} covers ${JSON.stringify(target)}`);
}

const liveText = (page) =>
  page.evaluate((host) => document.querySelector(host)?.shadowRoot?.querySelector("[data-placement-live]")?.textContent ?? "", HOST);

/** With the panel open: pick Save and the price, write the demo's instructions, Submit, wait for the review. */
async function reviewJob(page, beforeSubmit = async () => {}) {
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await beforeSubmit();
  await panelOf(page).getByRole("button", { name: "Submit" }).click();
  await panelOf(page).getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
}

/** Wait until the focus is on `want` (a name or a regexp; the panel moves the focus after its render). */
async function focusIs(page, want, message) {
  const ok = (name) => (want instanceof RegExp ? want.test(name) : name === want);
  const deadline = Date.now() + 3000;
  let name = await focusedName(page);
  while (!ok(name) && Date.now() < deadline) {
    await page.waitForTimeout(50);
    name = await focusedName(page);
  }
  if (want instanceof RegExp) assert.match(name, want, message);
  else assert.equal(name, want, message);
}

const menuButton = (page) => panelOf(page).getByRole("button", { name: "Panel position" });

/** Choose `item` in the placement menu with the mouse. */
async function chooseDock(page, item) {
  await menuButton(page).click();
  await page.getByRole("menuitemradio", { name: item }).or(page.getByRole("menuitem", { name: item })).click();
}

test("review at 1280×800: the panel moves off the picked elements, says so, and the user's choice wins after that", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  // Once the targets are picked, the user docks the panel left, over them: the review moves it.
  await reviewJob(page, async () => {
    await chooseDock(page, "Dock left");
    assert.equal((await panelBox(page)).dock, "left");
  });
  await page.waitForTimeout(300);
  await assertUncovered(page, "review");
  assert.match(await liveText(page), /^Moved the panel to the (right|bottom) so it doesn't cover targets? [\d, ]+\.$|^Collapsed the panel/);
  await docShot(page, "overlay-review-moved");
  // The user's explicit choice wins after that: docked left again, it stays there.
  await chooseDock(page, "Dock left");
  await page.waitForTimeout(500);
  assert.equal((await panelBox(page)).dock, "left");
  assert.equal(await liveText(page), "");
  // Collapsed, the pill shows the job's state and covers no target.
  await chooseDock(page, "Collapse to a pill");
  await page.getByRole("button", { name: /Ready for review.*Expand the panel/ }).waitFor();
  await assertUncovered(page, "pill");
  await docShot(page, "overlay-pill");
  assert.deepEqual(page.errors, []);
});

/** The separator on the panel's inner edge. */
const separator = (page) => panelOf(page).getByRole("separator", { name: "Resize the panel" });
const valueNow = async (page) => Number(await separator(page).getAttribute("aria-valuenow"));
const pill = (page) => page.getByRole("button", { name: /Expand the panel/ });

test("1280×800: dock right, left, bottom from the menu; resize by pointer and keys; collapse and expand; a reload keeps it", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  let box = await panelBox(page);
  assert.deepEqual([box.dock, box.width, box.right], ["right", 440, 1268], "docked right by default");
  await chooseDock(page, "Dock left");
  box = await panelBox(page);
  assert.deepEqual([box.dock, box.left, box.width], ["left", 12, 440]);
  await docShot(page, "overlay-dock-left");
  await chooseDock(page, "Dock bottom");
  box = await panelBox(page);
  assert.deepEqual([box.dock, box.left, box.right, box.bottom, box.height], ["bottom", 12, 1268, 788, 320]);
  await docShot(page, "overlay-dock-bottom");
  await chooseDock(page, "Dock right");
  // Pointer: drag the inner edge 100 px to the left.
  const edge = await separator(page).boundingBox();
  await page.mouse.move(edge.x + edge.width / 2, edge.y + 200);
  await page.mouse.down();
  await page.mouse.move(edge.x + edge.width / 2 - 50, edge.y + 200, { steps: 3 });
  await page.mouse.move(edge.x + edge.width / 2 - 100, edge.y + 200, { steps: 3 });
  await page.mouse.up();
  box = await panelBox(page);
  assert.ok(Math.abs(box.width - 540) <= 6, `dragged to about 540 px wide (got ${box.width})`);
  assert.equal(await valueNow(page), Math.round(box.width));
  // Keys: ArrowLeft grows a right dock by 16, Shift+ArrowRight shrinks it by 64, Home/End: the bounds.
  await separator(page).focus();
  const before = await valueNow(page);
  await page.keyboard.press("ArrowLeft");
  assert.equal(await valueNow(page), before + 16);
  await page.keyboard.press("Shift+ArrowRight");
  assert.equal(await valueNow(page), before + 16 - 64);
  await page.keyboard.press("End");
  assert.equal((await panelBox(page)).width, 1256);
  await page.keyboard.press("Home");
  assert.equal((await panelBox(page)).width, 300);
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft");
  assert.equal((await panelBox(page)).width, 332);
  // Collapse to the pill and back.
  await chooseDock(page, "Collapse to a pill");
  await panelOf(page).waitFor({ state: "detached" });
  await pill(page).waitFor();
  await focusIs(page, /^button:SpotPatch/, "the pill has the focus after a collapse");
  await pill(page).click();
  await panelOf(page).waitFor();
  await focusIs(page, "h2:SpotPatch", "expanding focuses the panel's heading");
  box = await panelBox(page);
  assert.deepEqual([box.dock, box.width], ["right", 332], "the size is kept through a collapse");
  // A reload keeps dock and size (localStorage, per project), and a collapse.
  await chooseDock(page, "Dock left");
  await page.reload();
  await openPanel(page);
  box = await panelBox(page);
  assert.deepEqual([box.dock, box.left, box.width], ["left", 12, 332], "reload keeps the dock and width");
  const stored = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.endsWith(":placement")));
  assert.equal(stored.length, 1);
  assert.match(stored[0], /^spotpatch:[0-9a-f]+:placement$/, "the key is per project (a hash, never a path)");
  await chooseDock(page, "Collapse to a pill");
  await page.reload();
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  await pill(page).waitFor();
  assert.equal(await panelBox(page), null, "reload keeps the collapse");
  await pill(page).click();
  assert.equal((await panelBox(page)).dock, "left");
  assert.deepEqual(page.errors, []);
});

test("keyboard only: the placement menu, Alt+Shift+D, the separator and the pill; axe clean; zh-CN", async (t) => {
  const { page } = await openDemo(t);
  await page.getByRole("button", { name: "SpotPatch", exact: true }).focus();
  await page.keyboard.press("Enter");
  await panelOf(page).waitFor();
  await tabTo(page, /^button:Panel position$/);
  await page.keyboard.press("Enter");
  await focusIs(page, "button:✓Dock right", "the menu opens on the current dock");
  const serious = seriousViolations(await axeScan(page));
  assert.deepEqual(serious, [], `axe, placement menu open: ${JSON.stringify(serious, null, 1)}`);
  await docShot(page, "overlay-dock-menu");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  assert.equal((await panelBox(page)).dock, "left");
  await focusIs(page, "button:Panel position", "the focus returns to the menu button");
  // Esc closes the menu only (the panel stays).
  await page.keyboard.press("ArrowDown");
  await focusIs(page, "button:Dock right");
  await page.keyboard.press("Escape");
  assert.equal(await page.getByRole("menu").count(), 0);
  await panelOf(page).waitFor();
  await focusIs(page, "button:Panel position");
  // Alt+Shift+D: left → bottom → pill → right.
  await page.keyboard.press("Alt+Shift+D");
  assert.equal((await panelBox(page)).dock, "bottom");
  await tabTo(page, /^div:Resize the panel$/);
  const height = (await panelBox(page)).height;
  await page.keyboard.press("ArrowUp");
  assert.equal((await panelBox(page)).height, height + 16, "ArrowUp raises a bottom dock");
  await page.keyboard.press("Alt+Shift+D");
  await pill(page).waitFor();
  await focusIs(page, /^button:SpotPatch/, "the pill has the focus");
  const axePill = seriousViolations(await axeScan(page));
  assert.deepEqual(axePill, [], `axe, pill: ${JSON.stringify(axePill, null, 1)}`);
  await page.keyboard.press("Enter");
  await panelOf(page).waitFor();
  assert.equal((await panelBox(page)).dock, "bottom", "Enter on the pill expands where it was");
  await focusIs(page, "h2:SpotPatch");
  await page.keyboard.press("Alt+Shift+D");
  await pill(page).waitFor();
  await page.keyboard.press("Alt+Shift+D");
  await panelOf(page).waitFor();
  assert.equal((await panelBox(page)).dock, "right", "from the pill, the shortcut docks right");
  // zh-CN.
  await panelOf(page).getByRole("combobox").first().selectOption("zh-CN");
  const zh = panelOf(page);
  await zh.getByRole("button", { name: "面板位置" }).click();
  for (const name of ["停靠在右侧", "停靠在左侧", "停靠在底部"]) await page.getByRole("menuitemradio", { name }).waitFor();
  await page.getByText("Alt+Shift+D 切换面板位置").waitFor();
  await page.getByRole("menuitem", { name: "收起为小标签" }).click();
  await page.getByRole("button", { name: /面板已收起.*展开面板/ }).waitFor();
  await focusIs(page, /^button:SpotPatch.*面板已收起/, "the pill has the focus after the menu collapsed the panel"); // then Enter
  await page.keyboard.press("Enter");
  await zh.getByRole("separator", { name: "调整面板大小" }).waitFor();
  assert.deepEqual(page.errors, []);
});

test("390×844: pick mode collapses the panel so the pointer picks; the review docks at the bottom off the targets", async (t) => {
  const { page } = await openDemo(t);
  await page.setViewportSize(MOBILE);
  await openPanel(page);
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click();
  await pill(page).waitFor();
  assert.equal(await panelBox(page), null, "no panel over the page while picking");
  assert.match(await liveText(page), /collapsed while you pick/);
  await docShot(page, "overlay-mobile-pick");
  // The pointer reaches the page's elements (Playwright's click fails when something covers them).
  await page.getByRole("button", { name: "Save", exact: true }).click({ modifiers: ["Shift"], timeout: 5000 });
  await page.locator("span.price").click({ timeout: 5000 });
  await page.getByRole("textbox", { name: "Instruction for target 2" }).waitFor();
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panelOf(page).getByRole("button", { name: "Submit" }).click();
  await panelOf(page).getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await page.waitForTimeout(300);
  const box = await panelBox(page);
  assert.equal(box?.dock, "bottom", "the review docks at the bottom");
  assert.ok(box.height <= MOBILE.height * 0.4 + 1, `at most 40% of the height (got ${box.height})`);
  await assertUncovered(page, "review at 390×844");
  // The review opens at its top (status and summary), not where the live timeline had scrolled the body to.
  assert.ok(await panelOf(page).locator("#sp-job-h").evaluate(inBodyView), "the job's heading and status are in view");
  await docShot(page, "overlay-mobile");
  // The resize handle's range is the one it can reach: End stops at the share the small viewport allows.
  const max = Number(await separator(page).getAttribute("aria-valuemax"));
  assert.ok(max <= MOBILE.height * 0.4 + 1, `aria-valuemax ${max} is within the 40% the panel can take`);
  await separator(page).focus();
  await page.keyboard.press("End");
  await page.waitForTimeout(200);
  assert.equal(await valueNow(page), max, "End reaches aria-valuemax");
  assert.ok((await panelBox(page)).height <= max + 1, "and the panel is that tall, no taller");
  assert.deepEqual(page.errors, []);
});

test("closed, the placement costs nothing: a resize schedules no frame; opened again, the panel fits the new viewport", async (t) => {
  const { page } = await openDemo(t, { script: null });
  await openPanel(page);
  await chooseDock(page, "Dock left");
  await panelOf(page).getByRole("button", { name: "Close panel" }).click();
  await panelOf(page).waitFor({ state: "hidden" });
  await page.waitForTimeout(300);
  // Count requestAnimationFrame callbacks from now on: the panel's effects run after a frame.
  await page.evaluate(() => {
    window.__raf = 0;
    const raf = window.requestAnimationFrame.bind(window);
    window.requestAnimationFrame = (cb) => raf((ts) => (window.__raf++, cb(ts)));
  });
  await page.setViewportSize({ width: 900, height: 600 });
  await page.waitForTimeout(1000);
  assert.equal(await page.evaluate(() => window.__raf), 0, "closed: a resize costs no frame");
  await openPanel(page);
  const box = await panelBox(page);
  assert.equal(box?.dock, "left", "the chosen dock is kept");
  assert.ok(box.right <= 900 && box.bottom <= 600, `the panel fits the new viewport: ${JSON.stringify(box)}`);
});
