// Issue 18 (the audit ledger), the page: after a job the review shows one line per target from the ledger's
// summary — "Target 1: read src/components/ProductCard.tsx lines 1–15 before the first write" (the path as code) — in English
// and Simplified Chinese, through the real overlay of a real `vite dev` (demo app, real engine, scripted
// provider), with `job/audit` forwarded to the page; no absolute path and no key in that section; axe clean.
import assert from "node:assert/strict";
import { test } from "node:test";

import { axeScan, seriousViolations } from "../support/browser-support.mjs";
import { CANARY } from "../support/support.mjs";
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

const FILE = "src/components/ProductCard.tsx";

test("review: one audit line per target, what the agent read before it wrote (en, zh-CN)", async (t) => {
  const { page, project } = await openDemo(t);
  const audits = recordCalls(page, "job/audit");
  await openPanel(page);
  await pickSaveAndPrice(page);
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });

  // The demo's model reads the whole 15-line file first, then edits lines 11 and 12 (spotpatch_agent/demo/script.py).
  const section = panel.locator("[data-sp-audit]");
  await section.getByText("What the agent read").waitFor();
  const lines = section.locator("li");
  await lines.nth(1).waitFor();
  assert.deepEqual(await lines.allInnerTexts(), [
    `Target 1: read ${FILE} lines 1–15 before the first write`,
    `Target 2: read ${FILE} lines 1–15 before the first write`,
  ]);
  assert.ok(audits.length >= 1, "the page asked job/audit");
  const text = await section.innerText();
  assert.ok(!text.includes(project.root) && !/\/(home|tmp|Users)\//.test(text), text);
  assert.ok(!text.includes(CANARY), "no key in the audit lines");
  const review = seriousViolations(await axeScan(page));
  assert.deepEqual(review, [], `axe, review with audit lines: ${JSON.stringify(review, null, 1)}`);
  await snap(page, "audit-review-en");

  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  const zh = panel.locator("[data-sp-audit]");
  await zh.getByText("智能体读了什么").waitFor();
  assert.deepEqual(await zh.locator("li").allInnerTexts(), [
    `目标 1：在首次写入前读取了 ${FILE} 第 1–15 行`,
    `目标 2：在首次写入前读取了 ${FILE} 第 1–15 行`,
  ]);
  await snap(page, "audit-review-zh-CN");
});
