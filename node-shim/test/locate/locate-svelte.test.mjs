// Issue 15, Svelte 5: the dev-only Svelte locator (src/locate/locate-svelte.ts) and the usage chain read in the
// page (src/overlay/picker/chain-svelte.ts). Unit tests of the transform with the real Svelte parser, then
// real `vite dev` servers with @sveltejs/vite-plugin-svelte and Debian's Chromium: the official `svelte-ts`
// template measured by the shared accuracy harness (acceptance 1), the nested Button-in-Card-in-page
// fixture's chain (acceptance 2), an HMR edit that shifts lines (acceptance 3's "exact again"), a
// monorepo layout, and a `vite build` free of every trace (acceptance 5).
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { svelte } from "@sveltejs/vite-plugin-svelte";
import { parse } from "svelte/compiler";
import ts from "typescript";
import { build, createServer } from "vite";

import { spotpatch } from "../../dist/index.js";
import { injectSvelteLocations, registryStatement, spotpatchLocateSvelte } from "../../dist/locate/locate-svelte.js";
import { APPS, launchBrowser, newPage, openApp } from "../support/browser-support.mjs";
import { formatMeasurement, measureLocations } from "../support/locate-accuracy.mjs";
import { AGENT, NODE_SHIM, makeDemoProject, recordingLogger, startDevServer } from "../support/support.mjs";

const CHAIN_SOURCE = path.join(NODE_SHIM, "src", "overlay", "picker", "chain-svelte.ts");
/** index.html's own elements are the HTML locator's (tested there); these tests measure the components. */
const OUTSIDE_APP = { selector: ":not(#app *)", reason: "index.html (HTML locator)" };

function stamp(code, file = "src/C.svelte") {
  return injectSvelteLocations(code, file, parse);
}

test("every native element is stamped at its start tag, in blocks, snippets and svelte:element", () => {
  const code = [
    "<script>let { items, tag } = $props();</script>", // 1
    '<div class="a"><span>x</span></div>', // 2
    "{#each items as i}<li>{i}</li>{:else}<p>none</p>{/each}", // 3
    "{#if tag}<svelte:element this={tag}><i></i></svelte:element>{:else}<hr />{/if}", // 4
    "{#snippet row(x)}<td>{x}</td>{/snippet}", // 5
    "\t😀<b>wide</b>", // 6: a tab and an astral character are one column each
    "<svelte:head><title>T</title><meta name=x /></svelte:head>", // 7: <title> cannot take attributes
    '<em data-spotpatch-loc="kept">k</em>', // 8: an existing attribute wins
  ].join("\n");
  const result = stamp(code);
  const locs = [...result.code.matchAll(/<([\w:-]+) data-spotpatch-loc="([^"]+)"/g)].map((m) => `${m[1]}@${m[2].replace("src/C.svelte:", "")}`);
  assert.deepEqual(locs, [
    "div@2:1", "span@2:16", "li@3:19", "p@3:38", "svelte:element@4:10", "i@4:37", "hr@4:68", "td@5:18", "b@6:3", "meta@7:30", "em@kept",
  ]);
  assert.equal(result.code.split("\n").length, code.split("\n").length, "no line added");
  assert.match(result.code, /<title>T<\/title>/);
  assert.match(result.code, /<em data-spotpatch-loc="kept">/);
  // The stamped text still compiles, and the map points back into the original.
  assert.doesNotThrow(() => parse(result.code, { modern: true }));
  assert.equal(result.map.sourcesContent[0], code);
});

test("component usages: Svelte's column on the stamped text maps to the engine's column and the tag", () => {
  const code = '<script>import Card from "./Card.svelte"; import * as ui from "./ui";</script>\n<ul><li>🛒 <Card /></li></ul>\n<ui.Button />';
  const result = stamp(code, "web/src/List.svelte");
  // The stamped line 2, as Svelte's locator counts it (0-based UTF-16 offset).
  const line2 = result.code.split("\n")[1];
  const svelteColumn = line2.indexOf("<Card");
  assert.deepEqual(result.usages, { [`2:${svelteColumn}`]: [11, "Card"], "3:0": [1, "ui.Button"] });
  assert.ok(svelteColumn > 11, "the column Svelte sees is shifted by the attributes before it");
  // Svelte drops a BOM before it counts columns; ours never count it.
  const bom = stamp("\uFEFF<b>x</b><Card />");
  assert.match(bom.code, /^\uFEFF<b data-spotpatch-loc="src\/C.svelte:1:1">/);
  assert.deepEqual(Object.values(bom.usages), [[9, "Card"]]);
  assert.deepEqual(Object.keys(bom.usages), [`1:${bom.code.indexOf("<Card") - 1}`]);
  // Paths needing escapes stay one valid attribute and one valid JS statement.
  const odd = stamp('<p>x</p><Card/>', 'src/{a} "b".svelte');
  assert.match(odd.code, /^<p data-spotpatch-loc=\{"src\/\{a\} \\"b\\".svelte:1:1"\}>/);
  assert.equal(parse(odd.code, { modern: true }).fragment.nodes[0].attributes[0].value.expression.value, 'src/{a} "b".svelte:1:1');
  new Function(registryStatement('src/{a} "b".svelte', odd.usages)); // parses
});

