// Issue 14 (checks run in a sandbox), the page's side: the health area says whether checks run confined
// (from `session/get`'s `checksSandbox`) before Submit, and the review and the timeline mark each check
// sandboxed, run without the sandbox, or run with network access (`CheckEvent.sandbox` / `network`).
// Real `vite dev`, real engine (bubblewrap on this machine), scripted provider, Debian Chromium; the
// engine's test-only switch SANDBOX_OFF_ENV makes the sandbox unavailable.
import assert from "node:assert/strict";
import { homedir } from "node:os";
import { test } from "node:test";

import { HOST, axeScan, seriousViolations } from "../support/browser-support.mjs";
import {
  LINT_CHECK,
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  snap,
} from "../support/overlay-flow-helpers.mjs";

/** The engine's test-only switch: the sandbox is reported unavailable (spotpatch_agent/checks/sandbox/__init__.py). */
const SANDBOX_OFF_ENV = "SPOTPATCH_SIMULATE_NO_SANDBOX";

/** Make the sandbox unavailable for the engines this test starts (they inherit this process's environment). */
function sandboxUnavailable(t) {
  process.env[SANDBOX_OFF_ENV] = "1";
  t.after(() => delete process.env[SANDBOX_OFF_ENV]);
}

/** Pick Save and the price, write both instructions, click Submit (the panel is open). */
async function submitFromOpenPanel(page) {
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panelOf(page).getByRole("button", { name: "Submit" }).click();
}

/** The review's entry of check `name` (its list item inside the Review region, "审阅" in Chinese). */
const reviewCheck = (page, name, review = "Review") =>
  panelOf(page)
    .getByRole("region", { name: review })
    .getByRole("listitem")
    .filter({ has: page.getByText(name, { exact: true }) });

/** The timeline's line of check `name` (the Progress disclosure is opened as a person would). */
async function timelineCheck(page, name) {
  const panel = panelOf(page);
  const log = panel.getByRole("log");
  if (!(await log.isVisible())) await panel.getByText(/^Progress \(\d+\)$/).click();
  return log.getByRole("listitem").filter({ hasText: `Check ${name}:` });
}

/** Pixels the panel's body overflows sideways (0: nothing is cut off or scrolls horizontally). */
const sidewaysOverflow = (page) =>
  page.evaluate((host) => {
    const body = document.querySelector(host).shadowRoot.querySelector(".sp-body");
    return body.scrollWidth - body.clientWidth;
  }, HOST);

async function assertAxeClean(page) {
  const violations = seriousViolations(await axeScan(page));
  assert.deepEqual(violations, [], JSON.stringify(violations, null, 1));
}

/** No absolute path of the project or the user's home anywhere in the panel's text. */
async function assertNoAbsolutePath(page, project) {
  const text = await panelOf(page).innerText();
  for (const secret of [project.dir, homedir()]) assert.ok(!text.includes(secret), `the panel shows ${secret}`);
}

