// A restored job's targets come from sessionStorage, which page code can rewrite: buildAnnotation (the
// panel's state.ts) applies the same project-path rule as a fresh pick before anything is sent. The module
// is bundled with rolldown (Vite's bundler) from the source, so the test runs the shipped code path.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { build } from "rolldown";

const here = path.dirname(fileURLToPath(import.meta.url));

async function loadState(t) {
  const out = mkdtempSync(path.join(tmpdir(), "spotpatch-state-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  await build({
    input: path.join(here, "../../src/overlay/panel/state.ts"),
    output: { dir: out, format: "esm", entryFileNames: "state.mjs" },
    logLevel: "silent",
  });
  // The picker's DOM helpers capture Element.prototype methods when they load; no DOM is used here.
  for (const name of ["Element", "Node", "HTMLElement", "Document", "ShadowRoot", "Range", "Window"]) globalThis[name] ??= class {};
  return import(pathToFileURL(path.join(out, "state.mjs")).href);
}

test("a forged absolute or node_modules source in a restored target is dropped, a project one kept", async (t) => {
  const { buildAnnotation } = await loadState(t);
  const entry = (file) => ({
    target: {
      element: null,
      info: { tagName: "button", text: "Save", attributes: {} },
      source: { file, line: 3, column: 5 },
      label: { tag: "button", location: `${file}:3` },
    },
    instruction: "Do it",
  });
  const annotation = buildAnnotation(
    [entry("/etc/passwd"), entry("node_modules/react/index.js"), entry("C:/secret.tsx"), entry("src/App.tsx")],
    8,
    "/",
  );
  const sources = annotation.targets.map((target) => target.source?.file ?? null);
  assert.deepEqual(sources, [null, null, null, "src/App.tsx"]);
});
