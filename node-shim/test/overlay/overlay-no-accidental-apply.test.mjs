// Issue 26 "Fix first": no keystroke ever lands on Apply or Revert (invariant 8, "only the user applies").
// With a job ready for review, the panel is opened every way a user opens it (Alt+click, the launcher, the
// shortcut, a new tab, a reload) and an instruction is typed with spaces and Enter: the working tree is
// unchanged and the keyboard focus never touches Apply or Revert — recorded on every `focusin` inside the
// overlay, not only where the test looks. After the user's own Apply, Enter twice does not Revert.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HOST, axeScan, newPage, seriousViolations } from "../support/browser-support.mjs";
import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  bytesOf,
  focusedName,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  snap,
  submitDemoJob,
  tabTo,
} from "../support/overlay-flow-helpers.mjs";
import { git } from "../support/support.mjs";

/** An instruction with spaces, typed key by key; Enter follows it. */
const TYPED = "make it bold please";
const COMMIT = /^button:(Apply|Revert)$/;

/** In the page (before any script, on every load): every focus that lands on Apply or Revert in the overlay. */
function recordCommitFocus(host) {
  if (window.__spCommitFocus) return;
  window.__spCommitFocus = [];
  document.addEventListener(
    "focusin",
    (event) => {
      const el = event.composedPath()[0];
      if (!(el instanceof HTMLButtonElement) || !el.closest || !document.querySelector(host)?.shadowRoot?.contains(el))
        return;
      const name = el.textContent.trim();
      if (name === "Apply" || name === "Revert") window.__spCommitFocus.push(name);
    },
    true,
  );
}

async function watchFocus(page) {
  await page.addInitScript(recordCommitFocus, HOST);
  await page.evaluate(recordCommitFocus, HOST);
}

/** The focus moves recorded on Apply/Revert since the last call (then forgotten). */
const commitFocus = (page) => page.evaluate(() => window.__spCommitFocus.splice(0));

/**
 * One step's sample: the focus is not on Apply/Revert now and never was since the last sample, the working
 * tree is as it was (`git status --porcelain` and the file's bytes), the job still waits for review.
 */
async function assertUntouched(page, project, baseline, step) {
  await page.waitForTimeout(400); // an activation would have sent its request by now
  assert.doesNotMatch(await focusedName(page), COMMIT, `${step}: the focus is on Apply/Revert`);
  assert.deepEqual(await commitFocus(page), [], `${step}: the focus landed on Apply/Revert`);
  assert.equal(git(project.root, "status", "--porcelain"), baseline.status, `${step}: the working tree changed`);
  assert.deepEqual(bytesOf(project), baseline.bytes, `${step}: the file changed`);
  await panelOf(page)
    .getByRole("status")
    .filter({ hasText: /^\s*(Ready for review|等待审阅)$/ })
    .waitFor({ timeout: 2000 });
}

/** Type the instruction key by key (spaces included), then Enter: it lands in the new target's box. */
async function typeInstruction(page, project, baseline, step) {
  await page.keyboard.type(TYPED);
  await assertUntouched(page, project, baseline, `${step}, typed`);
  await page.keyboard.press("Enter");
  await assertUntouched(page, project, baseline, `${step}, Enter`);
  const focused = await focusedName(page);
  assert.match(focused, /^textarea:Instruction for target \d+$/, `${step}: the new target's instruction box has the focus`);
  const box = panelOf(page).getByRole("textbox", { name: focused.slice("textarea:".length), exact: true });
  assert.equal(await box.inputValue(), `${TYPED}\n`, `${step}: the typing went into the instruction`);
}

/** Alt+click near the element's left edge (the review's panel covers the right half of the page). */
const altClick = (page, locator) => locator.click({ modifiers: ["Alt"], position: { x: 12, y: 8 } });

/** The panel's line about targets waiting for the next job (the review stays as it is). */
const waiting = (panel, count) =>
  panel.getByText(`${count} new ${count === 1 ? "target waits" : "targets wait"} in the composer for the next job.`);

