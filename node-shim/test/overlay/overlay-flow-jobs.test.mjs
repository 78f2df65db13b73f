// Issue 13, acceptance 1 (d), (e), (f): Cancel mid-job; a reload (and an HMR update of the app) during a
// job restores the panel and the job; a file changed on disk after Apply makes Revert refuse, plainly,
// touching nothing. Through the real overlay only (the scripted provider's `stall-demo` keeps a job running).
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  TOUCHED,
  bytesOf,
  openDemo,
  panelOf,
  snap,
  submitDemoJob,
} from "../support/overlay-flow-helpers.mjs";

test("(d) Cancel mid-job: the run stops, nothing is applied, Back to edit restores targets and instructions", async (t) => {
  const { page, project } = await openDemo(t, { script: "stall-demo" });
  const original = bytesOf(project);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("status").filter({ hasText: "The model is working" }).waitFor();
  // Re-picking while it runs goes to the composer, never into the running job.
  await page.locator("ul.items li").first().click({ modifiers: ["Alt"] });
  await panel.getByText("1 new target waits in the composer for the next job.").waitFor();
  await panel.getByRole("status").filter({ hasText: "The model is working" }).waitFor();
  await snap(page, "d-1-running");
  await panel.getByRole("button", { name: "Cancel" }).click();
  await panel.getByText("Cancelled. Nothing was applied.").waitFor({ timeout: 15_000 });
  await panel
    .getByRole("status")
    .filter({ hasText: /^\s*Cancelled$/ })
    .waitFor();
  await snap(page, "d-2-cancelled");
  assert.deepEqual(bytesOf(project), original);

  await panel.getByRole("button", { name: "Back to edit" }).click();
  await panel.getByRole("button", { name: "Submit" }).waitFor(); // the composer (the waiting card was target 1)
  assert.equal(await page.getByRole("textbox", { name: "Instruction for target 1" }).inputValue(), SAVE_INSTRUCTION);
  assert.equal(await page.getByRole("textbox", { name: "Instruction for target 2" }).inputValue(), PRICE_INSTRUCTION);
  await panel.getByRole("group", { name: "Target 3" }).getByText("“Canvas tote bag”").waitFor(); // the one picked meanwhile
  assert.deepEqual(page.errors, []);
});

test("(e) reload mid-job restores the panel and the job; an HMR update of the app does not reset it", async (t) => {
  const { page, project } = await openDemo(t, { script: "stall-demo" });
  await submitDemoJob(page);
  const panel = panelOf(page);
  const running = panel.getByRole("status").filter({ hasText: "The model is working" });
  await running.waitFor();

  // The user's own app changes on disk: Vite hot-updates it; the panel keeps the job.
  const header = path.join(project.root, "src/components/Header.tsx");
  writeFileSync(
    header,
    bytesOf(project, "src/components/Header.tsx").toString("utf8").replace("<h1>{title}</h1>", "<h1>{title}!</h1>"),
  );
  await page.getByRole("heading", { name: "SpotPatch demo shop!" }).waitFor();
  await running.waitFor();
  assert.equal(await panel.getByRole("button", { name: "Cancel" }).count(), 1);

  await page.reload();
  // No click: the panel comes back by itself with the job, its past events and its live state.
  await running.waitFor({ timeout: 15_000 });
  await panel.getByText(/^Progress \(\d+\)$/).waitFor();
  assert.match(await panel.getByRole("log").innerText(), /Preparing an isolated copy[\s\S]*The model is working/);
  await snap(page, "e-1-restored");
  await panel.getByRole("button", { name: "Cancel" }).click();
  await panel.getByText("Cancelled. Nothing was applied.").waitFor({ timeout: 15_000 });
  // Back to edit works after a reload too (the job's input was kept in sessionStorage).
  await panel.getByRole("button", { name: "Back to edit" }).click();
  assert.equal(await page.getByRole("textbox", { name: "Instruction for target 2" }).inputValue(), PRICE_INSTRUCTION);
  assert.deepEqual(page.errors, []);
});

test("(f) a file changed on disk after Apply: Revert is refused with a plain message and the file is untouched", async (t) => {
  const { page, project } = await openDemo(t);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).click({ timeout: 30_000 });
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  await page.locator("span.price", { hasText: "$19.50" }).waitFor();

  const edited = `${bytesOf(project).toString("utf8")}// edited by hand after Apply\n`;
  writeFileSync(path.join(project.root, TOUCHED), edited);
  await panel.getByRole("button", { name: "Revert" }).click();
  const alert = panel.getByRole("alert").filter({ hasText: /^Revert refused:/ });
  await alert.waitFor();
  assert.match(await alert.innerText(), /nothing was written\. Undo those edits by hand/);
  await snap(page, "f-1-revert-refused");
  assert.equal(bytesOf(project).toString("utf8"), edited, "the file is untouched");
  await panel
    .getByRole("status")
    .filter({ hasText: /^\s*Applied$/ })
    .waitFor(); // still applied: Revert stays offered
  assert.equal(await panel.getByRole("button", { name: "Revert" }).count(), 1);
});

test("a file changed on disk during review: Apply is refused with a plain message, nothing is written, Apply stays offered", async (t) => {
  const { page, project } = await openDemo(t);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const edited = `${bytesOf(project).toString("utf8")}// edited by hand during review\n`;
  writeFileSync(path.join(project.root, TOUCHED), edited);
  await panel.getByRole("button", { name: "Apply" }).click();
  const alert = panel.getByRole("alert").filter({ hasText: /^Apply refused:/ });
  await alert.waitFor();
  assert.match(await alert.innerText(), /so nothing was written\. Resolve it by hand/);
  await snap(page, "f-2-apply-refused");
  assert.equal(bytesOf(project).toString("utf8"), edited, "the file is untouched");
  await panel.getByRole("status").filter({ hasText: /^\s*Ready for review$/ }).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Apply" }).count(), 1);
});
