// Issue 26's remaining overlay findings (6, 8, 9, 10, 11, 13, 14), one browser test each (real `vite dev`,
// real engine, Debian chromium): what a new user met, measured in the page — boxes, focus, the clipboard —
// never by reading our own source. The first round is overlay-legibility.test.mjs.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import { HOST, axeScan, seriousViolations } from "../support/browser-support.mjs";
import { PYTHON } from "../support/support.mjs";
import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  bytesOf,
  focusedName,
  inBodyView,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  snap,
  submitDemoJob,
  textUnderBadge,
  waitFor,
} from "../support/overlay-flow-helpers.mjs";

/** Pick five targets (Shift+click four, click the fifth): the panel's body scrolls. */
async function pickFive(page) {
  await page.getByRole("button", { name: "Pick elements" }).click();
  const items = page.locator("ul.items li");
  for (const el of [page.getByRole("button", { name: "Save", exact: true }), page.locator("span.price"), items.nth(0), items.nth(1)])
    await el.click({ modifiers: ["Shift"] });
  await items.nth(2).click();
  await panelOf(page).getByRole("textbox", { name: "Instruction for target 5" }).waitFor();
}

/** Wait until the keyboard focus is on `name` (focusedName's form); the focus moves after a render. */
const focusOn = (page, name) => waitFor(async () => (await focusedName(page)) === name, { timeoutMs: 3_000, what: `the focus on ${name}` }).catch(async () => assert.equal(await focusedName(page), name));

const clipboard = (page) => page.evaluate(() => navigator.clipboard.readText());

test("finding 6: the review offers one set of actions: Apply and Back to edit (no Cancel beside them)", async (t) => {
  const { page, project } = await openDemo(t);
  const original = bytesOf(project);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const actions = panel.getByRole("group", { name: "Job" });
  assert.deepEqual(await actions.getByRole("button").allInnerTexts(), ["Apply", "Back to edit"]);
  await snap(page, "findings2-6-review-actions");
  // Back to edit discards the change (nothing applied) and loses nothing: the targets and instructions return.
  await panel.getByRole("button", { name: "Back to edit" }).click();
  assert.equal(await panel.getByRole("textbox", { name: "Instruction for target 1" }).inputValue(), SAVE_INSTRUCTION);
  assert.equal(await panel.getByRole("textbox", { name: "Instruction for target 2" }).inputValue(), PRICE_INSTRUCTION);
  assert.deepEqual(bytesOf(project), original, "nothing was applied");
  assert.deepEqual(page.errors, []);
});

test("finding 8: the “Target this text” button appears in view in a scrolled panel", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  await pickFive(page);
  const panel = panelOf(page);
  await panel.locator(".sp-body").evaluate((el) => el.scrollTo(0, el.scrollHeight));
  // Select the page's heading text (as a mouse drag would).
  await page.evaluate(() => {
    const h1 = document.querySelector("h1");
    const range = document.createRange();
    range.selectNodeContents(h1);
    document.getSelection().removeAllRanges();
    document.getSelection().addRange(range);
  });
  const button = panel.getByRole("button", { name: "Target this text" });
  await button.waitFor();
  await page.waitForTimeout(300);
  assert.equal(await button.evaluate(inBodyView), true, "the button is in view");
  await snap(page, "findings2-8-target-text-in-view");
  assert.deepEqual(page.errors, []);
});

