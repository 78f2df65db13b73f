// Issue 4, acceptance 5 (first half): `vite build` with the plugin produces output that contains no
// SpotPatch code, attribute, endpoint, token or config, and starts no engine.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import react from "@vitejs/plugin-react";
import { build } from "vite";

import { spotpatch } from "../dist/index.js";
import { AGENT, CANARY, engineProcesses, makeDemoProject, providerConfig, recordingLogger } from "./support.mjs";

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name));
}

test("a production build contains nothing of SpotPatch", async (t) => {
  // The demo app names itself "SpotPatch demo"; rename it so any match below is the plugin's residue.
  const project = makeDemoProject(t, {
    edit(root) {
      for (const file of ["index.html", "src/App.tsx"]) {
        const full = path.join(root, file);
        writeFileSync(full, readFileSync(full, "utf8").replaceAll("SpotPatch demo", "Demo"));
      }
    },
  });
  const outDir = path.join(project.dir, "build-out");
  await build({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    plugins: [spotpatch({ command: [AGENT, "serve"], ...providerConfig("http://127.0.0.1:9/v1") }), react()],
    build: { outDir, emptyOutDir: true, sourcemap: true },
  });
  const files = filesUnder(outDir);
  assert.ok(files.some((f) => f.endsWith(".js")) && files.some((f) => f.endsWith("index.html")), files.join(", "));
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    for (const needle of [/spotpatch/i, /data-spotpatch-loc/, /__spotpatch/, /X-SpotPatch-Token/i, /scripted-model/, /127\.0\.0\.1:9/]) {
      assert.doesNotMatch(text, needle, `${path.relative(outDir, file)} contains ${needle}`);
    }
    assert.ok(!text.includes(CANARY));
  }
  assert.match(readFileSync(path.join(outDir, "index.html"), "utf8"), /<title>Demo<\/title>/);
  assert.deepEqual(await engineProcesses(), []);
});
