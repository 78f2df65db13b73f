// Helpers of the overlay flow tests (issue 13, acceptance 1 a–i): a person's actions on the real overlay
// (roles, clicks, keys), never the client API. The app, dev server, engine and browser come from
// browser-support.mjs (openApp).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";

import { HOST, openApp, shot } from "./browser-support.mjs";
import { PYTHON, TOUCHED, waitFor } from "./support.mjs";

export { TOUCHED, waitFor };

/** A required project check that passes and prints a line (the review shows it). */
export const LINT_CHECK = { id: "lint", name: "Lint", command: PYTHON, args: ["-c", "print('lint: 0 problems')"] };

export const SAVE_INSTRUCTION = "Make the Save button the primary button (class `btn-primary`).";
export const PRICE_INSTRUCTION = "Show the price with two decimals.";

/** The demo app with a 1280×800 page; `options` merge over the scripted provider and the Lint check. */
export async function openDemo(t, { options = {}, ...rest } = {}) {
  const app = await openApp(t, { options: { checks: [LINT_CHECK], ...options }, ...rest });
  await app.page.setViewportSize({ width: 1280, height: 800 });
  await app.page
    .getByRole("button", { name: "Save", exact: true })
    .or(app.page.locator("span.price"))
    .first()
    .waitFor();
  return app;
}

export const panelOf = (page) => page.getByRole("complementary", { name: "SpotPatch" });

/** Click the launcher (the panel opens). */
export async function openPanel(page) {
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  await panelOf(page).waitFor();
  await panelOf(page)
    .getByText(/Repository:|AI is off|cannot start a job|local changes/)
    .first()
    .waitFor();
}

/** Pick mode from the panel, Shift+click the Save button (stay), click the price (leave). */
export async function pickSaveAndPrice(page) {
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Save", exact: true }).click({ modifiers: ["Shift"] });
  await page.locator("span.price").click();
  await page.getByRole("textbox", { name: "Instruction for target 2" }).waitFor();
}

/** The file's bytes in the project. */
export const bytesOf = (project, rel = TOUCHED) => readFileSync(path.join(project.root, rel));

/** Every JSON body the page posts to `/__spotpatch/rpc/<method>` (observed, not sent by the test). */
export function recordCalls(page, method) {
  const bodies = [];
  page.on("request", (request) => {
    if (request.method() === "POST" && request.url().endsWith(`/__spotpatch/rpc/${method}`))
      bodies.push(request.postDataJSON());
  });
  return bodies;
}

/** The name the keyboard focus is on inside the overlay (aria-label, label text or text). */
export function focusedName(page) {
  return page.evaluate((host) => {
    const root = document.querySelector(host)?.shadowRoot;
    let el = root?.activeElement ?? document.activeElement;
    if (!el) return "";
    const label = el.getAttribute("aria-label") ?? (el.labels?.[0]?.textContent || el.textContent || "");
    return `${el.tagName.toLowerCase()}:${label.trim()}`;
  }, HOST);
}

/** Press Tab (or Shift+Tab) until `want` (a regexp on focusedName) has the focus; at most `max` presses. */
export async function tabTo(page, want, { back = false, max = 40 } = {}) {
  for (let i = 0; i < max; i += 1) {
    if (want.test(await focusedName(page))) return;
    await page.keyboard.press(back ? "Shift+Tab" : "Tab");
  }
  assert.fail(`focus never reached ${want} (last: ${await focusedName(page)})`);
}

/** A screenshot under test-artifacts/ (looked at by a person; not asserted). */
export const snap = (page, name) => shot(page, `overlay-flow-${name}`);

/** Open the panel, pick Save and the price, write the two demo instructions, click Submit. */
export async function submitDemoJob(page) {
  await openPanel(page);
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panelOf(page).getByRole("button", { name: "Submit" }).click();
}

/** In the page: whether the element's box lies inside the panel body's visible part (scrolled into view). */
export const inBodyView = (el) => {
  const body = el.closest(".sp-body").getBoundingClientRect();
  const box = el.getBoundingClientRect();
  return box.height > 0 && box.top >= body.top - 1 && box.bottom <= body.bottom + 1;
};

/** The page's texts (not the overlay's) that badge `n` covers, measured by line boxes; null without that badge. */
export function textUnderBadge(page, n) {
  return page.evaluate(
    ([host, n]) => {
      const root = document.querySelector(host).shadowRoot;
      const badge = root.querySelector(`[data-spotpatch-badge="${n}"]`) ?? document.querySelector(`[data-spotpatch-badge="${n}"]`);
      if (!badge) return null;
      const b = badge.getBoundingClientRect();
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      const hits = [];
      for (let t = walker.nextNode(); t; t = walker.nextNode()) {
        if (!t.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(t);
        for (const r of range.getClientRects()) if (r.width > 0 && r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom) hits.push(t.textContent);
      }
      return hits;
    },
    [HOST, n],
  );
}