test("finding 9: the live timeline follows the newest row; scrolled up it stays, and “Newest ↓” brings it back", async (t) => {
  const { page } = await openDemo(t, { script: "slow-demo" });
  await page.setViewportSize({ width: 1280, height: 420 });
  await submitDemoJob(page);
  const panel = panelOf(page);
  const body = panel.locator(".sp-body");
  const rows = panel.locator("ol.sp-timeline li");
  await panel.getByRole("status").filter({ hasText: "The model is working" }).waitFor();
  // Following: each new row is in view as it arrives.
  let seen = await rows.count();
  for (let i = 0; i < 2; i += 1) {
    await page.waitForFunction(
      ([host, n]) => document.querySelector(host).shadowRoot.querySelectorAll("ol.sp-timeline li").length > n,
      [HOST, seen],
      { timeout: 20_000 },
    );
    await page.waitForTimeout(150);
    seen = await rows.count();
    assert.equal(await rows.last().evaluate(inBodyView), true, `row ${seen} (the newest) is in view`);
  }
  // Scrolled up: new rows do not move the view; the affordance shows.
  await body.evaluate((el) => el.scrollTo(0, 0));
  await page.waitForFunction(
    ([host, n]) => document.querySelector(host).shadowRoot.querySelectorAll("ol.sp-timeline li").length > n,
    [HOST, await rows.count()],
    { timeout: 20_000 },
  );
  await page.waitForTimeout(150);
  assert.equal(await body.evaluate((el) => el.scrollTop), 0, "the view stays where the user put it");
  const newest = panel.getByRole("button", { name: "Newest ↓" });
  await newest.waitFor();
  assert.equal(await newest.evaluate(inBodyView), true, "the button is in view");
  await snap(page, "findings2-9-newest");
  await newest.click();
  await page.waitForTimeout(150);
  assert.equal(await rows.last().evaluate(inBodyView), true, "the newest row is back in view");
  assert.equal(await newest.count(), 0, "following again: no button");
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  await panel.getByRole("combobox").first().selectOption("en");
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 60_000 });
  assert.deepEqual(page.errors, []);
});

/** The error text's visible occurrences in the panel (closed details and hidden text do not count). */
const visibleCount = (panel, text) => panel.evaluate((el, s) => el.innerText.split(s).length - 1, text);

test("finding 10: a failed job shows its error once and offers Copy prompt of its targets", async (t) => {
  const failing = { id: "lint", name: "Lint", command: PYTHON, args: ["-c", "import sys; print('3 problems'); sys.exit(1)"] };
  const { page } = await openDemo(t, { options: { checks: [failing] } });
  await submitDemoJob(page);
  const panel = panelOf(page);
  const alert = panel.getByRole("alert").filter({ hasText: /The job failed\. What the engine reported:/ });
  await alert.waitFor({ timeout: 30_000 });
  const error = (await alert.locator("p.sp-code").innerText()).trim();
  assert.match(error, /^CHECK_FAILED: /);
  assert.equal(await visibleCount(panel, error.slice("CHECK_FAILED: ".length)), 1, "the error message once");
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await panel.getByText("The prompt for 2 targets is on the clipboard.").waitFor();
  const text = await clipboard(page);
  assert.ok(text.includes(SAVE_INSTRUCTION) && text.includes(PRICE_INSTRUCTION), "both instructions are in the prompt");
  // The notice's own Dismiss is named apart from the job's: one button is exactly "Dismiss".
  assert.equal(await panel.getByRole("button", { name: "Dismiss", exact: true }).count(), 1);
  assert.equal(await panel.getByRole("button", { name: "Dismiss this message", exact: true }).count(), 1);
  await snap(page, "findings2-10-failed");
  const serious = seriousViolations(await axeScan(page));
  assert.deepEqual(serious, [], `axe: ${JSON.stringify(serious, null, 1)}`);

  // Dismiss drops the targets and instructions: asked first, like New edit (focus on Keep, Esc keeps).
  const dismiss = panel.getByRole("group", { name: "Job" }).getByRole("button", { name: "Dismiss", exact: true });
  await dismiss.click();
  await panel.getByText(/^Dismiss this job\? Its 2 targets and instructions are dropped\./).waitFor();
  await focusOn(page, "button:Keep them"); // the safe choice has the focus
  await page.keyboard.press("Escape");
  await dismiss.waitFor();
  assert.equal(await panel.getByText(/^Dismiss this job\?/).count(), 0, "Esc keeps the job");
  await dismiss.click();
  await panel.getByRole("button", { name: "Drop them and start a new edit" }).click();
  await panel.getByRole("button", { name: "Submit" }).waitFor();
  assert.equal(await panel.getByRole("textbox", { name: "Instruction for target 1" }).count(), 0, "the targets are dropped");
});

