// Issue 13, acceptance 2: the same picking and job flow (pick, instruction, Submit, review, Apply,
// Revert) through the real overlay on a plain HTML page (test/apps/plain, no framework) and on the
// official `vue-ts` and `svelte-ts` Vite templates (copied from create-vite at test time). The plain
// page's elements are located in index.html / frame.html, Vue and Svelte components in their files (issue
// 15), so the label and the card show `file:line`; where a location is unknown they say so, and the job
// still runs. The scripted provider plays the app's edit (test/support/scripted_provider.py APP_EDITS).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { openApp, shot } from "../support/browser-support.mjs";
import { openPanel, panelOf } from "../support/overlay-flow-helpers.mjs";
import { waitLabel } from "../support/overlay-picker-helpers.mjs";

/**
 * Pick `target(page)` in pick mode (its label must show `label`), write an instruction, Submit, check
 * the review's diff shows `added`, Apply (`applied(page)` waits for the page's change through Vite),
 * Revert (`reverted(page)`), and the file's bytes are back.
 */
async function jobFlow(t, { app, file, target, label, cardSource = /Source location unknown/, added, applied, reverted, untouched }) {
  const { page, project } = await openApp(t, { app, script: app });
  await page.setViewportSize({ width: 1280, height: 800 });
  await target(page).waitFor();
  const original = readFileSync(path.join(project.root, file));
  await openPanel(page);
  const panel = panelOf(page);

  await panel.getByRole("button", { name: "Pick elements" }).click();
  await target(page).hover();
  await waitLabel(page, label);
  await shot(page, `picker-${app}-hover`);
  await target(page).click();
  const card = panel.getByRole("group", { name: "Target 1" });
  await card.waitFor();
  await card.getByText(cardSource).waitFor();
  await untouched(page); // the app's own click handler never ran
  await panel.getByRole("button", { name: "Pick elements", pressed: false }).waitFor();

  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Change this as the script says.");
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 60_000 });
  const diff = panel.getByRole("region", { name: "Diff" });
  await diff.getByText(added).first().waitFor();
  await shot(page, `picker-${app}-review`);
  assert.deepEqual(readFileSync(path.join(project.root, file)), original, "nothing written before Apply");

  await panel.getByRole("button", { name: "Apply" }).click();
  await panel.getByRole("button", { name: "Revert" }).waitFor();
  await applied(page);
  await shot(page, `picker-${app}-applied`);
  await panel.getByRole("button", { name: "Revert" }).click();
  await panel.getByText(/^Reverted: your files/).waitFor();
  await reverted(page);
  assert.deepEqual(readFileSync(path.join(project.root, file)), original, "Revert restores the exact bytes");
  assert.deepEqual(page.errors, []);
}

const background = (page) => page.evaluate(() => getComputedStyle(document.getElementById("save")).backgroundColor);

test("plain HTML page: pick (located in index.html), Submit, review, Apply, Revert", async (t) => {
  await jobFlow(t, {
    app: "plain",
    file: "style.css",
    target: (page) => page.getByRole("button", { name: "Save" }),
    label: "button · index.html:25",
    cardSource: "index.html:25",
    added: "background: #2563eb;",
    untouched: async (page) => assert.equal(await page.locator("#saved").innerText(), "saved 0 times"),
    applied: (page) => page.waitForFunction(() => getComputedStyle(document.getElementById("save")).backgroundColor === "rgb(37, 99, 235)"),
    reverted: async (page) => {
      await page.waitForFunction(() => getComputedStyle(document.getElementById("save")).backgroundColor === "rgb(229, 231, 235)");
      assert.equal(await background(page), "rgb(229, 231, 235)");
    },
  });
});

