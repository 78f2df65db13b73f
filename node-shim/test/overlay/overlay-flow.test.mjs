// Issue 13, acceptance 1 (a) and (i): the whole review flow through the real overlay of a real `vite dev`
// (temp copy of the demo app, real engine, scripted provider), by mouse and by keyboard only, with
// axe-core scans of the open panel, the review state and the consent dialog.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { axeScan, seriousViolations } from "../support/browser-support.mjs";
import { REPO } from "../support/support.mjs";
import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  bytesOf,
  focusedName,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  recordCalls,
  snap,
  tabTo,
} from "../support/overlay-flow-helpers.mjs";

/** Set SPOTPATCH_UPDATE_SCREENSHOTS=1 to rewrite docs/overlay-review.png from test (a). */
const UPDATE_README_SHOT = process.env.SPOTPATCH_UPDATE_SCREENSHOTS === "1";

test("(a) pick two elements, two instructions, Submit, progress, review the diff and the check, Apply (HMR), Revert (bytes identical)", async (t) => {
  const { page, project } = await openDemo(t);
  const original = bytesOf(project);
  const creates = recordCalls(page, "job/create");
  await snap(page, "a-0-page");

  await openPanel(page);
  await snap(page, "a-1-open");
  await pickSaveAndPrice(page);
  const panel = panelOf(page);
  const card1 = panel.getByRole("group", { name: "Target 1" });
  const card2 = panel.getByRole("group", { name: "Target 2" });
  await assert.doesNotReject(card1.getByText("src/components/ProductCard.tsx:12").waitFor());
  await assert.doesNotReject(card2.getByText("src/components/ProductCard.tsx:11").waitFor());
  assert.equal(await card1.getByRole("button", { name: "Open in editor" }).count(), 1);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await card2.getByText(`${PRICE_INSTRUCTION.length} / 2000 characters`).waitFor();
  await snap(page, "a-2-composer");

  await panel.getByRole("button", { name: "Submit" }).click();
  // Progress: the job's status and its tool activity from the events.
  await panel
    .getByRole("status")
    .filter({ hasText: /Preparing|The model is working|Validating|Ready for review/ })
    .first()
    .waitFor();
  await snap(page, "a-3-progress");
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await panel.getByText("lint: 0 problems").waitFor();
  await snap(page, "a-4-review");
  if (UPDATE_README_SHOT) {
    mkdirSync(path.join(REPO, "docs"), { recursive: true });
    await page.screenshot({ path: path.join(REPO, "docs", "overlay-review.png") });
  }
  await panel.getByText(/^Progress \(\d+\)$/).click(); // expand the timeline
  await panel
    .getByText(/replace_text src\/components\/ProductCard\.tsx · \d+ ms · ok/)
    .first()
    .waitFor();
  await panel.getByText(/search_text · \d+ ms · ok/).waitFor();

  // Review: provider/model names, file with +/-, the diff, the check.
  await panel.getByText("Scripted · Scripted model").waitFor();
  const diff = panel.getByRole("region", { name: "Diff" });
  await diff.getByText("btn-primary").first().waitFor();
  assert.match(await diff.innerText(), /\$\{price\.toFixed\(2\)\}/);
  assert.match(await panel.locator(".sp-files").first().innerText(), /src\/components\/ProductCard\.tsx\s+\+2 −2/);
  await panel.getByText("Lint").first().waitFor();
  await panel.getByText(/^passed · \d+ ms$/).waitFor();
  await panel.getByText("lint: 0 problems").waitFor();
  await panel.getByRole("button", { name: "Back to edit" }).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Cancel" }).count(), 0, "one way back: Back to edit");
  await snap(page, "a-4-review-timeline");
  assert.deepEqual(bytesOf(project), original, "nothing is written before Apply");

  // A review request carries applyMode review and never the trusted-auto consent.
  assert.equal(creates.length, 1);
  assert.equal(creates[0].applyMode, "review");
  assert.ok(!("trustedFastModeConsent" in creates[0]));
  assert.deepEqual(
    creates[0].annotation.targets.map((t) => [t.index, t.instruction, t.source?.file, t.source?.line]),
    [
      [1, SAVE_INSTRUCTION, "src/components/ProductCard.tsx", 12],
      [2, PRICE_INSTRUCTION, "src/components/ProductCard.tsx", 11],
    ],
  );

  await panel.getByRole("button", { name: "Apply" }).click();
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  // HMR: the page shows the change without a reload.
  await page.locator("button.btn-primary", { hasText: "Save" }).waitFor();
  await page.locator("span.price", { hasText: "$19.50" }).waitFor();
  await snap(page, "a-5-applied");
  assert.match(bytesOf(project).toString("utf8"), /btn btn-primary/);

  await panel.getByRole("button", { name: "Revert" }).click();
  await panel.getByText(/^Reverted: your files/).waitFor();
  await page.locator("button.btn-secondary", { hasText: "Save" }).waitFor();
  await page.locator("span.price", { hasText: /^\$19\.5$/ }).waitFor();
  await snap(page, "a-6-reverted");
  assert.deepEqual(bytesOf(project), original, "Revert restores the exact bytes");
  assert.deepEqual(page.errors, []);
});