test("finding 10: without AI, Copy prompt of the targets", async (t) => {
  const { page } = await openDemo(t, { script: null, options: { providers: [] } });
  await openPanel(page);
  await pickSaveAndPrice(page);
  const panel = panelOf(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await panel.getByText("The prompt for 2 targets is on the clipboard.").waitFor();
  assert.ok((await clipboard(page)).includes(SAVE_INSTRUCTION));
});

test("finding 10: with no engine at all (its command fails to start), Copy prompt of the targets still works", async (t) => {
  const { page, project } = await openDemo(t, { script: null, options: { command: [path.join("/nonexistent", "spotpatch-agent"), "serve"] } });
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  const panel = panelOf(page);
  await panel.getByText(/^The engine is not available\./).waitFor({ timeout: 15_000 });
  await pickSaveAndPrice(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await panel.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await panel.getByText(/^The prompt for 2 targets is on the clipboard, built in the page: the engine is not available/).waitFor();
  const text = await clipboard(page);
  assert.match(text, /## Target 1: <button> in src\/components\/ProductCard\.tsx:\d+/);
  assert.ok(text.includes(`Instruction: ${SAVE_INSTRUCTION}`) && text.includes(`Instruction: ${PRICE_INSTRUCTION}`));
  assert.ok(!text.includes(project.root), "no absolute path in the prompt");
  await snap(page, "findings2-10-no-engine");
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  await panel.getByRole("button", { name: "复制提示词" }).click();
  await panel.getByText(/引擎不可用，提示词在页面中生成/).waitFor();
});

test("finding 11: New edit asks inside the panel: focus on Keep, Esc keeps, nothing lands on Revert", async (t) => {
  const { page, project } = await openDemo(t);
  let dialogs = 0;
  page.on("dialog", (d) => {
    dialogs += 1;
    void d.dismiss();
  });
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).click({ timeout: 30_000 });
  const newEdit = panel.getByRole("button", { name: "New edit" });
  await newEdit.waitFor({ timeout: 30_000 });
  const applied = bytesOf(project);
  await newEdit.focus();
  await page.keyboard.press("Enter");
  const question = panel.locator("[data-sp-confirm]");
  await question.waitFor();
  assert.match(await question.innerText(), /Start a new edit\? The 2 targets and instructions of this job are dropped/);
  await focusOn(page, "button:Keep them"); // the safe choice has the focus
  assert.equal(await panel.getByRole("button", { name: "Revert" }).count(), 0, "no Revert inside the question");
  const serious = seriousViolations(await axeScan(page));
  assert.deepEqual(serious, [], `axe: ${JSON.stringify(serious, null, 1)}`);
  await snap(page, "findings2-11-new-edit-confirm");
  // Esc keeps (and the panel stays open); the focus comes back to New edit, never to Revert.
  await page.keyboard.press("Escape");
  await question.waitFor({ state: "detached" });
  assert.equal(await panel.count(), 1, "the panel is still open");
  await focusOn(page, "button:New edit");
  // Enter on the question's default keeps too; Space twice does not revert.
  await page.keyboard.press("Enter");
  await question.waitFor();
  await focusOn(page, "button:Keep them");
  await page.keyboard.press(" ");
  await question.waitFor({ state: "detached" });
  await focusOn(page, "button:New edit");
  await page.keyboard.press(" ");
  await question.waitFor();
  await focusOn(page, "button:Keep them");
  await page.keyboard.press("Escape");
  assert.deepEqual(bytesOf(project), applied, "nothing reverted");
  // Drop: the composer, empty.
  await newEdit.click();
  await panel.getByRole("button", { name: "Drop them and start a new edit" }).click();
  await panel.getByRole("button", { name: "Submit" }).waitFor();
  assert.equal(await panel.getByRole("textbox", { name: /^Instruction for target/ }).count(), 0);
  assert.equal(dialogs, 0, "no window.confirm");
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  assert.deepEqual(page.errors, []);
});

test("finding 13: the pick hint speaks to pointer and keyboard (no “centre of the page”); the focused title has no field ring", async (t) => {
  const { page } = await openDemo(t);
  // An empty centre: the keyboard start falls back to the first located element, and says so.
  await page.addStyleTag({ content: "main { position: absolute; top: 0; left: 0; width: 200px; }" });
  // Opened from the keyboard: the launcher has the focus, Enter.
  await page.getByRole("button", { name: "SpotPatch", exact: true }).focus();
  await page.keyboard.press("Enter");
  const panel = panelOf(page);
  await panel.waitFor();
  const title = panel.getByRole("heading", { name: "SpotPatch" });
  await page.waitForTimeout(200);
  assert.equal(await focusedName(page), "h2:SpotPatch", "opened from the keyboard: the title has the focus");
  const ring = await title.evaluate((el) => {
    const s = getComputedStyle(el);
    return { outline: s.outlineStyle, border: s.borderStyle, decoration: s.textDecorationLine, visible: el.matches(":focus-visible") };
  });
  assert.equal(ring.visible, true);
  assert.equal(ring.outline, "none", "no ring around the title (a field's look)");
  assert.equal(ring.border, "none");
  assert.equal(ring.decoration, "underline", "the focus is still visible");
  await snap(page, "findings2-13-title-focus");
  // A mouse user clicks Pick elements.
  await page.getByRole("button", { name: "Pick elements" }).click();
  const hint = await page.waitForFunction(
    (host) => {
      const text = [...document.querySelector(host).shadowRoot.querySelectorAll("*")]
        .map((el) => (el.children.length === 0 ? el.textContent : ""))
        .find((s) => /arrows/.test(s) && /Hover to highlight/.test(s));
      return text ?? false;
    },
    HOST,
    { timeout: 5_000 },
  );
  const text = await hint.jsonValue();
  assert.doesNotMatch(text, /centre|center/i);
  assert.match(text, /With the keyboard, the arrows move from the outlined element/);
  assert.match(text, /Enter picks it, Shift\+Enter picks and stays\./, "the keyboard hint says how to pick");
  await snap(page, "findings2-13-pick-hint");
});

test("finding 14: numbered badges never cover the text of what they mark", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  await pickFive(page);
  await page.waitForTimeout(300);
  const overlaps = await page.evaluate((host) => {
    const root = document.querySelector(host).shadowRoot;
    const targets = [document.querySelector("button.btn"), document.querySelector("span.price"), ...document.querySelectorAll("ul.items li")].slice(0, 5);
    const textRects = (el) => {
      const range = document.createRange();
      range.selectNodeContents(el);
      return [...range.getClientRects()].filter((r) => r.width > 0);
    };
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    return targets.map((el, i) => {
      const badge = root.querySelector(`[data-spotpatch-badge="${i + 1}"]`) ?? document.querySelector(`[data-spotpatch-badge="${i + 1}"]`);
      if (!badge) return { n: i + 1, missing: true };
      const b = badge.getBoundingClientRect();
      return { n: i + 1, shown: b.width > 0, covers: textRects(el).some((r) => hit(b, r)) };
    });
  }, HOST);
  // Any text of the page, not only the element's own: a badge left of an inline element must not
  // cover the word before it ("Cotton T-shirt" before the price, the price before Save).
  for (const o of overlaps) if (!o.missing) o.coversPageText = (await textUnderBadge(page, o.n)).length > 0;
  assert.equal(overlaps.length, 5);
  for (const o of overlaps) assert.deepEqual(o, { n: o.n, shown: true, covers: false, coversPageText: false }, JSON.stringify(overlaps));
  await snap(page, "findings2-14-badges");
  assert.deepEqual(page.errors, []);
});

test("pick mode on, Enter on a focused panel button is that button's (Submit submits); on Pick elements Enter still picks", async (t) => {
  // Newcomer finding (issue 26): pick mode started by the shortcut from an instruction box, then Tab to Submit and
  // Enter: the highlighted element (the whole app) was picked as a new target instead of the job starting.
  const { page } = await openDemo(t);
  await openPanel(page);
  await page.getByRole("button", { name: "Pick elements" }).focus();
  await page.keyboard.press("Enter"); // pick mode from its button: the keys walk and pick from there
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  const box = panelOf(page).getByRole("textbox", { name: "Instruction for target 1" });
  await box.waitFor();
  await box.fill(SAVE_INSTRUCTION);
  await page.keyboard.press("Alt+Shift+S"); // pick mode again, the focus still in the box
  await panelOf(page).getByRole("button", { name: "Pick elements", pressed: true }).waitFor();
  await page.keyboard.press("Enter"); // typing in the box stays typing
  assert.equal(await box.inputValue(), `${SAVE_INSTRUCTION}\n`);
  await panelOf(page).getByRole("button", { name: "Submit" }).focus();
  await page.keyboard.press("Enter");
  await panelOf(page).getByRole("heading", { name: "Job" }).waitFor({ timeout: 15_000 });
  assert.equal(await panelOf(page).getByRole("textbox", { name: "Instruction for target 2" }).count(), 0, "nothing picked");
});
