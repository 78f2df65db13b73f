// A job started in one tab is visible and controllable from another (breaker finding F3): the engine is
// the source of truth, not the tab's sessionStorage. Two pages of one browser, through the real overlay.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HOST, newPage } from "../support/browser-support.mjs";
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
} from "../support/overlay-flow-helpers.mjs";

async function fillAndSubmit(page) {
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panelOf(page).getByRole("button", { name: "Submit" }).click();
}

async function secondPage(context, url) {
  const page = await newPage(context);
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(url);
  await page.waitForSelector(HOST, { state: "attached" });
  await page.getByRole("button", { name: "Save", exact: true }).waitFor();
  return page;
}

test("(F3) a job left running by a closed tab shows in a new tab with Cancel; after Cancel the new tab submits its own", async (t) => {
  const { page, context, url } = await openDemo(t, { script: "stall-demo" });
  await openPanel(page);
  await fillAndSubmit(page);
  await panelOf(page).getByRole("button", { name: "Cancel" }).waitFor();
  await page.close();

  const page2 = await secondPage(context, url);
  // Not openPanel(): the panel opens on the other tab's running job, not on the composer it waits for.
  await page2.getByRole("button", { name: "SpotPatch", exact: true }).click();
  const panel = panelOf(page2);
  await panel.waitFor();
  await panel.getByRole("button", { name: "Cancel" }).click({ timeout: 15_000 });
  await panel.getByText("Cancelled. Nothing was applied.").waitFor({ timeout: 15_000 });
  await snap(page2, "F3-adopted-cancelled");
  await panel.getByRole("button", { name: "Dismiss" }).click(); // not this tab's input: nothing to edit back
  await fillAndSubmit(page2);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  assert.deepEqual(page2.errors, []);
});

test("(F3) Submit refused with JOB_CONFLICT shows the other tab's job with Cancel", async (t) => {
  const { page, context, url } = await openDemo(t, { script: "stall-demo" });
  const page2 = await secondPage(context, url);
  await openPanel(page2); // opened before the other tab's job exists
  await pickSaveAndPrice(page2);
  await page.bringToFront(); // a background tab gets no animation frames (the picker draws in them)
  await openPanel(page);
  await fillAndSubmit(page);
  await panelOf(page).getByRole("button", { name: "Cancel" }).waitFor();

  await page2.bringToFront();
  await page2.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page2.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  const panel = panelOf(page2);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByText(/JOB_CONFLICT/).waitFor({ timeout: 15_000 });
  await panel.getByRole("button", { name: "Cancel" }).click({ timeout: 15_000 });
  await panel.getByText("Cancelled. Nothing was applied.").waitFor({ timeout: 15_000 });
  // The first tab follows the same job: it sees the cancel too.
  await panelOf(page).getByText("Cancelled. Nothing was applied.").waitFor({ timeout: 15_000 });
  await snap(page2, "F3-conflict");
  // The refused job/create is the only error the browser logs (its 409 response).
  assert.deepEqual(
    page2.errors.filter((e) => !/status of 409 \(Conflict\) \(.*\/rpc\/job\/create\)/.test(e)),
    [],
  );
});

test("another tab's applied job: New edit asks before closing it (closing ends the page's Revert); Esc keeps it and Revert still restores the file", async (t) => {
  // Newcomer finding (issue 26): in a tab that picked up another tab's applied job, one Enter on New edit closed
  // the job without a question, and only a terminal could revert it afterwards.
  const { page, context, url, project } = await openDemo(t);
  const original = bytesOf(project);
  await openPanel(page);
  await fillAndSubmit(page);
  await panelOf(page).getByRole("button", { name: "Apply" }).click({ timeout: 30_000 });
  await panelOf(page).getByRole("button", { name: "Revert" }).waitFor({ timeout: 30_000 });
  const applied = bytesOf(project);
  assert.notDeepEqual(applied, original);
  await page.close();

  const page2 = await secondPage(context, url);
  await page2.getByRole("button", { name: "SpotPatch", exact: true }).click();
  const panel = panelOf(page2);
  await panel.getByRole("button", { name: "Revert" }).waitFor({ timeout: 15_000 });
  await panel.getByRole("button", { name: "New edit" }).focus();
  await page2.keyboard.press("Enter");
  await panel.getByText(/Close this applied job\? It can then no longer be reverted from the page/).waitFor();
  assert.equal(await focusedName(page2), "button:Keep it open", "the safe choice has the focus");
  await snap(page2, "tabs-close-applied-question");
  await page2.keyboard.press("Escape");
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  assert.deepEqual(bytesOf(project), applied, "nothing changed by the question");
  await panel.getByRole("button", { name: "Revert" }).click();
  await panel.getByRole("button", { name: "New edit" }).waitFor({ timeout: 30_000 });
  assert.deepEqual(bytesOf(project), original, "Revert restored the file byte for byte");
});
