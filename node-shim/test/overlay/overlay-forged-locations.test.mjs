// Forged locations (issue 15, a breaker finding): a hostile page's forged `data-spotpatch-loc` (an absolute or node_modules path) and
// forged framework internals (a throwing fiber getter, a cyclic `__vueParentComponent`, an overwritten
// Svelte registry) never crash the overlay and never send such a path to the engine.
import assert from "node:assert/strict";
import { test } from "node:test";

import { openApp } from "../support/browser-support.mjs";
import { openPanel, panelOf, recordCalls, waitFor } from "../support/overlay-flow-helpers.mjs";

test("nested-react: forged own locations and framework internals never send an absolute or node_modules path", async (t) => {
  const { page } = await openApp(t, { app: "nested-react", script: null, options: { providers: [] } });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.getByRole("button", { name: "Buy Chair" }).waitFor();
  await page.evaluate(() => {
    const add = (label, loc) => {
      const b = document.createElement("button");
      b.textContent = label;
      b.setAttribute("data-spotpatch-loc", loc);
      document.body.prepend(b);
      return b;
    };
    add("Forged abs", "/home/me/secret/App.tsx:1:1");
    add("Forged nm", "node_modules/ui/Button.tsx:1:1");
    const cyc = add("Forged vue", "src/App.tsx:1:1");
    const inst = { type: { __name: "X" }, vnode: { props: { onVnodeBeforeMount: () => "spotpatch-use:%2Fetc%2Fpasswd:1:1" } } };
    inst.parent = inst;
    cyc.__vueParentComponent = inst;
    Object.defineProperty(cyc, "__reactFiber$x", { enumerable: true, get() { throw new Error("boom"); } });
    globalThis[Symbol.for("spotpatch.svelte")] = new Map([["a", { file: "/etc/passwd", usages: { "1:0": [1, "A"] } }]]);
  });
  const renders = recordCalls(page, "prompt/render");
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Forged abs" }).click({ modifiers: ["Shift"] });
  await page.getByRole("button", { name: "Forged nm" }).click({ modifiers: ["Shift"] });
  await page.getByRole("button", { name: "Forged vue" }).click();
  for (const n of [1, 2, 3]) await page.getByRole("textbox", { name: `Instruction for target ${n}` }).fill("Say Order.");
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  await waitFor(() => renders.length > 0, { what: "prompt/render" });
  const sent = JSON.stringify(renders[0]);
  assert.ok(!sent.includes("/home/me") && !sent.includes("node_modules") && !sent.includes("/etc/passwd"), sent);
  const targets = renders[0].annotation.targets;
  assert.equal(targets.length, 3);
  assert.equal(targets[2].source?.file, "src/App.tsx");
  assert.deepEqual(page.errors, []);
});
