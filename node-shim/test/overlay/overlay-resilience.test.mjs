// Issue 26, "nothing the user did is lost, and a config typo never stops the dev server": a broken
// spotpatch.config.json leaves the app running with SpotPatch off and the panel listing every problem
// (fixing the file brings SpotPatch back); a config edit never drops a review awaiting Apply; a
// suggestion survives a reload; an area target carries its rectangle and the located elements inside it.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { PRICE_INSTRUCTION, SAVE_INSTRUCTION, TOUCHED, bytesOf, openDemo, openPanel, panelOf, pickSaveAndPrice, recordCalls, snap, submitDemoJob, textUnderBadge, waitFor } from "../support/overlay-flow-helpers.mjs";
import { drag } from "../support/overlay-picker-helpers.mjs";
import { REPO, git, pageSession } from "../support/support.mjs";

/** Set SPOTPATCH_UPDATE_SCREENSHOTS=1 to rewrite docs/overlay-config-problems.png from the first test. */
const UPDATE_DOCS_SHOT = process.env.SPOTPATCH_UPDATE_SCREENSHOTS === "1";

const BROKEN_CONFIG = { providers: [{ id: "openai", displayName: "OpenAI", api: "chat" }], limits: { maxTurns: "nine" }, bogus: 1 };
const writeConfig = (root, value) =>
  writeFileSync(path.join(root, "spotpatch.config.json"), typeof value === "string" ? value : `${JSON.stringify(value, null, 2)}\n`);

test("a config typo: the app runs, Vite's log lists every problem once, the panel shows the list instead of the composer; fixing the file brings SpotPatch back", async (t) => {
  const { page, logger, project } = await openDemo(t, { edit: (root) => writeConfig(root, BROKEN_CONFIG) });
  let loads = 0; // a reload by Vite (its dependency optimizer on a slow first load) closes the panel
  page.on("load", () => loads++);
  // The app itself works (the demo's button is there and clickable).
  await page.getByRole("button", { name: "Save", exact: true }).waitFor();
  const blocks = logger.lines.filter((l) => l.level === "error" && l.msg.includes("is not a valid SpotPatch config"));
  assert.equal(blocks.length, 1, "one block in the Vite log");
  const problems = [
    "bogus: unknown key (allowed: providers, checks, limits, modes, sandbox, suggestions, audit, $schema)",
    "limits.maxTurns: must be integer",
    "providers.0.baseUrl: is required",
    "providers.0.apiKeyEnv: is required",
    "providers.0.models: is required",
  ];
  for (const line of problems) assert.ok(blocks[0].msg.includes(`\n  - ${line}\n`), `${line} in:\n${blocks[0].msg}`);
  assert.ok(!/\n\s+at /.test(logger.text()), "no stack trace");

  const panel = panelOf(page);
  const heading = panel.getByRole("heading", { name: "SpotPatch is off: its configuration file cannot be used" });
  const loadsBefore = loads;
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  if (!(await heading.waitFor({ timeout: 10_000 }).then(() => true, () => false))) {
    // Only a reload of the page may excuse the click (CI once timed out here); anything else fails, with a picture.
    await snap(page, "config-problem-missing");
    assert.ok(loads > loadsBefore, `the launcher's click opened no panel and the page did not reload (Vite log:\n${logger.text()})`);
    await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
    await heading.waitFor();
  }
  const listed = await panel.getByRole("listitem").allTextContents();
  assert.deepEqual([...listed].sort(), [...problems].sort(), "the panel lists the same problems");
  await panel.getByText("Fix: fix the keys listed (docs/configuration.md; unknown keys are errors).", { exact: false }).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0, "no composer while SpotPatch is off");
  assert.equal(await panel.getByRole("button", { name: "Pick elements" }).count(), 0);
  await snap(page, "config-problem");
  if (UPDATE_DOCS_SHOT) await page.screenshot({ path: path.join(REPO, "docs", "overlay-config-problems.png") });

  // Fixed: the dev server restarts (the watcher), the page reloads, the composer is back.
  writeConfig(project.root, { limits: { maxTargets: 5 } });
  await waitFor(() => logger.lines.some((l) => /spotpatch\.config\.json changed: restarting/.test(l.msg)), { what: "the restart" });
  await waitFor(
    async () => {
      const button = page.getByRole("button", { name: "SpotPatch", exact: true });
      if (await button.isVisible().catch(() => false)) await button.click().catch(() => undefined);
      return panel.getByRole("button", { name: "Submit" }).isVisible().catch(() => false);
    },
    { what: "the composer after the fix", timeoutMs: 30_000 },
  );
  assert.equal(await panel.getByRole("heading", { name: /SpotPatch is off/ }).count(), 0);
});