test("plain HTML page: a CSS :hover menu item is picked with F; Pause/Resume animations; a button inside a same-origin iframe is picked, its page never sees the click", async (t) => {
  const { page } = await openApp(t, { app: "plain", script: null });
  await page.setViewportSize({ width: 1280, height: 800 });
  await openPanel(page);
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Menu" }).hover(); // opens the menu (CSS :hover)
  await page.getByRole("link", { name: "Contact" }).hover();
  await waitLabel(page, "a · index.html:16");
  await page.keyboard.press("f");
  await waitLabel(page, "frozen");
  await page.mouse.move(200, 400);
  await page.waitForFunction(() => getComputedStyle(document.querySelector(".menu-items")).display === "none");
  await shot(page, "picker-plain-frozen");
  await page.keyboard.press("Enter");
  const card = panelOf(page).getByRole("group", { name: "Target 1" });
  await card.waitFor();
  assert.match(await card.innerText(), /<a>/);
  assert.match(await card.innerText(), /Contact/);
  assert.equal(await page.evaluate(() => location.hash), "", "the link was not followed");

  // Pause animations / Resume animations: the page's CSS animation stops and runs again.
  const pulse = () => page.evaluate(() => document.querySelector(".pulse").getAnimations()[0].playState);
  assert.equal(await pulse(), "running");
  await panelOf(page).getByRole("button", { name: "Pause animations" }).click();
  await page.waitForFunction(() => document.querySelector(".pulse").getAnimations()[0].playState === "paused");
  await panelOf(page).getByRole("button", { name: "Resume animations" }).click();
  await page.waitForFunction(() => document.querySelector(".pulse").getAnimations()[0].playState === "running");
  assert.equal(await page.evaluate(() => document.querySelectorAll("style[data-spotpatch-pause]").length), 0);

  // Same-origin iframe (served by the same dev server): its button is hovered and picked inside it.
  const frame = page.frameLocator("iframe.embed");
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click();
  await frame.getByRole("button", { name: "Frame button" }).hover();
  await waitLabel(page, "button · frame.html:12");
  await frame.getByRole("button", { name: "Frame button" }).click();
  const card2 = panelOf(page).getByRole("group", { name: "Target 2" });
  await card2.waitFor();
  assert.match(await card2.innerText(), /<button>/);
  assert.match(await card2.innerText(), /Frame button/);
  assert.equal(await frame.locator("#frame-clicks").innerText(), "0", "the embedded page never saw the click");
  await shot(page, "picker-plain-iframe");
});

test("vue-ts template: pick the counter (component HelloWorld, located by spotpatch:locate-vue), Submit, review, Apply (HMR), Revert", async (t) => {
  await jobFlow(t, {
    app: "vue-ts",
    file: "src/components/HelloWorld.vue",
    target: (page) => page.getByRole("button", { name: /Count is 0|Clicks: 0/ }),
    label: "button · HelloWorld · src/components/HelloWorld.vue:21",
    cardSource: "src/components/HelloWorld.vue:21",
    added: "Clicks: {{ count }}",
    untouched: async (page) => page.getByRole("button", { name: "Count is 0" }).waitFor(),
    applied: (page) => page.getByRole("button", { name: "Clicks: 0" }).waitFor(),
    reverted: (page) => page.getByRole("button", { name: "Count is 0" }).waitFor(),
  });
});

test("svelte-ts template: pick the counter (component Counter, src/lib/Counter.svelte:8), Submit, review, Apply (HMR), Revert", async (t) => {
  await jobFlow(t, {
    app: "svelte-ts",
    file: "src/lib/Counter.svelte",
    target: (page) => page.getByRole("button", { name: /Count is 0|Clicks: 0/ }),
    label: "button · Counter · src/lib/Counter.svelte:8",
    cardSource: "src/lib/Counter.svelte:8",
    added: "Clicks: {count}",
    untouched: async (page) => page.getByRole("button", { name: "Count is 0" }).waitFor(),
    applied: (page) => page.getByRole("button", { name: "Clicks: 0" }).waitFor(),
    reverted: (page) => page.getByRole("button", { name: "Count is 0" }).waitFor(),
  });
});
