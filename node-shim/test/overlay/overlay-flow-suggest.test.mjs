// Issue 19, the page's side of the read-only suggestion lane: a job whose model answers in text only fails
// with MODEL_TOOL_CALL_UNSUPPORTED; with `suggestions: {enabled: true}` the failure offers "Ask for a
// suggestion", which calls `job/suggest` once and shows the draft labelled as having changed nothing, its
// citation check (the citation outside the excerpt flagged), its diff check, and Copy (en and zh-CN).
// The project's files are byte-identical afterwards; no key or absolute path is shown. With the lane off
// (the default) the failure offers nothing. Real `vite dev`, real engine, scripted provider, Chromium.
import assert from "node:assert/strict";
import { homedir } from "node:os";
import { test } from "node:test";

import { axeScan, seriousViolations } from "../support/browser-support.mjs";
import { CANARY, git } from "../support/support.mjs";
import { bytesOf, openDemo, panelOf, recordCalls, snap, submitDemoJob } from "../support/overlay-flow-helpers.mjs";

const FAILED = "MODEL_TOOL_CALL_UNSUPPORTED";

/** The demo job with the "suggest" script: wait until it failed because the model cannot call tools. */
async function failedJob(t, options) {
  const app = await openDemo(t, { script: "suggest", options: { checks: [], ...options } });
  await submitDemoJob(app.page);
  await panelOf(app.page).getByRole("alert").getByText(new RegExp(`^${FAILED}: `)).waitFor({ timeout: 30_000 });
  return app;
}

test("lane on: the failure offers a suggestion; the draft is labelled, checked, copyable, and changes nothing", async (t) => {
  const { page, project, provider } = await failedJob(t, { suggestions: { enabled: true } });
  const panel = panelOf(page);
  const calls = recordCalls(page, "job/suggest");
  const before = { file: bytesOf(project), status: git(project.root, "status", "--porcelain=v1", "--ignored") };
  await panel.getByText(/This model cannot call tools/).waitFor();
  await snap(page, "suggest-1-offer");

  await panel.getByRole("button", { name: "Ask for a suggestion" }).click();
  const box = panel.getByRole("region", { name: "Suggestion (draft)" });
  await box.getByText("Draft: nothing was changed", { exact: false }).waitFor({ timeout: 30_000 });
  await provider.waitForRequests(2); // the job's one turn and the suggestion's one request
  assert.equal(calls.length, 1);
  assert.deepEqual(Object.keys(calls[0]), ["jobId"]);
  await box.getByText("From Scripted / scripted-model").waitFor();
  await box.getByText("Complete.").waitFor();
  await box.getByText("Excerpts the model was given: src/components/ProductCard.tsx:6-15").waitFor();
  await box.getByText("Citations: 2 checked against the excerpts, 1 not checked").waitFor();
  await box.getByText("Not checked (outside the excerpts): src/components/ProductCard.tsx:40").waitFor();
  await box.getByText("Its diff applies cleanly to the excerpts (never applied).").waitFor();
  const text = await box.getByRole("region", { name: "Suggestion text" }).or(box.locator("pre")).first().innerText();
  assert.match(text, /Where: src\/components\/ProductCard\.tsx:12/);
  await box.scrollIntoViewIfNeeded();
  await snap(page, "suggest-2-draft");
  const violations = seriousViolations(await axeScan(page));
  assert.deepEqual(violations, [], JSON.stringify(violations, null, 1));

  await box.getByRole("button", { name: "Copy suggestion" }).click();
  await panel.getByText("Suggestion copied.").waitFor();
  const clipboard = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(clipboard.startsWith("Draft: nothing was changed"), clipboard.slice(0, 80));
  assert.match(clipboard, /### Target 2/);

  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  const zh = panel.getByRole("region", { name: "建议（草稿）" });
  await zh.getByText("草稿：没有改动任何东西", { exact: false }).waitFor();
  await zh.getByText("引用：2 处已对照片段核实，1 处未核实").waitFor();
  await zh.getByRole("button", { name: "复制建议" }).waitFor();
  await snap(page, "suggest-3-draft-zh-CN");
  await panel.getByRole("combobox", { name: "语言" }).selectOption("en");

  // Nothing was written: the file and the repository's status are as they were.
  assert.deepEqual(bytesOf(project), before.file);
  assert.equal(git(project.root, "status", "--porcelain=v1", "--ignored"), before.status);
  const shown = await panel.innerText();
  for (const secret of [CANARY, project.dir, project.root, homedir()]) assert.ok(!shown.includes(secret), secret);
  assert.deepEqual(page.errors, []);
});

test("lane off (the default): the failure offers no suggestion", async (t) => {
  const { page, provider } = await failedJob(t, {});
  const panel = panelOf(page);
  await panel.getByText("The job failed. What the engine reported:").waitFor();
  assert.equal(await panel.getByRole("button", { name: "Ask for a suggestion" }).count(), 0);
  assert.equal(await panel.getByText(/This model cannot call tools/).count(), 0);
  await provider.waitForRequests(1);
});
