// Issue 4, acceptance 5 (first half): `vite build` with the plugin produces output that contains no
// SpotPatch code, attribute, endpoint, token or config, and starts no engine. Issue 13: nor any of the
// overlay (loader, panel, picker, their styles, the `spotpatch-overlay` host, diff2html, the editor link).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import react from "@vitejs/plugin-react";
import { build } from "vite";

import { spotpatch } from "../../dist/index.js";
import { appSource, prepareTemplate } from "../support/browser-support.mjs";
import { AGENT, CANARY, engineProcesses, makeDemoProject, providerConfig, recordingLogger } from "../support/support.mjs";

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name));
}

/**
 * A source map's `sources` name files by their path relative to the map, which for packages resolved
 * through the symlinked node_modules climbs into the checkout (e.g. `../../../work/spotpatch/node-shim/
 * node_modules/react/…`): a checkout folder named "spotpatch" is not residue. Keep only the part from
 * `node_modules/` on; everything else in the map (mappings, names, sourcesContent) is checked as is.
 */
function withoutCheckoutPaths(file, text) {
  if (!file.endsWith(".map")) return text;
  const map = JSON.parse(text);
  map.sources = (map.sources ?? []).map((source) => source.replace(/^.*?node_modules\//, "node_modules/"));
  return JSON.stringify(map);
}

/**
 * What only the overlay has (the generic /spotpatch/i above already covers its host element, virtual module
 * ids and storage keys): its entry points, its style class prefix and host style, diff2html's classes, the
 * editor endpoint it calls, its default and configured shortcuts.
 */
const OVERLAY_RESIDUE = [
  /startLoader/,
  /mountOverlay/,
  /overlay-loader/,
  /spotpatch-overlay/i,
  /\bsp-(launcher|btn|panel|note|muted|col|warn)\b/,
  /2147483647/,
  /\bd2h-/,
  /__open-in-editor/,
  /Alt\+Shift\+S/,
  /Ctrl\+Alt\+Q/,
];

test("the overlay bundles carry the markers this test looks for", () => {
  const loader = readFileSync(new URL("../../dist/overlay-loader.js", import.meta.url), "utf8");
  const overlay = readFileSync(new URL("../../dist/overlay.js", import.meta.url), "utf8");
  for (const needle of [/startLoader/, /spotpatch-overlay/, /\bsp-launcher\b/, /2147483647/]) assert.match(loader, needle);
  for (const needle of [/mountOverlay/, /\bd2h-/, /__open-in-editor/, /\bsp-btn\b/]) assert.match(overlay, needle);
});

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
    plugins: [
      spotpatch({
        command: [AGENT, "serve"],
        ...providerConfig("http://127.0.0.1:9/v1"),
        overlay: { shortcut: "Ctrl+Alt+Q", launcher: "top-left" },
      }),
      react(),
    ],
    build: { outDir, emptyOutDir: true, sourcemap: true },
  });
  const files = filesUnder(outDir);
  assert.ok(files.some((f) => f.endsWith(".js")) && files.some((f) => f.endsWith("index.html")), files.join(", "));
  for (const file of files) {
    const text = withoutCheckoutPaths(file, readFileSync(file, "utf8"));
    for (const needle of [/spotpatch/i, /data-spotpatch-loc/, /__spotpatch/, /X-SpotPatch-Token/i, /scripted-model/, /127\.0\.0\.1:9/, ...OVERLAY_RESIDUE]) {
      const hit = needle.exec(text);
      assert.equal(hit, null, hit ? `${path.relative(outDir, file)} contains ${needle}: …${text.slice(Math.max(0, hit.index - 80), hit.index + 80)}…` : "");
    }
    assert.ok(!text.includes(CANARY), `${path.relative(outDir, file)} contains the canary`);
  }
  const html = readFileSync(path.join(outDir, "index.html"), "utf8");
  assert.match(html, /<title>Demo<\/title>/);
  assert.deepEqual(
    [...html.matchAll(/<script\b[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1]).filter((src) => !/^\/assets\/index-[\w-]+\.js$/.test(src)),
    [],
    "no script besides the app's own bundle",
  );
  assert.deepEqual(await engineProcesses(), []);
});

/**
 * Issue 15, acceptance 5: the same for every framework the locator covers — the official react-ts,
 * preact-ts, solid-ts and vanilla-ts templates (HTML entry included) and the nested-component fixtures
 * (component usages carry `data-spotpatch-use` in dev). No location, no usage prop, no chain code.
 */
for (const app of ["react-ts", "preact-ts", "solid-ts", "vanilla-ts", "nested-react", "nested-preact"]) {
  test(`${app}: a production build carries no location, usage prop or chain code`, async (t) => {
    const { source, plugins, template } = await appSource(app);
    const project = makeDemoProject(t, { source, edit: (root) => template && prepareTemplate(root) });
    const outDir = path.join(project.dir, "build-out");
    await build({
      configFile: false,
      root: project.root,
      cacheDir: project.cacheDir,
      customLogger: recordingLogger(),
      plugins: [spotpatch({ command: [AGENT, "serve"], ...providerConfig("http://127.0.0.1:9/v1") }), ...plugins],
      build: { outDir, emptyOutDir: true, sourcemap: true },
    });
    const files = filesUnder(outDir);
    assert.ok(files.some((f) => f.endsWith(".js")) && files.some((f) => f.endsWith("index.html")), files.join(", "));
    for (const file of files) {
      const text = withoutCheckoutPaths(file, readFileSync(file, "utf8"));
      for (const needle of [/spotpatch/i, /data-spotpatch-loc/, /data-spotpatch-use/, /usageChain/, /__spotpatch/, ...OVERLAY_RESIDUE]) {
        const hit = needle.exec(text);
        assert.equal(hit, null, hit ? `${path.relative(outDir, file)} contains ${needle}: …${text.slice(Math.max(0, hit.index - 80), hit.index + 80)}…` : "");
      }
    }
    assert.deepEqual(await engineProcesses(), []);
  });
}