test("confined: the health area says checks run in the sandbox; the review and the timeline mark the check sandboxed", async (t) => {
  const { page, project } = await openDemo(t);
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByRole("status").filter({ hasText: "Checks: run in a sandbox (bubblewrap)" }).waitFor();
  assert.equal(await panel.getByText(/without the sandbox|cannot run here/).count(), 0);
  await submitFromOpenPanel(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const lint = reviewCheck(page, "Lint");
  await lint.getByText("lint: 0 problems").waitFor();
  await lint.getByText("sandboxed", { exact: true }).waitFor();
  assert.equal(await panel.getByText(/without the sandbox|network access/).count(), 0);
  await (await timelineCheck(page, "Lint")).getByText("sandboxed", { exact: true }).waitFor();
  await lint.scrollIntoViewIfNeeded();
  await snap(page, "sandbox-1-confined-review");
  await assertAxeClean(page);
  await assertNoAbsolutePath(page, project);
});

test('sandbox "warn" and no sandbox: the health area warns before Submit, the review and the timeline mark the check unconfined', async (t) => {
  sandboxUnavailable(t);
  const { page, project } = await openDemo(t, { options: { sandbox: "warn" } });
  await openPanel(page);
  const panel = panelOf(page);
  const warning = panel.getByRole("status").filter({ hasText: "Checks will run without the sandbox" });
  await warning.waitFor();
  await warning.getByText(/with your network, home directory and files/).waitFor();
  await warning.getByText(/^Why: \S/).waitFor();
  assert.equal(await warning.evaluate((el) => el.classList.contains("sp-warn")), true, "warning style, not muted text");
  await pickSaveAndPrice(page);
  await snap(page, "sandbox-2-warn-health");
  assert.equal(await sidewaysOverflow(page), 0, "the warning fits the narrow panel");
  await assertAxeClean(page);
  await assertNoAbsolutePath(page, project);

  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  await panel.getByRole("status").filter({ hasText: "检查将在沙箱之外运行" }).getByText(/^原因：\S/).waitFor();
  await snap(page, "sandbox-2-warn-health-zh-CN");
  assert.equal(await sidewaysOverflow(page), 0, "the Chinese warning fits too");
  await panel.getByRole("combobox", { name: "语言" }).selectOption("en");

  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const lint = reviewCheck(page, "Lint");
  await lint.getByText("lint: 0 problems").waitFor();
  await lint.getByText("ran without the sandbox").waitFor();
  assert.equal(await lint.getByText("sandboxed", { exact: true }).count(), 0);
  await panel
    .getByRole("note")
    .filter({ hasText: "1 check ran without the sandbox: as you, with your network, home directory and files" })
    .waitFor();
  await (await timelineCheck(page, "Lint")).getByText("ran without the sandbox").waitFor();
  await lint.scrollIntoViewIfNeeded();
  await snap(page, "sandbox-3-warn-review");
  assert.equal(await sidewaysOverflow(page), 0, "the review's marks fit");
  await assertAxeClean(page);

  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  await reviewCheck(page, "Lint", "审阅").getByText("在沙箱之外运行").waitFor();
  await snap(page, "sandbox-3-warn-review-zh-CN");
  await assertNoAbsolutePath(page, project);
});

test('sandbox "required" (the default) and no sandbox: the page says checks cannot run, and the job fails with the reason (dark)', async (t) => {
  sandboxUnavailable(t);
  const { page, project } = await openDemo(t, { contextOptions: { colorScheme: "dark" } });
  await openPanel(page);
  const panel = panelOf(page);
  const alert = panel.getByRole("alert").filter({ hasText: "Checks cannot run here" });
  await alert.waitFor();
  await alert.getByText(/a job with a required check fails/).waitFor();
  await alert.getByText(/^Why: \S/).waitFor();
  await pickSaveAndPrice(page);
  await snap(page, "sandbox-4-required-health");
  assert.equal(await sidewaysOverflow(page), 0);
  await assertAxeClean(page);

  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel
    .getByRole("status")
    .filter({ hasText: /^\s*Failed$/ })
    .waitFor({ timeout: 30_000 });
  const failure = panel.getByRole("alert").filter({ hasText: "The job failed. What the engine reported:" });
  await failure.getByText(/^CHECK_FAILED: Checks cannot run: they must run confined/).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Apply" }).count(), 0);
  assert.equal(await panel.getByText(/^passed · \d+ ms$/).count(), 0, "no check is shown as passed");
  await snap(page, "sandbox-5-required-failed");
  assert.equal(await sidewaysOverflow(page), 0);
  await assertAxeClean(page);
  await assertNoAbsolutePath(page, project);
});

test("a check configured with network: true is marked as having run with network access (and still sandboxed)", async (t) => {
  const { page } = await openDemo(t, { options: { checks: [{ ...LINT_CHECK, network: true }] } });
  await openPanel(page);
  await submitFromOpenPanel(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  const lint = reviewCheck(page, "Lint");
  await lint.getByText("ran with network access").waitFor();
  await lint.getByText("sandboxed", { exact: true }).waitFor();
  await (await timelineCheck(page, "Lint")).getByText("ran with network access").waitFor();
  await lint.scrollIntoViewIfNeeded();
  await snap(page, "sandbox-6-network-review");
  await assertAxeClean(page);
});