test("a file with neither elements nor components is left alone", () => {
  assert.equal(stamp("<script>let x = 1;</script>\n{x} text"), null);
});

test("listed after svelte() with a preprocessor that adds lines, the locations still come from the file on disk", async (t) => {
  const project = makeDemoProject(t, { source: path.join(APPS, "svelte-nested") });
  // A script preprocessor that adds three lines: Svelte's own positions below the script move, ours must not.
  const grow = { name: "grow", script: ({ content }) => ({ code: `\n\n\n${content}` }) };
  const server = await createServer({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    server: { middlewareMode: true, ws: false },
    plugins: [svelte({ preprocess: [grow] }), ...spotpatchLocateSvelte()],
  });
  t.after(() => server.close());
  const names = server.config.plugins.map((p) => p.name);
  assert.ok(names.indexOf("vite-plugin-svelte:preprocess") < names.indexOf("spotpatch:locate-svelte"), names.join(", "));
  const { code } = await server.transformRequest("/src/lib/Button.svelte");
  const button = lineOf(project.root, "src/lib/Button.svelte", "<button");
  const count = lineOf(project.root, "src/lib/Button.svelte", "<b ");
  // The <button> has a spread, so its attributes become an object; the <b> stays in a static template.
  assert.ok(code.includes(`'data-spotpatch-loc': 'src/lib/Button.svelte:${button.line}:1'`), code);
  assert.ok(code.includes(`<b data-spotpatch-loc="src/lib/Button.svelte:${count.line}:${count.column}"`), code);
  assert.ok(code.includes(`[[${count.line + 3}, `), "Svelte itself saw the preprocessed text (three lines down)");
});

/** `svelteUsageChain` as a browser module: chain-svelte.ts has no imports besides types. */
async function installChain(page) {
  const js = ts.transpileModule(readFileSync(CHAIN_SOURCE, "utf8"), {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
  }).outputText;
  await page.addScriptTag({ type: "module", content: `${js}\nwindow.__svelteUsageChain = svelteUsageChain;` });
  await page.waitForFunction(() => typeof window.__svelteUsageChain === "function");
}

/** The lines of `file` in `root` (engine numbering: split on "\n"). */
function lineOf(root, file, needle) {
  const lines = readFileSync(path.join(root, file), "utf8").split("\n");
  const index = lines.findIndex((l) => l.includes(needle));
  assert.ok(index >= 0, `${needle} not in ${file}`);
  return { line: index + 1, column: [...lines[index].slice(0, lines[index].indexOf(needle))].length + 1 };
}

test("svelte-ts template: every element the components render carries its exact location", async (t) => {
  const { page, project } = await openApp(t, { app: "svelte-ts", script: null, options: { providers: [] } });
  await page.waitForSelector("#app button");
  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  t.diagnostic(`svelte-ts: ${formatMeasurement(r)}`);
  assert.ok(r.total >= 10, `too few elements measured: ${r.total}`);
  assert.equal(r.located, r.total, formatMeasurement(r));
  assert.equal(r.exact, r.total, formatMeasurement(r));
  assert.deepEqual(page.errors, []);
});

