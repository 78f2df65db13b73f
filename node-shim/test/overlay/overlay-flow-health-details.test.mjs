// Issue 20: the page's health display names the paths behind each reason and the fix. An untracked
// `.venv/` (a real virtualenv, made by `python -m venv` inside the app) blocks with its name and the
// .gitignore advice; a long list is cut at 20 with "and N more"; local changes list their paths (an
// untracked build folder as `build/`). Paths are project-relative, never absolute; en and zh-CN.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { openDemo, openPanel, panelOf, snap } from "../support/overlay-flow-helpers.mjs";
import { PYTHON } from "../support/support.mjs";

const VENV_FIX = ".venv/ is an untracked folder with symlinks (a Python virtualenv): add it to .gitignore.";

test("blocked by an untracked .venv: the reason, its paths (20 and 'N more') and the fix, in en and zh-CN", async (t) => {
  const { page, project } = await openDemo(t);
  execFileSync(PYTHON, ["-m", "venv", "--without-pip", "--symlinks", path.join(project.root, ".venv")]);
  for (let i = 0; i < 25; i++) symlinkSync("package.json", path.join(project.root, `link${String(i).padStart(2, "0")}`));
  await openPanel(page);
  const panel = panelOf(page);
  const alert = panel.getByRole("alert").filter({ hasText: "SpotPatch cannot start a job in this repository:" });
  await alert.waitFor();
  const item = alert.getByRole("listitem").filter({ hasText: "an untracked symbolic link" });
  await item.getByText("Paths:", { exact: true }).waitFor();
  const paths = await item.locator(".sp-code").allInnerTexts();
  assert.equal(paths.length, 20, "at most 20 paths are shown");
  assert.deepEqual(paths.slice(0, 3), [".venv/", "link00", "link01"], "the template folder first, by name");
  await item.getByText("and 6 more").waitFor(); // 1 folder + 25 links = 26 paths
  await item.getByText(`Fix: ${VENV_FIX} For the other paths: untracked symbolic links cannot be copied`).waitFor();
  // The fix's Markdown code spans are <code> elements, no backtick shown.
  assert.deepEqual(await item.locator(".sp-health-detail p code").allInnerTexts(), [".venv/"]);
  assert.ok(!(await item.innerText()).includes("`"), "no literal backtick");
  const text = await panel.innerText();
  assert.ok(!text.includes(project.root), "no absolute path on the page");
  await snap(page, "health-details-blocked");
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0);

  await panel.getByRole("combobox", { name: "Language" }).selectOption("zh-CN");
  const zhAlert = panel.getByRole("alert").filter({ hasText: "SpotPatch 无法在此仓库中启动任务：" });
  const zhItem = zhAlert.getByRole("listitem").filter({ hasText: "存在未跟踪的符号链接" });
  await zhItem.getByText("路径：", { exact: true }).waitFor();
  await zhItem.getByText("，另有 6 个").waitFor();
  await zhItem.getByText("解决方法：", { exact: true }).waitFor();
  await snap(page, "health-details-blocked-zh");
});

test("local changes: the paths with an untracked build folder named and the .gitignore advice", async (t) => {
  const { page, project } = await openDemo(t);
  mkdirSync(path.join(project.root, "build", "assets"), { recursive: true }); // the app ignores dist/, not build/
  writeFileSync(path.join(project.root, "build", "assets", "index.js"), "export {};\n");
  writeFileSync(path.join(project.root, "build", "index.html"), "<!doctype html>\n");
  writeFileSync(path.join(project.root, "src/styles.css"), "/* my local edit */\n", { flag: "a" });
  await openPanel(page);
  const panel = panelOf(page);
  const note = panel.getByRole("status").filter({ hasText: "Your working tree has local changes" });
  await note.getByText("Paths:", { exact: true }).waitFor();
  assert.deepEqual(await note.locator(".sp-health-detail .sp-code").allInnerTexts(), ["build/", "src/styles.css"]);
  await note.getByText("Fix: build/ is an untracked folder (build output): add it to .gitignore.", { exact: false }).waitFor();
  const codes = await note.locator(".sp-health-detail p code").allInnerTexts();
  assert.equal(codes[0], "build/", codes.join(" | "));
  assert.ok(codes.includes("git stash -u"), codes.join(" | "));
  assert.ok(!(await note.innerText()).includes("`"), "no literal backtick");
  await snap(page, "health-details-consent-code");
  assert.equal(await note.getByText("and", { exact: false }).filter({ hasText: "more" }).count(), 0);
  await snap(page, "health-details-consent");
});
