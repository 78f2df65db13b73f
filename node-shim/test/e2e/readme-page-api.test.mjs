// Issue 20, item 4: node-shim/README.md's page API example, copied literally into an app (the demo app,
// imported from its entry module as the example's comment says), leaves `vite build` working: the example
// imports `virtual:spotpatch/client` behind `import.meta.env.DEV`. Without that guard the same build fails
// to resolve the module, which is why the README shows it.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import react from "@vitejs/plugin-react";
import { build } from "vite";

import { spotpatch } from "../../dist/index.js";
import { makeDemoProject, recordingLogger } from "../support/support.mjs";

const filesUnder = (dir) =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name));

/** The first ```ts block after the README's "## The page API" heading. */
function pageApiExample() {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const section = readme.slice(readme.indexOf("## The page API\n"));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(match, "the page API section has a ts example");
  return match[1];
}

/** `vite build` of the demo app whose entry imports `example` (as src/spotpatch-dev.ts); the output's text. */
async function buildWith(t, example) {
  const project = makeDemoProject(t, {
    edit(root) {
      writeFileSync(path.join(root, "src", "spotpatch-dev.ts"), example);
      const main = path.join(root, "src", "main.tsx");
      writeFileSync(main, `import "./spotpatch-dev";\n${readFileSync(main, "utf8")}`);
    },
  });
  const outDir = path.join(project.dir, "out");
  await build({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    logLevel: "error",
    plugins: [spotpatch({ command: ["spotpatch-agent-not-started", "serve"] }), react()],
    build: { outDir, emptyOutDir: true },
  });
  return filesUnder(outDir).map((file) => readFileSync(file, "utf8")).join("\n");
}

test("the README's page API example, copied literally, keeps vite build working (and is absent from the output)", async (t) => {
  const example = pageApiExample();
  assert.match(example, /^if \(import\.meta\.env\.DEV\) \{$/m, "the example is guarded");
  assert.match(example, /import\("virtual:spotpatch\/client"\)/);
  const output = await buildWith(t, example);
  assert.doesNotMatch(output, /virtual:spotpatch|createJob|awaiting-review/);
});

test("the same example without its import.meta.env.DEV guard breaks vite build", async (t) => {
  const unguarded = pageApiExample().replace("if (import.meta.env.DEV) {", "{");
  await assert.rejects(buildWith(t, unguarded), /failed to resolve import "virtual:spotpatch\/client"/);
});