test("nested fixture: the inner button's location and its usage chain (Card, then the page, then App)", async (t) => {
  const { page, project } = await openApp(t, { app: "svelte-nested", script: null, options: { providers: [] } });
  await page.waitForSelector("button.btn");
  await installChain(page);
  const root = project.root;
  const r = await measureLocations(page, root, { exclude: [OUTSIDE_APP] });
  assert.equal(r.exact, r.total, formatMeasurement(r));

  const button = await page.evaluate(() => {
    const el = document.querySelectorAll("button.btn")[1];
    return { loc: el.getAttribute("data-spotpatch-loc"), chain: window.__svelteUsageChain(el.querySelector(".label")) };
  });
  const at = (file, needle, component) => ({ component, file, ...lineOf(root, file, needle) });
  assert.equal(button.loc, `src/lib/Button.svelte:${lineOf(root, "src/lib/Button.svelte", "<button").line}:1`);
  assert.deepEqual(button.chain, [
    at("src/lib/Card.svelte", "<Button", "Button"), // after <footer> and an emoji on the same line
    at("src/ProductPage.svelte", "<Card", "Card"), // inside {#each}
    at("src/App.svelte", "<ProductPage", "ProductPage"), // after <main> on the same line
  ]);

  // An element written in the page but rendered through Card's {@render children()}: its own location is
  // in the page, and the chain says which Card (and page) it is inside.
  const note = await page.evaluate(() => {
    const el = document.querySelector("p.note em");
    return { loc: el.getAttribute("data-spotpatch-loc"), chain: window.__svelteUsageChain(el) };
  });
  assert.equal(note.loc, `src/ProductPage.svelte:${lineOf(root, "src/ProductPage.svelte", "<em").line}:${lineOf(root, "src/ProductPage.svelte", "<em").column}`);
  assert.deepEqual(note.chain, [at("src/ProductPage.svelte", "<Card", "Card"), at("src/App.svelte", "<ProductPage", "ProductPage")]);

  // An element created later by an {#if} inside Button keeps the chain of its instance.
  await page.locator("button.btn").nth(1).click();
  const count = await page.evaluate(() => window.__svelteUsageChain(document.querySelector("b.count")));
  assert.deepEqual(count, button.chain);

  // A registry the page scribbled over gives fewer sites, never a wrong one, and never throws.
  const scribbled = await page.evaluate(() => {
    const key = Symbol.for("spotpatch.svelte");
    const real = globalThis[key];
    const el = document.querySelector("button.btn");
    const out = [];
    for (const fake of [new Map([["src/lib/Card.svelte", { file: 7, usages: null }]]), new Map([["src/lib/Card.svelte", { usages: { x: 1 } }]]), {}]) {
      globalThis[key] = fake;
      out.push(window.__svelteUsageChain(el));
    }
    globalThis[key] = real;
    return out;
  });
  assert.deepEqual(scribbled, [[], [], []]);
  assert.deepEqual(page.errors, []);
});

test("HMR: an edit that shifts lines in a .svelte file leaves exact locations and chain after the update", async (t) => {
  const { page, project } = await openApp(t, { app: "svelte-nested", script: null, options: { providers: [] } });
  await page.waitForSelector("button.btn");
  await installChain(page);
  const card = path.join(project.root, "src/lib/Card.svelte");
  const before = readFileSync(card, "utf8");
  writeFileSync(card, before.replace('<article class="card">', '<article class="card">\n  <small>new</small>\n\n'));
  await page.waitForSelector("small", { timeout: 15_000 });
  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  assert.equal(r.exact, r.total, formatMeasurement(r));
  const chain = await page.evaluate(() => window.__svelteUsageChain(document.querySelector("button.btn")));
  assert.deepEqual(chain[0], { component: "Button", file: "src/lib/Card.svelte", ...lineOf(project.root, "src/lib/Card.svelte", "<Button") });
  const was = before.split("\n").findIndex((l) => l.includes("<Button")) + 1;
  assert.equal(chain[0].line, was + 3, "the edit moved the usage three lines down");
  assert.deepEqual(page.errors, []);
});