/** The demo app with a job ready for review (submitted with the mouse), the focus recorder on. */
async function reviewPending(t) {
  const app = await openDemo(t);
  await watchFocus(app.page);
  const baseline = { status: git(app.project.root, "status", "--porcelain"), bytes: bytesOf(app.project) };
  await submitDemoJob(app.page);
  await panelOf(app.page).getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await assertUntouched(app.page, app.project, baseline, "review reached");
  return { ...app, baseline, panel: panelOf(app.page), items: app.page.locator("ul.items li") };
}

/** Esc closes the panel (the review stays pending). */
async function closePanel(page) {
  await page.keyboard.press("Escape");
  await panelOf(page).waitFor({ state: "detached" });
}

test("review pending, panel closed, Alt+click an element: its instruction box has the focus; typing applies nothing", async (t) => {
  const { page, project, baseline, panel, items } = await reviewPending(t);
  await closePanel(page);
  await altClick(page, items.nth(0));
  await waiting(panel, 1).waitFor();
  await assertUntouched(page, project, baseline, "Alt+click");
  await snap(page, "no-apply-1-alt-click");
  await typeInstruction(page, project, baseline, "Alt+click");
  // And again, with the panel open on the review and a target already waiting.
  await altClick(page, items.nth(1));
  await waiting(panel, 2).waitFor();
  await typeInstruction(page, project, baseline, "second Alt+click");
  // The page's numbers stay the review's: badge 1 marks the job's Target 1 (Save), 2 the price; the waiting
  // list items are not numbered "1" and "2" beside a review that speaks of Target 1 and 2.
  await page.waitForTimeout(200);
  const marks = await page.evaluate((host) => {
    const root = document.querySelector(host).shadowRoot;
    const near = (n) => {
      const badge = root.querySelector(`[data-spotpatch-badge="${n}"]`) ?? document.querySelector(`[data-spotpatch-badge="${n}"]`);
      if (!badge || badge.getBoundingClientRect().width === 0) return null;
      const b = badge.getBoundingClientRect();
      const dist = (el) => {
        const r = el.getBoundingClientRect();
        return Math.hypot(Math.max(r.left - b.right, 0, b.left - r.right), Math.max(r.top - b.bottom, 0, b.top - r.bottom));
      };
      const els = { save: document.querySelector("button.btn"), price: document.querySelector("span.price"), item: document.querySelector("ul.items li") };
      return Object.entries(els).sort((a, c) => dist(a[1]) - dist(c[1]))[0][0];
    };
    return { one: near(1), two: near(2), three: near(3) };
  }, HOST);
  assert.deepEqual(marks, { one: "save", two: "price", three: null });
  const serious = seriousViolations(await axeScan(page));
  assert.deepEqual(serious, [], `axe, review with waiting targets: ${JSON.stringify(serious, null, 1)}`);
  // zh-CN: the waiting targets' heading and cards in the panel's language.
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  await panel.getByText("有 2 个新目标在编辑区等待下一个任务。").waitFor();
  await panel.getByRole("textbox", { name: "目标 2 的修改说明" }).waitFor();
  await assertUntouched(page, project, baseline, "language switch");
  assert.deepEqual(page.errors, []);
});

test("review pending, opened with the launcher, then Alt+click: typing applies nothing", async (t) => {
  const { page, project, baseline, panel, items } = await reviewPending(t);
  await closePanel(page);
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  await panel.waitFor();
  await assertUntouched(page, project, baseline, "launcher");
  await page.keyboard.type(TYPED);
  await page.keyboard.press("Enter");
  await assertUntouched(page, project, baseline, "launcher, typed before any pick");
  await altClick(page, items.nth(1));
  await waiting(panel, 1).waitFor();
  await typeInstruction(page, project, baseline, "launcher");
  assert.deepEqual(page.errors, []);
});

test("review pending, opened with the shortcut (pick mode), an element picked: typing applies nothing", async (t) => {
  const { page, project, baseline, panel, items } = await reviewPending(t);
  await closePanel(page);
  await page.keyboard.press("Alt+Shift+S");
  await panel.waitFor();
  await assertUntouched(page, project, baseline, "shortcut");
  await items.nth(2).click({ position: { x: 12, y: 8 } });
  await waiting(panel, 1).waitFor();
  await typeInstruction(page, project, baseline, "shortcut");
  await snap(page, "no-apply-2-shortcut");
  assert.deepEqual(page.errors, []);
});