test("(i) keyboard only: pick with the shortcut and arrows, instructions, Submit, Apply, Revert; axe finds nothing serious", async (t) => {
  const { page, project } = await openDemo(t, { options: { modes: { trustedAuto: true } } });
  const original = bytesOf(project);

  // Focus the page's Save button with Tab, enter pick mode with the shortcut: it highlights the focused element.
  await tabTo(page, /^button:Save$/);
  await page.keyboard.press("Alt+Shift+S");
  await page.getByRole("button", { name: "Pick elements", pressed: true }).waitFor(); // the overlay loaded, pick mode on
  await snap(page, "i-0-pick-mode");
  await page.keyboard.press("Shift+Enter"); // pick Save, stay in pick mode
  await page.keyboard.press("ArrowLeft"); // previous sibling: the price
  await page.keyboard.press("Enter"); // pick it, leave pick mode
  const panel = panelOf(page);
  await panel.getByRole("group", { name: "Target 2" }).waitFor();
  await waitForFocus(page, /^textarea:Instruction for target 2$/); // the new card's instruction box
  await page.keyboard.type(PRICE_INSTRUCTION);
  await tabTo(page, /^textarea:Instruction for target 1$/, { back: true });
  await page.keyboard.type(SAVE_INSTRUCTION);
  await snap(page, "i-1-composer");
  const open = seriousViolations(await axeScan(page));
  assert.deepEqual(open, [], `axe, open panel: ${JSON.stringify(open, null, 1)}`);

  // The consent dialog from the keyboard: focus trapped, Esc closes it and keeps review.
  await tabTo(page, /^select:Apply mode/);
  await page.keyboard.press("ArrowDown");
  const dialog = page.getByRole("dialog", { name: /Use trusted-auto with Scripted\?/ });
  await dialog.waitFor();
  await waitForFocus(page, /^input:I understand/);
  for (let i = 0; i < 6; i += 1) {
    await page.keyboard.press("Tab");
    assert.match(await focusedName(page), /^(input:I understand|button:Cancel)/, "focus stays in the dialog");
  }
  await snap(page, "i-2-consent");
  const consent = seriousViolations(await axeScan(page));
  assert.deepEqual(consent, [], `axe, consent dialog: ${JSON.stringify(consent, null, 1)}`);
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "detached" });
  await waitForFocus(page, /^select:Apply mode/);
  assert.equal(await panel.getByRole("combobox", { name: "Apply mode" }).inputValue(), "review");

  await tabTo(page, /^button:Submit$/);
  await page.keyboard.press("Enter");
  const apply = panel.getByRole("button", { name: "Apply" });
  await apply.waitFor({ timeout: 30_000 });
  // The focus moves to the job's heading, never onto Apply (issue 26): the user goes there with Tab.
  await waitForFocus(page, /^h3:Job$/);
  await snap(page, "i-3-review");
  const review = seriousViolations(await axeScan(page));
  assert.deepEqual(review, [], `axe, review: ${JSON.stringify(review, null, 1)}`);

  await tabTo(page, /^button:Apply$/);
  await page.keyboard.press("Enter");
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  await page.locator("button.btn-primary", { hasText: "Save" }).waitFor();
  await waitForFocus(page, /^h3:Job$/); // not Revert: Enter twice never applies and reverts
  await tabTo(page, /^button:Revert$/);
  await page.keyboard.press("Enter");
  await panel.getByText(/^Reverted: your files/).waitFor();
  await page.locator("span.price", { hasText: /^\$19\.5$/ }).waitFor();
  assert.deepEqual(bytesOf(project), original);

  // Esc closes the panel; focus returns to the launcher.
  await page.keyboard.press("Escape");
  await panel.waitFor({ state: "detached" });
  assert.equal(await focusedName(page), "button:SpotPatch");
  assert.deepEqual(page.errors, []);
});

async function waitForFocus(page, want) {
  for (let i = 0; i < 200; i += 1) {
    if (want.test(await focusedName(page))) return;
    await page.waitForTimeout(25);
  }
  assert.fail(`focus never moved to ${want} (on ${await focusedName(page)})`);
}
