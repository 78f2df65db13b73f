// Issue 26, "nothing the user did is lost, and a config typo never stops the dev server": a broken
// spotpatch.config.json leaves the app running with SpotPatch off and the panel listing every problem
// (fixing the file brings SpotPatch back); a config edit never drops a review awaiting Apply; a
// suggestion survives a reload; an area target carries its rectangle and the located elements inside it.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { openDemo, panelOf, snap, waitFor } from "./overlay-flow-helpers.mjs";

const BROKEN_CONFIG = { providers: [{ id: "openai", displayName: "OpenAI", api: "chat" }], limits: { maxTurns: "nine" }, bogus: 1 };
const writeConfig = (root, value) =>
  writeFileSync(path.join(root, "spotpatch.config.json"), typeof value === "string" ? value : `${JSON.stringify(value, null, 2)}\n`);

test("a config typo: the app runs, Vite's log lists every problem once, the panel shows the list instead of the composer; fixing the file brings SpotPatch back", async (t) => {
  const { page, logger, project } = await openDemo(t, { edit: (root) => writeConfig(root, BROKEN_CONFIG) });
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

  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  const panel = panelOf(page);
  await panel.getByRole("heading", { name: "SpotPatch is off: its configuration file cannot be used" }).waitFor();
  const listed = await panel.getByRole("listitem").allTextContents();
  assert.deepEqual([...listed].sort(), [...problems].sort(), "the panel lists the same problems");
  await panel.getByText("Fix: fix the keys listed (docs/configuration.md; unknown keys are errors).", { exact: false }).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Submit" }).count(), 0, "no composer while SpotPatch is off");
  assert.equal(await panel.getByRole("button", { name: "Pick elements" }).count(), 0);
  await snap(page, "config-problem");

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