test("review pending, the page reloaded (the panel comes back on the review), Alt+click: typing applies nothing", async (t) => {
  const { page, project, baseline, panel, items } = await reviewPending(t);
  await page.reload();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 15_000 });
  await assertUntouched(page, project, baseline, "reload");
  await page.keyboard.type(TYPED);
  await page.keyboard.press("Enter");
  await assertUntouched(page, project, baseline, "reload, typed before any pick");
  await altClick(page, items.nth(2));
  await waiting(panel, 1).waitFor();
  await typeInstruction(page, project, baseline, "reload");
  assert.deepEqual(page.errors, []);
});

test("review pending, a new tab of the app, Alt+click: the review shows, typing applies nothing", async (t) => {
  const { project, baseline, context, url } = await reviewPending(t);
  const page2 = await newPage(context);
  await page2.setViewportSize({ width: 1280, height: 800 });
  await watchFocus(page2);
  await page2.goto(url);
  await page2.waitForSelector(HOST, { state: "attached" });
  await page2.getByRole("button", { name: "Save", exact: true }).waitFor();
  await altClick(page2, page2.locator("ul.items li").nth(1));
  const panel = panelOf(page2);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 15_000 });
  await waiting(panel, 1).waitFor();
  await assertUntouched(page2, project, baseline, "new tab");
  await typeInstruction(page2, project, baseline, "new tab");
  await snap(page2, "no-apply-3-new-tab");
  assert.deepEqual(page2.errors, []);
});

test("keyboard Submit to review, then the user's Apply: the focus is never moved to Apply or Revert, Enter twice does not Revert", async (t) => {
  const { page, project } = await openDemo(t);
  await watchFocus(page);
  const original = bytesOf(project);
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  const panel = panelOf(page);
  await panel.waitFor();
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await tabTo(page, /^button:Submit$/);
  await page.keyboard.press("Enter");
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const baseline = { status: git(project.root, "status", "--porcelain"), bytes: original };
  await assertUntouched(page, project, baseline, "keyboard Submit, review reached");
  await page.keyboard.type(TYPED);
  await page.keyboard.press("Enter");
  await assertUntouched(page, project, baseline, "typed in review");
  await snap(page, "no-apply-4-review-focus");

  // Enter held down from the control before Apply, then Tab: the held key's auto-repeat reaches Apply.
  await tabTo(page, /^button:Apply$/);
  await page.keyboard.press("Shift+Tab");
  assert.doesNotMatch(await focusedName(page), /^button:/, "the control before Apply is not a button");
  await page.keyboard.down("Enter");
  await page.keyboard.press("Tab");
  assert.match(await focusedName(page), /^button:Apply$/);
  await page.keyboard.down("Enter"); // repeat: true
  await page.keyboard.down("Enter");
  await page.keyboard.up("Enter");
  await page.waitForTimeout(400);
  assert.equal(git(project.root, "status", "--porcelain"), baseline.status, "a held Enter applied");
  await panel.getByRole("status").filter({ hasText: /^\s*Ready for review$/ }).waitFor({ timeout: 2000 });
  await commitFocus(page); // the user's own Tab put the focus there

  // The user's choice: a click on Apply. Then Enter, Enter.
  await panel.getByRole("button", { name: "Apply" }).click();
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  await page.waitForTimeout(400);
  assert.doesNotMatch(await focusedName(page), COMMIT, "after Apply");
  assert.deepEqual(
    (await commitFocus(page)).filter((name) => name === "Revert"),
    [],
    "after Apply the focus landed on Revert",
  );
  await page.keyboard.press("Enter");
  await page.keyboard.press("Enter");
  await page.waitForTimeout(600);
  await panel.getByRole("status").filter({ hasText: /^\s*Applied$/ }).waitFor({ timeout: 2000 });
  assert.notDeepEqual(bytesOf(project), original, "still applied: Enter twice did not Revert");
  assert.deepEqual(await commitFocus(page), []);
  await snap(page, "no-apply-5-after-apply");
  assert.deepEqual(page.errors, []);
});