test("a config edit with a review pending: the dev server does not restart until the job is closed; the review stays and Apply writes exactly the reviewed bytes", async (t) => {
  const { page, logger, project, url } = await openDemo(t);
  const { token } = await pageSession(url.replace(/\/$/, ""));
  const diffs = [];
  page.on("response", async (response) => {
    if (response.url().endsWith("/__spotpatch/rpc/job/diff") && response.ok()) diffs.push((await response.json()).result.diff);
  });
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await waitFor(() => diffs.length > 0, { what: "the reviewed diff" });
  const reviewed = diffs.at(-1);

  // A key the plugin options do not override (the providers and checks come from spotpatch()).
  writeConfig(project.root, { limits: { maxTargets: 7 } });
  const HOLD = /spotpatch\.config\.json changed: restarting once job job_[0-9a-f]{16} is closed in the panel/;
  await waitFor(() => logger.lines.some((l) => HOLD.test(l.msg)), { what: "the held-restart line" });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const RESTARTING = /spotpatch\.config\.json changed: restarting$/;
  assert.ok(!logger.lines.some((l) => RESTARTING.test(l.msg)), "no restart while the review waits");
  await panel.getByRole("status").filter({ hasText: /^\s*Ready for review$/ }).waitFor();
  await snap(page, "config-edit-review-kept");

  await panel.getByRole("button", { name: "Apply" }).click();
  await panel.getByRole("button", { name: "Revert" }).waitFor({ timeout: 30_000 });
  const changed = (text) => text.split("\n").filter((l) => /^[-+](?![-+]{2} )/.test(l));
  assert.deepEqual(changed(git(project.root, "diff", "--", TOUCHED)), changed(reviewed), "the working tree got exactly the reviewed change");
  assert.ok(bytesOf(project).toString("utf8").includes("btn-primary"));
  assert.ok(!logger.lines.some((l) => RESTARTING.test(l.msg)), "still no restart: the applied job can be reverted");

  // Closed by the user: now the restart happens (the file is read again).
  await panel.getByRole("button", { name: "New edit" }).click();
  // New edit asks first (issue 26 finding 11): the job closes only when the user drops its targets.
  await panel.getByRole("button", { name: "Drop them and start a new edit" }).click();
  await waitFor(() => logger.lines.some((l) => RESTARTING.test(l.msg)), { what: "the restart after the job was closed", timeoutMs: 30_000 });
  // The new instance serves (a new token): the restart is over before the test closes the server.
  await waitFor(async () => {
    const now = await pageSession(url.replace(/\/$/, "")).catch(() => undefined);
    return !!now && now.token !== token;
  }, {
    what: "the restarted dev server",
    timeoutMs: 30_000,
  });
});

