// Issue 26, acceptance 3 (visual evidence): a picked element's picture on its card; after Apply, once HMR
// updated the page, the same element again (re-found by its source location) beside it, with a pixel
// difference; after Revert, the original again; an element the job removed is said to be gone. Real
// `vite dev`, real engine, the scripted provider, Debian's Chromium; the pictures are checked by their
// pixels in the page and looked at in test-artifacts/overlay-visual-*.png.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { axeScan, seriousViolations } from "../support/browser-support.mjs";
import { inBodyView, openDemo, openPanel, panelOf, recordCalls, snap } from "../support/overlay-flow-helpers.mjs";
import { REPO } from "../support/support.mjs";

/** Set SPOTPATCH_UPDATE_SCREENSHOTS=1 to rewrite docs/overlay-before-after.png from the first test. */
const UPDATE_DOCS_SHOT = process.env.SPOTPATCH_UPDATE_SCREENSHOTS === "1";

/** Pick the Save button (pick mode, one click), write an instruction, Submit; resolves in review. */
async function pickSaveAndSubmit(page, instruction) {
  const panel = panelOf(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Save", exact: true }).click();
  const box = page.getByRole("textbox", { name: "Instruction for target 1" });
  await box.waitFor();
  const thumb = panel.locator('img[data-thumb="1"]');
  await thumb.waitFor({ timeout: 15_000 });
  await box.fill(instruction);
  await snap(page, `visual-card-${instruction.split(" ")[0].toLowerCase()}`);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel
    .getByRole("status")
    .filter({ hasText: /^\s*Ready for review$/ })
    .waitFor({ timeout: 60_000 });
  return thumb;
}

/** Size and colour facts of an <img> of the overlay, measured in the page. */
function imageFacts(img) {
  const c = document.createElement("canvas");
  c.width = img.naturalWidth;
  c.height = img.naturalHeight;
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let magenta = 0;
  let blue = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 1] < d[i] - 60 && d[i + 2] > d[i + 1] + 40) magenta += 1; // tinted: red and blue over green
    if (d[i + 2] > 200 && d[i] < 80 && d[i + 1] < 140) blue += 1; // #2563eb, btn-primary's background
  }
  return { width: img.naturalWidth, height: img.naturalHeight, magenta, blue, src: img.src.slice(0, 40) };
}

test("before | after: a colour change shows both pictures and a non-empty pixel difference; Revert shows the original again", async (t) => {
  const { page } = await openDemo(t);
  const created = recordCalls(page, "job/create");
  await openPanel(page);
  const panel = panelOf(page);
  const thumb = await pickSaveAndSubmit(page, "Make the Save button the primary button (class `btn-primary`).");

  // The thumbnail is the white secondary button as picked; job/create carried its picture for a vision model.
  const picked = await thumb.evaluate(imageFacts).catch(() => null);
  const image = created[0]?.annotation?.targets?.[0]?.image;
  assert.ok(image, "job/create carries target 1's picture");
  assert.match(image.mediaType, /^image\/(webp|png)$/);
  assert.ok(image.data.length > 100 && image.data.length * 0.75 <= 256 * 1024, "a bounded base64 picture");
  await snap(page, "visual-review");

  // A user docks the review at the bottom (a short body) and scrolls it to the end to read the diff: the
  // pictures appear above that point, and must be brought into view.
  await panel.getByRole("button", { name: "Panel position" }).click();
  await page.getByRole("menuitemradio", { name: "Dock bottom" }).click();
  await panel.locator(".sp-body").evaluate((body) => body.scrollTo(0, body.scrollHeight));
  await panel.getByRole("button", { name: "Apply", exact: true }).click();
  const figure = panel.locator('section[data-phase="applied"] figure[data-visual="1"]');
  await figure.locator('img[data-shot="diff"]').waitFor({ timeout: 30_000 });
  assert.ok(await panel.locator("#sp-visual-h").evaluate(inBodyView), "the before | after heading is in view after Apply");
  const before = await figure.locator('img[data-shot="before"]').evaluate(imageFacts);
  const after = await figure.locator('img[data-shot="after"]').evaluate(imageFacts);
  const diff = await figure.locator('img[data-shot="diff"]').evaluate(imageFacts);
  t.diagnostic(`before ${JSON.stringify(before)} after ${JSON.stringify(after)} diff ${JSON.stringify(diff)}`);
  assert.ok(before.width > 10 && before.height > 10, "the before picture has the button's size");
  assert.equal(before.blue, 0, "before: the secondary (white) button");
  assert.ok(after.blue > (after.width * after.height) / 4, "after: the primary (blue) button, re-found after HMR");
  assert.ok(diff.magenta > 0, "changed pixels are tinted");
  const percent = Number(await figure.locator("[data-percent]").getAttribute("data-percent"));
  assert.ok(percent > 10, `a large share of the pixels changed (${percent} %)`);
  await figure.getByText(/% of the pixels changed/).waitFor();
  if (picked) assert.equal(picked.blue, 0, "the card's thumbnail shows the button as picked");
  await snap(page, "visual-applied");
  assert.deepEqual(seriousViolations(await axeScan(page)), [], "the before | after block is axe-clean");
  if (UPDATE_DOCS_SHOT) {
    mkdirSync(path.join(REPO, "docs"), { recursive: true });
    await page.screenshot({ path: path.join(REPO, "docs", "overlay-before-after.png") });
  }

  await panel.locator(".sp-body").evaluate((body) => body.scrollTo(0, body.scrollHeight));
  await panel.getByRole("button", { name: "Revert", exact: true }).click();
  const reverted = panel.locator('section[data-phase="reverted"] figure[data-visual="1"]');
  await reverted.locator('img[data-shot="after"]').waitFor({ timeout: 30_000 });
  assert.ok(await panel.locator("#sp-visual-h").evaluate(inBodyView), "the pictures are in view after Revert");
  const again = await reverted.locator('img[data-shot="after"]').evaluate(imageFacts);
  assert.equal(again.blue, 0, "after Revert: the secondary button again");
  assert.equal(await reverted.locator("[data-percent]").getAttribute("data-percent"), "0", "no pixel differs from the original");
  await reverted.getByText("The element looks as it did before the job.").waitFor();
  await snap(page, "visual-reverted");
  assert.deepEqual(page.errors, []);
});

test("an element the job removed is said to be gone after Apply", async (t) => {
  const { page } = await openDemo(t, { script: "remove-save" });
  await openPanel(page);
  const panel = panelOf(page);
  await pickSaveAndSubmit(page, "Remove the Save button.");
  await panel.getByRole("button", { name: "Apply", exact: true }).click();
  const figure = panel.locator('section[data-phase="applied"] figure[data-visual="1"]');
  await figure.locator("[data-missing]").waitFor({ timeout: 30_000 });
  await figure.getByText(/no longer exists on the page after Apply/).waitFor();
  assert.equal(await figure.locator('img[data-shot="before"]').count(), 1, "the before picture stays");
  assert.equal(await figure.locator('img[data-shot="after"]').count(), 0);
  assert.equal(await page.getByRole("button", { name: "Save", exact: true }).count(), 0, "the page has no Save button");
  await snap(page, "visual-removed");
  // The same in Simplified Chinese.
  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  await figure.getByText("应用后页面上已不存在这个元素").waitFor();
  assert.deepEqual(page.errors, []);
});