test("a double-click never lands on what replaced the button: Apply's second click is not Revert, New edit's is not Drop", async (t) => {
  const { page, project, baseline, panel } = await reviewPending(t);
  // The system reports a double-click's second click with a click count of 2 (`detail`), wherever it lands.
  const secondClick = async ({ x, y }) => {
    await page.mouse.move(x, y);
    await page.mouse.down({ clickCount: 2 });
    await page.mouse.up({ clickCount: 2 });
  };
  const centre = async (locator) => {
    const box = await locator.boundingBox();
    return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
  };
  const apply = await centre(panel.getByRole("button", { name: "Apply" }));
  await page.mouse.click(apply.x, apply.y);
  const revert = panel.getByRole("button", { name: "Revert" });
  await revert.waitFor({ timeout: 30_000 });
  const applied = bytesOf(project);
  assert.notDeepEqual(applied, baseline.bytes, "the user's click applied");
  const second = await centre(revert);
  await secondClick(second);
  await page.waitForTimeout(600);
  assert.deepEqual(bytesOf(project), applied, "the second click of a double-click on Apply did not revert");
  assert.equal(await revert.count(), 1, "Revert is still offered");

  const newEdit = await centre(panel.getByRole("button", { name: "New edit" }));
  await page.mouse.click(newEdit.x, newEdit.y);
  const drop = panel.getByRole("button", { name: "Drop them and start a new edit" });
  await drop.waitFor();
  const dropAt = await centre(drop);
  await secondClick(dropAt);
  await page.waitForTimeout(400);
  assert.equal(await drop.count(), 1, "the question is still asked: a double-click's second click is no answer");
  await page.keyboard.press("Escape");
  await revert.waitFor();
  // A deliberate single click on Revert still works.
  await revert.click();
  await panel.getByText(/Reverted/).first().waitFor({ timeout: 30_000 });
  assert.deepEqual(bytesOf(project), baseline.bytes, "Revert restored the original bytes");

  // After Revert, New edit asks too (the targets and instructions would be dropped); Back to edit keeps them.
  await panel.getByRole("button", { name: "New edit" }).click();
  await panel.getByText(/Start a new edit\? The 2 targets and instructions .* are dropped\. Back to edit keeps them/).waitFor();
  await page.keyboard.press("Escape");
  await panel.getByRole("button", { name: "Back to edit" }).click();
  const first = panel.getByRole("textbox", { name: "Instruction for target 1" });
  await first.waitFor();
  assert.notEqual(await first.inputValue(), "", "Back to edit after Revert brought the instructions back");
  await panel.getByRole("textbox", { name: "Instruction for target 2" }).waitFor();
});

test("a click aimed at a running job's Cancel, landing as the review arrives, is never on Apply (docked right and bottom)", async (t) => {
  for (const dock of ["right", "bottom"]) {
    const { page, project } = await openDemo(t, { script: "slow-demo" });
    const panel = panelOf(page);
    const baseline = { status: git(project.root, "status", "--porcelain"), bytes: bytesOf(project) };
    await openPanel(page);
    if (dock === "bottom") {
      await panel.getByRole("button", { name: "Panel position" }).click();
      await page.getByRole("menuitemradio", { name: "Dock bottom" }).click();
    }
    await pickSaveAndPrice(page);
    await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
    await panel.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
    await panel.getByRole("button", { name: "Submit" }).click();
    const cancel = panel.getByRole("button", { name: "Cancel" });
    await cancel.waitFor({ timeout: 30_000 });
    const box = await cancel.boundingBox();
    await snap(page, `cancel-running-${dock}`);
    const aim = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    // The user rests the mouse on Cancel; the review replaces the footer under it.
    await page.mouse.move(aim.x, aim.y);
    await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 60_000 });
    const under = await page.evaluate(
      ([px, py, host]) =>
        document.querySelector(host).shadowRoot.elementFromPoint(px, py)?.closest("button")?.textContent.trim() ?? null,
      [aim.x, aim.y, HOST],
    );
    await snap(page, `cancel-review-${dock}`);
    assert.ok(under !== "Apply" && under !== "Revert", `docked ${dock}: ${under} took the place of Cancel`);
    await page.mouse.down();
    await page.mouse.up();
    await page.waitForTimeout(1_500);
    assert.deepEqual(bytesOf(project), baseline.bytes, `docked ${dock}: the click aimed at Cancel applied the change`);
    assert.equal(git(project.root, "status", "--porcelain"), baseline.status, `docked ${dock}: the working tree changed`);
  }
});