test("a suggestion survives a reload: the draft is shown again without asking the model twice", async (t) => {
  const { page, provider } = await openDemo(t, { script: "suggest", options: { checks: [], suggestions: { enabled: true } } });
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("alert").getByText(/^MODEL_TOOL_CALL_UNSUPPORTED: /).waitFor({ timeout: 30_000 });
  const calls = recordCalls(page, "job/suggest");
  await panel.getByRole("button", { name: "Ask for a suggestion" }).click();
  const box = panel.getByRole("region", { name: "Suggestion (draft)" });
  await box.getByText("Draft: nothing was changed", { exact: false }).waitFor({ timeout: 30_000 });
  const before = await box.innerText();
  await provider.waitForRequests(2);

  await page.reload();
  await page.getByRole("button", { name: "Save", exact: true }).waitFor();
  // The tab was showing a job: the panel comes back by itself (the launcher stays hidden meanwhile).
  await panel.waitFor({ timeout: 15_000 });
  await box.getByText("Draft: nothing was changed", { exact: false }).waitFor({ timeout: 15_000 });
  assert.equal(await box.innerText(), before, "the same draft, checks and citations");
  assert.equal(calls.length, 1, "job/suggest was not asked again");
  assert.equal(await panel.getByRole("button", { name: "Ask for a suggestion" }).count(), 0);
  assert.deepEqual(page.errors, []);
});

test("an area target sends its rectangle, the viewport size and the located elements it overlaps (the model gets their locations)", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  const panel = panelOf(page);
  const creates = recordCalls(page, "job/create");
  // A rectangle cutting through the Save button and the price: no located element lies inside it whole.
  const boxes = [await page.getByRole("button", { name: "Save", exact: true }).boundingBox(), await page.locator("span.price").boundingBox()];
  boxes.sort((a, b) => a.x - b.x);
  const [left, right] = boxes;
  const from = [left.x + left.width / 2, Math.min(left.y, right.y) + 2];
  const to = [right.x + right.width / 2, Math.max(left.y + left.height, right.y + right.height) - 2];
  await panel.getByRole("button", { name: "Select an area" }).click();
  await drag(page, from, to);
  await snap(page, "area-target");
  // The card says what is sent: the rectangle's size and the located elements inside it, not `<region>`.
  const card = panel.getByRole("group", { name: "Target 1" });
  const w = Math.round(to[0] - from[0]);
  await card.getByText(new RegExp(`^Area (${w - 1}|${w}|${w + 1}) × \\d+ px$`)).waitFor();
  const listed = await card.locator("[data-area-elements] li").allTextContents();
  assert.ok(listed.includes(`<button> ${TOUCHED}:12`) && listed.includes(`<span> ${TOUCHED}:11`), JSON.stringify(listed));
  // Its badge covers no text of the page (the area starts in the middle of the price).
  const covered = await textUnderBadge(page, 1);
  assert.deepEqual(covered, []);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Align these two.");
  await panel.getByRole("button", { name: "Submit" }).click();
  await waitFor(() => creates.length === 1, { what: "job/create" });
  const target = creates[0].annotation.targets[0];
  assert.ok(target.area, `an area: ${JSON.stringify(target)}`);
  const scroll = await page.evaluate(() => [window.scrollX, window.scrollY, window.innerWidth, window.innerHeight]);
  assert.deepEqual([target.area.viewportWidth, target.area.viewportHeight], [scroll[2], scroll[3]]);
  assert.ok(Math.abs(target.area.rect.x - Math.round(from[0] + scroll[0])) <= 1, JSON.stringify(target.area.rect));
  assert.ok(Math.abs(target.area.rect.width - Math.round(to[0] - from[0])) <= 1, JSON.stringify(target.area.rect));
  const found = target.area.elements.map((e) => `${e.tagName} ${e.source.file}:${e.source.line}`);
  assert.ok(found.includes(`button ${TOUCHED}:12`) && found.includes(`span ${TOUCHED}:11`), JSON.stringify(found));
  assert.ok(target.area.elements.length <= 8);
  for (const e of target.area.elements) assert.ok(e.rect.width > 0 && e.rect.height > 0);
});

