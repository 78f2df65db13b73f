// The overlay's translator (src/overlay/i18n.ts), bundled from the source with rolldown as the shipped code is:
// `{count:one|other}` picks the word by the language's plural rule ("1 target", "2 targets"; issue 26 found
// "target(s)"), every English key has a Chinese one, and no message says "(s)".
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { build } from "rolldown";

const here = path.dirname(fileURLToPath(import.meta.url));

async function loadI18n(t) {
  const out = mkdtempSync(path.join(tmpdir(), "spotpatch-i18n-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  await build({
    input: path.join(here, "../../src/overlay/i18n.ts"),
    output: { dir: out, format: "esm", entryFileNames: "i18n.mjs" },
    logLevel: "silent",
  });
  return import(pathToFileURL(path.join(out, "i18n.mjs")).href);
}

test("counts read as English and Chinese do: 1 target, 2 targets, 0 targets; no '(s)' anywhere", async (t) => {
  const { translator } = await loadI18n(t);
  const en = translator("en");
  assert.equal(en("composer.copied", { count: 1 }), "The prompt for 1 target is on the clipboard.");
  assert.equal(en("composer.copied", { count: 2 }), "The prompt for 2 targets is on the clipboard.");
  assert.equal(en("composer.copied", { count: 0 }), "The prompt for 0 targets is on the clipboard.");
  assert.equal(en("composer.waiting", { count: 1 }), "1 new target waits in the composer for the next job.");
  assert.equal(en("composer.waiting", { count: 3 }), "3 new targets wait in the composer for the next job.");
  assert.equal(translator("zh-CN")("composer.copied", { count: 2 }), "2 个目标的提示词已复制到剪贴板。");
  // A variable the message does not know stays as written; a missing one too.
  assert.equal(en("composer.copied"), "The prompt for {count} {count:target|targets} is on the clipboard.");
});

test("no message of the overlay says '(s)': a count picks its word", () => {
  const source = readFileSync(path.join(here, "../../src/overlay/i18n.ts"), "utf8");
  assert.deepEqual(source.match(/\w\(s\)/g) ?? [], []);
});
