// Issue 13, acceptance 1 (g): repository health before Submit. A dirty tree shows its counts and the
// explicit "include my local changes" choice (→ localChangesConsent: true); a blocked repository shows its
// reasons and no Submit button.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  recordCalls,
  snap,
} from "../support/overlay-flow-helpers.mjs";

test("(g) dirty tree: counts and consent; the job carries localChangesConsent only when chosen", async (t) => {
  const { page, project } = await openDemo(t);
  writeFileSync(path.join(project.root, "notes.txt"), "my notes\n");
  writeFileSync(path.join(project.root, "src/styles.css"), "/* my local edit */\n", { flag: "a" });
  const creates = recordCalls(page, "job/create");
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByText("Your working tree has local changes: 0 staged, 1 unstaged, 1 untracked.").first().waitFor();
  const include = panel.getByRole("checkbox", { name: /Include my local changes/ });
  assert.equal(await include.isChecked(), false, "never included by default");

  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await snap(page, "g-1-dirty");
  // Submit waits for the choice, saying why (issue 26; overlay-legibility.test.mjs, finding 7).
  assert.equal(await panel.getByRole("button", { name: "Submit" }).isDisabled(), true, "Submit waits for the choice");
  await panel.getByRole("status").filter({ hasText: "tick “Include my local changes”" }).waitFor();
  assert.equal(creates.length, 0, "no job without the choice");

  await include.check();
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  assert.equal(creates.length, 1);
  assert.equal(creates[0].localChangesConsent, true);
  assert.ok(!("trustedFastModeConsent" in creates[0]));
  // The review shows only the agent's increment, not the user's own edits.
  assert.deepEqual(await panel.locator(".sp-files li .sp-code:first-child").allInnerTexts(), [
    "src/components/ProductCard.tsx",
  ]);
});

test("(g) blocked repository: its reasons in plain words, no Submit", async (t) => {
  const { page, project } = await openDemo(t);
  writeFileSync(path.join(project.root, ".git", "index.lock"), "");
  await openPanel(page);
  const panel = panelOf(page);
  const alert = panel.getByRole("alert").filter({ hasText: "SpotPatch cannot start a job in this repository:" });
  await alert.waitFor();
  await alert.getByText("git's index is locked (.git/index.lock exists)").waitFor();
  await pickSaveAndPrice(page);
  await snap(page, "g-2-blocked");
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0);
  assert.equal(await panel.getByRole("button", { name: "Copy prompt" }).count(), 1, "Copy prompt still works");
});