test("a page whose storage throws (site data blocked, or the page's own getters): the panel still opens and a job reaches review and applies", async (t) => {
  // Breaker finding (issue 26): reading the `localStorage` global itself threw outside any try, so the panel never
  // mounted and only the console said why. Both getters throw here, as Chromium's "block site data" makes them.
  const blockStorage = `<script>for (const k of ["localStorage", "sessionStorage"]) Object.defineProperty(window, k, { get() { throw new DOMException("The operation is insecure.", "SecurityError"); } });</script>`;
  const { page, project } = await openDemo(t, {
    edit: (root) => {
      const file = path.join(root, "index.html");
      writeFileSync(file, readFileSync(file, "utf8").replace("<head>", `<head>${blockStorage}`));
    },
  });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error" || /failed to load/.test(m.text())) errors.push(m.text()); });
  assert.equal(await page.evaluate(() => { try { return typeof localStorage; } catch (e) { return e.name; } }), "SecurityError");
  const before = bytesOf(project);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  assert.deepEqual(bytesOf(project), before, "nothing applied before the click");
  await panel.getByRole("button", { name: "Apply" }).click();
  await waitFor(() => !bytesOf(project).equals(before), { what: "Apply changed the file" });
  assert.deepEqual(errors.filter((e) => /SpotPatch/.test(e)), [], "no SpotPatch error in the console");
});

test("a page's own <spotpatch-overlay> element (a decoy, or markup using the name) does not switch SpotPatch off", async (t) => {
  // Breaker finding (issue 26): the loader took any element of that name for its own and stopped silently.
  const { page } = await openDemo(t, {
    edit: (root) => {
      const file = path.join(root, "index.html");
      writeFileSync(file, readFileSync(file, "utf8").replace("<body>", "<body><spotpatch-overlay></spotpatch-overlay>"));
    },
  });
  assert.equal(await page.evaluate(() => document.querySelectorAll("spotpatch-overlay").length), 2, "the decoy and ours");
  await openPanel(page);
  await panelOf(page).getByRole("button", { name: "Pick elements" }).waitFor();
});

test("a reload while composing keeps the cards and their instructions and reopens the panel; Submit then reaches review", async (t) => {
  // Newcomer finding (issue 26): a reload (or Vite's full reload) while composing lost every target and instruction.
  const { page } = await openDemo(t);
  await openPanel(page);
  await pickSaveAndPrice(page);
  const panel = panelOf(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await panel.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await page.reload();
  const first = panel.getByRole("textbox", { name: "Instruction for target 1" });
  await first.waitFor({ timeout: 15_000 }); // the panel reopened by itself, with the cards
  assert.equal(await first.inputValue(), SAVE_INSTRUCTION);
  assert.equal(await panel.getByRole("textbox", { name: "Instruction for target 2" }).inputValue(), PRICE_INSTRUCTION);
  // The badges are back on the elements (found again by source location).
  const badges = () => page.evaluate(() => document.querySelector("spotpatch-overlay").shadowRoot.querySelectorAll("[data-spotpatch-badge]").length);
  await waitFor(async () => (await badges()) === 2, { what: "the two badges back on the page" });
  await snap(page, "drafts-after-reload");
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  // Submitted: the cards are gone from storage, so another reload shows the job, not the old cards.
  await page.reload();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 15_000 });
  assert.equal(await panel.getByRole("textbox", { name: "Instruction for target 1" }).count(), 0);
});

test("a reload in review keeps the job's badges on its targets (the review's Target 1 is badge 1)", async (t) => {
  // Newcomer finding (issue 26): after a reload in review the numbered badges were gone.
  const { page } = await openDemo(t);
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await page.reload();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 15_000 });
  const badges = () => page.evaluate(() => document.querySelector("spotpatch-overlay").shadowRoot.querySelectorAll("[data-spotpatch-badge]").length);
  await waitFor(async () => (await badges()) === 2, { what: "the job's two badges after the reload" });
});
