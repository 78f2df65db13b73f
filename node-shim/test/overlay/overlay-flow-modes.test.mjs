// Issue 13, acceptance 1 (b) and (c): without AI (no provider; a provider whose key is unset) the panel
// offers Open in editor and Copy prompt and says what to configure, never a key or URL; trusted-auto asks
// for consent in a dialog, applies without review, Revert works, and a new browser context asks again.
import assert from "node:assert/strict";
import { test } from "node:test";

import { newPage } from "../support/browser-support.mjs";
import { CANARY } from "../support/support.mjs";
import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  bytesOf,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  recordCalls,
  snap,
} from "../support/overlay-flow-helpers.mjs";

test("(b) AI off: Copy prompt puts the prompt on the clipboard, Open in editor asks for file:line:column", async (t) => {
  const { page } = await openDemo(t, { script: null, options: { providers: [] } });
  const opened = [];
  await page.route("**/__open-in-editor?**", (route) => {
    opened.push(new URL(route.request().url()).searchParams.get("file"));
    return route.fulfill({ status: 200, body: "" });
  });
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByText("AI is off: no provider is configured.").waitFor();
  // spotpatch.config.json first, as `spotpatch-agent init` and the README set it up (issue 29).
  await panel.getByText(/add a provider to spotpatch\.config\.json at the project root \(or to spotpatch\(\{ providers: \[\.\.\.\] \}\)/).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0, "no Submit without AI");

  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await snap(page, "b-1-ai-off");

  await panel.getByRole("group", { name: "Target 1" }).getByRole("button", { name: "Open in editor" }).click();
  await panel.getByText("Asked the dev server to open src/components/ProductCard.tsx:12:7 in your editor.").waitFor();
  await panel.getByRole("group", { name: "Target 2" }).getByRole("button", { name: "Open in editor" }).click();
  await panel.getByText(/open src\/components\/ProductCard\.tsx:11:7 in your editor/).waitFor();
  assert.deepEqual(opened, ["src/components/ProductCard.tsx:12:7", "src/components/ProductCard.tsx:11:7"]);

  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await panel.getByText("The prompt for 2 targets is on the clipboard.").waitFor();
  const clipboard = await page.evaluate(() => navigator.clipboard.readText());
  assert.match(clipboard, /Source: src\/components\/ProductCard\.tsx:12:7/);
  assert.match(clipboard, /Source: src\/components\/ProductCard\.tsx:11:7/);
  assert.ok(clipboard.includes(SAVE_INSTRUCTION) && clipboard.includes(PRICE_INSTRUCTION), clipboard);
  await snap(page, "b-2-copied");
  assert.deepEqual(page.errors, []);
});

test("(b) a provider whose key variable is unset: AI off, said without the key, the variable's value or the URL", async (t) => {
  const providers = [
    {
      id: "offline",
      displayName: "Offline provider",
      api: "chat",
      baseUrl: "http://127.0.0.1:9/v1",
      apiKeyEnv: "SPOTPATCH_TEST_UNSET_KEY",
      models: [{ id: "m1", model: "m", displayName: "Some model" }],
    },
  ];
  delete process.env.SPOTPATCH_TEST_UNSET_KEY;
  const { page } = await openDemo(t, { script: null, options: { providers } });
  await openPanel(page);
  const panel = panelOf(page);
  await panel
    .getByText("AI is off: the configured provider's API key variable is not set in the environment of the Vite process.")
    .waitFor();
  await panel.getByText("Set it and restart Vite (the Vite terminal and spotpatch-agent doctor name the variable).", { exact: false }).waitFor();
  assert.equal(await panel.getByText("add a provider", { exact: false }).count(), 0, "not the no-provider advice");
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0);
  assert.equal(await panel.getByRole("button", { name: "Copy prompt" }).count(), 1);
  const text = await panel.innerText();
  for (const secret of ["127.0.0.1:9", "http", CANARY, "SPOTPATCH_TEST_UNSET_KEY"])
    assert.ok(!text.includes(secret), secret);
});

test("(c) trusted-auto: consent dialog, applied without review, Revert works; a new browser context asks again", async (t) => {
  const app = await openDemo(t, { options: { modes: { trustedAuto: true } } });
  const { page, project, browser, url } = app;
  const original = bytesOf(project);
  const creates = recordCalls(page, "job/create");
  await openPanel(page);
  const panel = panelOf(page);
  const mode = panel.getByRole("combobox", { name: "Apply mode" });
  assert.deepEqual(await mode.locator("option").evaluateAll((os) => os.map((o) => o.value)), [
    "review",
    "trusted-auto",
  ]);
  assert.equal(await mode.inputValue(), "review", "review is the default");

  await mode.selectOption("trusted-auto");
  const dialog = page.getByRole("dialog", { name: "Use trusted-auto with Scripted?" });
  await dialog.waitFor();
  for (const consequence of [
    /Project context, including bounded parts of your local uncommitted changes, is sent to Scripted/,
    /checks are skipped/,
    /applied to your files directly/,
    /Revert stays available/,
  ]) {
    await dialog.getByText(consequence).waitFor();
  }
  const confirm = dialog.getByRole("button", { name: "Use trusted-auto" });
  assert.ok(await confirm.isDisabled(), "no consent without the checkbox");
  await dialog.getByRole("checkbox").check();
  await snap(page, "c-1-consent");
  await confirm.click();
  await dialog.waitFor({ state: "detached" });
  assert.equal(await mode.inputValue(), "trusted-auto");
  const storage = await page.evaluate(() => ({
    local: JSON.stringify(localStorage),
    session: JSON.stringify(sessionStorage),
  }));
  assert.ok(!storage.local.includes("consent"), "consent never goes to localStorage");
  assert.match(storage.session, /consent:scripted:trusted-auto/);

  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Revert" }).waitFor({ timeout: 30_000 });
  await page.locator("button.btn-primary", { hasText: "Save" }).waitFor();
  await page.locator("span.price", { hasText: "$19.50" }).waitFor();
  assert.equal(creates.length, 1);
  assert.equal(creates[0].applyMode, "trusted-auto");
  assert.equal(creates[0].trustedFastModeConsent, true);
  await panel.getByText(/^Progress \(\d+\)$/).click();
  const timeline = await panel.getByRole("log").innerText();
  assert.doesNotMatch(timeline, /Ready for review/, "never waited for review");
  assert.match(timeline, /Check Lint: skipped/, "checks are reported skipped, never passed");
  assert.equal(await panel.getByRole("button", { name: "Apply" }).count(), 0);
  await snap(page, "c-2-applied");

  await panel.getByRole("button", { name: "Revert" }).click();
  await panel.getByText(/^Reverted: your files/).waitFor();
  assert.deepEqual(bytesOf(project), original);

  // Another browser context (another session): asked again.
  const other = await browser.newContext({ locale: "en-US" });
  t.after(() => other.close());
  const page2 = await newPage(other);
  await page2.goto(url);
  await openPanel(page2);
  await panelOf(page2).getByRole("combobox", { name: "Apply mode" }).selectOption("trusted-auto");
  const dialog2 = page2.getByRole("dialog", { name: "Use trusted-auto with Scripted?" });
  await dialog2.waitFor();
  await page2.keyboard.press("Escape");
  await dialog2.waitFor({ state: "detached" });
  assert.equal(await panelOf(page2).getByRole("combobox", { name: "Apply mode" }).inputValue(), "review");
  assert.deepEqual([...page.errors, ...page2.errors], []);
});