test("monorepo: a Svelte app in apps/web and its components in packages/ui get paths relative to the git top level", async (t) => {
  const project = makeDemoProject(t, {
    source: path.join(APPS, "svelte-nested"),
    edit(root) {
      // The app moves to apps/web, its shared components to packages/ui (outside the Vite root).
      const web = path.join(root, "apps", "web");
      const ui = path.join(root, "packages", "ui");
      mkdirSync(web, { recursive: true });
      mkdirSync(path.dirname(ui), { recursive: true });
      for (const name of readdirSync(root)) {
        if (name === "apps" || name === "packages" || name === "node_modules") continue;
        renameSync(path.join(root, name), path.join(web, name));
      }
      renameSync(path.join(web, "src", "lib"), ui);
      const page = path.join(web, "src", "ProductPage.svelte");
      writeFileSync(page, readFileSync(page, "utf8").replace('"./lib/Card.svelte"', '"../../../packages/ui/Card.svelte"'));
      // A workspace root, so Vite serves files outside apps/web (its default fs.allow).
      writeFileSync(path.join(root, "package.json"), JSON.stringify({ private: true, workspaces: ["apps/*", "packages/*"] }));
      symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(web, "node_modules"), "dir");
    },
  });
  const web = path.join(project.root, "apps", "web");
  // As `npm run dev` in apps/web would (Svelte's `rootDir` defaults to the cwd it was loaded in): Svelte
  // names the app's files relative to apps/web (`src/App.svelte`) and packages/ui's by their absolute
  // path; the chain maps both to project paths.
  const plugins = [svelte({ compilerOptions: { rootDir: web } })];
  const { url } = await startDevServer(t, { ...project, root: web }, { options: { providers: [] }, plugins, optimizeDeps: {} });
  const browser = await launchBrowser(t);
  const page = await newPage(await browser.newContext());
  await page.goto(`${url}/`);
  await page.waitForSelector("button.btn");
  await installChain(page);
  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  assert.equal(r.exact, r.total, formatMeasurement(r));
  assert.ok(r.total > 5);
  const loc = await page.evaluate(() => document.querySelector("button.btn").getAttribute("data-spotpatch-loc"));
  assert.match(loc, /^packages\/ui\/Button\.svelte:\d+:1$/);
  const svelteNames = await page.evaluate(() => ["main", "article"].map((s) => document.querySelector(s).__svelte_meta.loc.file));
  assert.equal(svelteNames[0], "src/App.svelte");
  assert.ok(svelteNames[1].endsWith("/packages/ui/Card.svelte") && path.isAbsolute(svelteNames[1]), svelteNames[1]);
  const chain = await page.evaluate(() => window.__svelteUsageChain(document.querySelector("button.btn")));
  const root = project.root;
  assert.deepEqual(chain, [
    { component: "Button", ...lineOf(root, "packages/ui/Card.svelte", "<Button"), file: "packages/ui/Card.svelte" },
    { component: "Card", ...lineOf(root, "apps/web/src/ProductPage.svelte", "<Card"), file: "apps/web/src/ProductPage.svelte" },
    { component: "ProductPage", ...lineOf(root, "apps/web/src/App.svelte", "<ProductPage"), file: "apps/web/src/App.svelte" },
  ]);
  assert.deepEqual(page.errors, []);
});

test("vite build of a Svelte app: no location attribute, no registry, no chain code", async (t) => {
  const project = makeDemoProject(t, { source: path.join(APPS, "svelte-nested") });
  const outDir = path.join(project.dir, "build-out");
  // Vite keeps the NODE_ENV the dev servers above set ("development"), which would make vite-plugin-svelte
  // compile in dev mode; a real `vite build` runs with "production".
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = "production";
  t.after(() => (nodeEnv === undefined ? delete process.env.NODE_ENV : (process.env.NODE_ENV = nodeEnv)));
  await build({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    plugins: [spotpatch({ command: [AGENT, "serve"], providers: [] }), svelte()],
    build: { outDir, emptyOutDir: true, sourcemap: true },
  });
  const files = readdirSync(outDir, { recursive: true }).filter((f) => /\.(js|html|css|map)$/.test(f));
  assert.ok(files.some((f) => f.endsWith(".js")), files.join(", "));
  let app = false;
  for (const file of files) {
    const text = readFileSync(path.join(outDir, file), "utf8");
    app ||= text.includes("Add ");
    // Source maps name files relative to the map, through the checkout: only their content counts.
    const body = file.endsWith(".map") ? JSON.stringify(JSON.parse(text).sourcesContent) : text;
    // Svelte's dev-only metadata is in its runtime's sources (maps), never in the built code.
    const needles = [/data-spotpatch-loc/, /spotpatch/i, ...(file.endsWith(".map") ? [] : [/__svelte_meta/, /componentTag/])];
    for (const needle of needles) {
      const hit = needle.exec(body);
      assert.equal(hit, null, hit ? `${file} contains ${needle}: …${body.slice(Math.max(0, hit.index - 80), hit.index + 80)}…` : "");
    }
  }
  assert.ok(app, "the app itself is in the bundle");
});
