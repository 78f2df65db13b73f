// Issue 15, Vue: the `spotpatch:locate-vue` transform (src/locate/locate-vue.ts) and the Vue usage chain
// (src/overlay/picker/chain-vue.ts). Unit tests drive the transform with Vue's real SFC compiler; the
// browser tests serve real apps with `vite dev` + @vitejs/plugin-vue in Debian's Chromium:
//   - acceptance 1: the official `vue-ts` template, every element from a .vue file located exactly;
//   - acceptance 2: test/apps/vue-nested (App → ProductPage → Card → Button, and a Wrapper whose root is
//     Button): the inner buttons' chains;
//   - fallthrough attributes never overwrite a root element's location, and no Vue warning appears
//     (fragment root, `inheritAttrs: false`);
//   - acceptance 4: the app in a subfolder of the git repository (paths relative to the git top level);
//   - an HMR edit that shifts lines: exact again after the update and after a reload;
//   - `vite build`: no attribute, no usage mark, nothing of SpotPatch.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import * as sfc from "@vue/compiler-sfc";
import vue from "@vitejs/plugin-vue";
import { build } from "vite";

import { spotpatch } from "../../dist/index.js";
import { encodeUsePayload, injectVueLocations, spotpatchLocateVue } from "../../dist/locate/locate-vue.js";
import { APPS, launchBrowser, newPage, openApp } from "../support/browser-support.mjs";
import { checkLocation, formatMeasurement, measureLocations } from "../support/locate-accuracy.mjs";
import { locOf, originalPositionFor, genPos } from "../support/locate-helpers.mjs";
import { AGENT, NODE_SHIM, makeDemoProject, recordingLogger, startDevServer } from "../support/support.mjs";

const NESTED = path.join(APPS, "vue-nested");
/** Elements of index.html (the HTML locator's part, measured by its own tests), excluded with a reason. */
const OUTSIDE_APP = { selector: ":not(#app *)", reason: "index.html (HTML locator)" };

/** `data-spotpatch-loc` values of a stamped SFC, read back with Vue's own parser: [{tag, value}]. */
function stampedElements(code) {
  const { descriptor, errors } = sfc.parse(code, { filename: "X.vue" });
  assert.deepEqual(errors, []);
  const out = [];
  const walk = (node) => {
    for (const child of node.children ?? []) {
      if (child.type !== 1) continue;
      const attr = child.props.find((p) => p.type === 6 && p.name === "data-spotpatch-loc");
      const hook = child.props.find((p) => p.type === 7 && p.name === "on" && p.arg?.content === "vue:before-mount");
      out.push({ tag: child.tag, value: attr?.value?.content ?? null, hook: hook?.exp?.content ?? null });
      walk(child);
    }
  };
  walk(descriptor.template.ast);
  return out;
}

const SFC = [
  "\uFEFF<script setup lang=\"ts\">",
  "import Card from './Card.vue'",
  "const ok = true",
  "</script>",
  "",
  "<template>\r",
  "  <div class=\"wrap\">\r",
  "    <Card class=\"c\"><span>😀 <b>bold</b></span></Card>",
  "    <svg viewBox=\"0 0 1 1\"><circle r=\"1\" /></svg>",
  "    <Transition><p v-if=\"ok\">x</p><p v-else>y</p></Transition>",
  "    <component :is=\"'em'\" />",
  "    <template v-if=\"ok\"><i>t</i></template><slot />",
  "    <Card @vue:before-mount=\"() => {}\" />",
  "  </div>",
  "</template>",
  "",
  "<style scoped>",
  ".wrap { color: red }",
  "</style>",
  "",
].join("\n");

test("every native element of the template gets its start tag's engine line:col; component tags get only a usage hook", () => {
  const out = injectVueLocations(SFC, "src/A.vue", { compiler: sfc });
  const found = stampedElements(out.code);
  const tags = found.map((f) => f.tag);
  assert.deepEqual(tags, ["div", "Card", "span", "b", "svg", "circle", "Transition", "p", "p", "component", "template", "i", "slot", "Card"]);
  for (const f of found) {
    const isElement = /^[a-z]/.test(f.tag) && !["component", "template", "slot"].includes(f.tag);
    if (!isElement) {
      assert.equal(f.value, null, `<${f.tag}> (a component, built-in or slot) carries no data-spotpatch-loc`);
      continue;
    }
    assert.ok(f.value, `<${f.tag}> is stamped`);
    assert.equal(f.value.split(":")[0], "src/A.vue");
    assert.equal(checkLocation(f.tag, f.value, null, new Map([["src/A.vue", engineLinesOf(SFC)]])), null, f.value);
  }
  // 😀 is one code point: <b> is at column 29 of line 8, not 30 (UTF-16) — the engine's unit
  assert.equal(found.find((f) => f.tag === "b").value, "src/A.vue:8:29");
  const site = (tag, nth = 0) => found.filter((f) => f.tag === tag)[nth].hook;
  const card = locOf(SFC.replace(/^\uFEFF/, ""), "<Card");
  assert.equal(site("Card"), `() => 'spotpatch-use:${encodeUsePayload(`src/A.vue:${card.line}:${card.col}`)}'`);
  assert.match(site("component"), /^\(\) => 'spotpatch-use:src%2FA\.vue%3A11%3A5'$/);
  assert.equal(site("Transition"), null, "built-ins are not usage sites");
  assert.equal(site("Card", 1), "() => {}", "a tag with its own before-mount hook keeps only the user's");
  // the original script and style blocks are untouched
  assert.equal(out.code.replace(/ data-spotpatch-loc="[^"]*"| @vue:before-mount="\(\) => '[^']*'"/g, ""), SFC);
});

function engineLinesOf(source) {
  const body = source.startsWith("\uFEFF") ? source.slice(1) : source;
  return body.split("\n").map((p) => (p.endsWith("\r") ? p.slice(0, -1) : p));
}

test("the value reads back exactly for awkward file names; the source map points stamped tags at their original column", async () => {
  const name = 'src/we"ird & <odd>.vue';
  const code = "<template>\n  <p>a</p>\n  <Card />\n</template>\n";
  const out = injectVueLocations(code, name, { compiler: sfc, sourceName: "/abs/we.vue" });
  const [p, card] = stampedElements(out.code);
  assert.equal(p.value, `${name}:2:3`);
  assert.equal(decodeURIComponent(/spotpatch-use:([^']+)/.exec(card.hook)[1]), `${name}:3:3`);
  for (const needle of ["<p", "<Card", "</template>"]) {
    const gen = genPos(out.code, out.code.indexOf(needle));
    const orig = await originalPositionFor(out.map, gen.line, gen.column);
    const want = locOf(code, needle);
    assert.deepEqual([orig.line + 1, orig.column + 1], [want.line, want.col], needle);
  }
  assert.equal(out.map.sources[0], "/abs/we.vue");
});

test("plugin: .vue files only (no node_modules, virtual or sub-request ids), dev server only; pug/src templates skipped with one warning", () => {
  const plugin = spotpatchLocateVue();
  assert.equal(plugin.enforce, "pre");
  assert.equal(plugin.apply, "serve");
  const warnings = [];
  const logger = { warnOnce: (m) => warnings.push(m), warn: (m) => warnings.push(m), info() {}, error() {} };
  // the compiler is plugin-vue's own (its `api.options.compiler`, set in its configResolved)
  const vuePlugin = { name: "vite:vue", api: { options: { compiler: null } } };
  plugin.configResolved({ root: "/proj", logger, plugins: [plugin, vuePlugin] });
  vuePlugin.api.options.compiler = sfc;
  const run = (code, id) => plugin.transform.handler.call({}, code, id);
  const tpl = "<template><p>x</p></template>\n";
  assert.match(run(tpl, "/proj/src/A.vue").code, /data-spotpatch-loc="src\/A\.vue:1:11"/);
  assert.match(run(tpl, "/proj/src/A.vue?t=123").code, /data-spotpatch-loc/);
  for (const id of [
    "/proj/node_modules/lib/A.vue",
    "\0/proj/src/A.vue",
    "virtual:x.vue",
    "/proj/src/A.vue?vue&type=template&lang.js",
    "/proj/src/A.vue?raw",
    "/elsewhere/A.vue",
    "/proj/src/A.ts",
  ]) {
    assert.equal(run(tpl, id), null, id);
  }
  const pug = '<template lang="pug">\np hello\n</template>\n';
  assert.equal(run(pug, "/proj/src/P.vue"), null);
  assert.equal(run(pug, "/proj/src/Q.vue"), null);
  assert.equal(run('<template src="./t.html"></template>\n', "/proj/src/S.vue"), null);
  assert.equal(warnings.filter((w) => w.includes('lang="pug"')).length, 1, warnings.join("\n"));
  assert.equal(warnings.filter((w) => w.includes('src="…"')).length, 1, warnings.join("\n"));
  assert.equal(run("<template><p>broken</template>\n", "/proj/src/B.vue"), null, "a parse error is left to plugin-vue");

  // without plugin-vue's API: vue/compiler-sfc resolved from the project root
  const alone = spotpatchLocateVue();
  alone.configResolved({ root: NODE_SHIM, logger, plugins: [alone] });
  assert.match(alone.transform.handler.call({}, tpl, path.join(NODE_SHIM, "x", "A.vue")).code, /data-spotpatch-loc="x\/A\.vue:1:11"/);
});

/** vueUsageChain bundled for the page (an IIFE defining `SpotpatchVueChain`). */
let chainBundle;
async function chainScript() {
  if (chainBundle) return chainBundle;
  const out = await build({
    root: NODE_SHIM,
    configFile: false,
    logLevel: "warn",
    publicDir: false,
    build: {
      write: false,
      minify: false,
      target: "es2022",
      lib: { entry: "src/overlay/picker/chain-vue.ts", formats: ["iife"], name: "SpotpatchVueChain" },
    },
  });
  chainBundle = out[0].output[0].code;
  return chainBundle;
}

async function chainOf(page, selector) {
  if (!(await page.evaluate(() => typeof window.SpotpatchVueChain === "object"))) {
    await page.addScriptTag({ content: await chainScript() });
  }
  return page.evaluate((selector) => window.SpotpatchVueChain.vueUsageChain(document.querySelector(selector)), selector);
}

/** Vue's console warnings of `page` after a reload (they are emitted while the app mounts). */
async function warningsOnReload(page) {
  const warnings = [];
  page.on("console", (m) => {
    if (m.type() === "warning" || m.type() === "error") warnings.push(m.text());
  });
  await page.reload();
  await page.locator("#app *").first().waitFor();
  return warnings;
}

test("acceptance 1, vue-ts template: every element rendered from a .vue file carries its exact location", async (t) => {
  const { page, project } = await openApp(t, { app: "vue-ts", script: null });
  await page.getByRole("button", { name: "Count is 0" }).waitFor();
  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  console.log(`vue-ts: ${formatMeasurement(r)}`);
  assert.ok(r.total >= 40, formatMeasurement(r));
  assert.equal(r.located, r.total, formatMeasurement(r));
  assert.equal(r.exact, r.total, formatMeasurement(r));
  // HelloWorld renders a fragment (three roots): App's `<HelloWorld />` passes nothing that could fall through
  assert.deepEqual((await warningsOnReload(page)).filter((w) => /Vue warn/.test(w)), []);
  assert.deepEqual(page.errors, []);
});

test("acceptance 2, nested components: the inner button's chain is Button@Card, Card@ProductPage, ProductPage@App; fallthrough never overwrites a location; no Vue warning", async (t) => {
  const { page, project } = await openApp(t, { app: "vue-nested", script: null });
  await page.locator("article.card button").waitFor();
  const loc = (selector) => page.locator(selector).getAttribute("data-spotpatch-loc");
  assert.equal(await loc("article.card button"), "src/components/Button.vue:6:3");
  // the Card's root element receives the page's class / data-kind (fallthrough) but keeps its own location
  assert.equal(await loc("article.card"), "src/components/Card.vue:8:3");
  assert.equal(await page.locator("article.card").getAttribute("data-kind"), "product");
  assert.match(await page.locator("article.card").getAttribute("class"), /\bfrom-page\b/);
  assert.equal(await loc("div.plain"), "src/components/Plain.vue:6:3");

  assert.deepEqual(await chainOf(page, "article.card button"), [
    { file: "src/components/Card.vue", line: 11, column: 5, component: "Button" },
    { file: "src/pages/ProductPage.vue", line: 13, column: 5, component: "Card" },
    { file: "src/App.vue", line: 7, column: 5, component: "ProductPage" },
  ]);
  // Wrapper's root is <Button>: the page's attributes fall through two levels onto the <button>, whose
  // location stays Button.vue's; the chain names both usages
  assert.equal(await loc("button.wrapped"), "src/components/Button.vue:6:3");
  assert.equal(await page.locator("button.wrapped").getAttribute("data-kind"), "wrapper");
  assert.deepEqual(await chainOf(page, "button.wrapped"), [
    { file: "src/components/Wrapper.vue", line: 7, column: 3, component: "Button" },
    { file: "src/pages/ProductPage.vue", line: 16, column: 5, component: "Wrapper" },
    { file: "src/App.vue", line: 7, column: 5, component: "ProductPage" },
  ]);
  // an element without its own component: the chain starts at the component that rendered it
  assert.deepEqual((await chainOf(page, "article.card p")).map((s) => s.component), ["Card", "ProductPage"]);
  assert.deepEqual(await chainOf(page, "main.shell"), [], "the root app is used by no template");
  // hand-made instances: only project-relative sites, ≤ 5, a cycle or a throwing getter ends quietly
  const forged = await page.evaluate(() => {
    // the mark is read from the handler's source text, so each forged handler is compiled with its site in it
    const mark = (site) => new Function(`return 'spotpatch-use:${encodeURIComponent(site)}'`);
    const inst = (name, hook, parent = null) => ({ type: { __name: name }, vnode: { props: { onVnodeBeforeMount: hook } }, parent });
    let top = null;
    for (let i = 8; i >= 1; i--) top = inst(`L${i}`, mark(`src/L${i}.vue:${i}:1`), top);
    const bad = inst("Abs", mark("/etc/passwd:1:1"), inst("Up", mark("../x.vue:1:1"), inst("Dep", mark("node_modules/a/B.vue:1:1"), inst("Ok", [() => 0, mark("src/Ok.vue:2:3")]))));
    const cyclic = inst("C", mark("src/C.vue:1:1"));
    cyclic.parent = cyclic;
    const hostile = {};
    Object.defineProperty(hostile, "vnode", { get() { throw new Error("no"); } });
    const on = (i) => { const el = document.createElement("div"); el.__vueParentComponent = i; return window.SpotpatchVueChain.vueUsageChain(el); };
    return { deep: on(top).map((s) => s.component), bad: on(bad), cyclic: on(cyclic), hostile: on(hostile) };
  });
  assert.deepEqual(forged.deep, ["L1", "L2", "L3", "L4", "L5"]);
  assert.deepEqual(forged.bad, [{ file: "src/Ok.vue", line: 2, column: 3, component: "Ok" }]);
  assert.deepEqual(forged.cyclic, [{ file: "src/C.vue", line: 1, column: 1, component: "C" }]);
  assert.deepEqual(forged.hostile, []);
  // no usage mark reaches the DOM
  assert.equal(await page.evaluate(() => document.body.innerHTML.includes("spotpatch-use")), false);

  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  assert.equal(r.exact, r.total, formatMeasurement(r));
  // Pair renders a fragment and Plain has `inheritAttrs: false`: an attribute on their tags would warn
  // "Extraneous non-props attributes"; the usage hook is a reserved vnode prop and never does.
  assert.deepEqual((await warningsOnReload(page)).filter((w) => /Vue warn/.test(w)), []);
  assert.deepEqual(page.errors, []);
});

test("acceptance 4, monorepo: a Vue app in packages/web of the repository gets paths relative to the git top level", async (t) => {
  const project = makeDemoProject(t, {
    source: NESTED,
    edit(root) {
      const web = path.join(root, "packages", "web");
      mkdirSync(web, { recursive: true });
      for (const name of readdirSync(root)) {
        if (name === "packages" || name === "node_modules") continue;
        renameSync(path.join(root, name), path.join(web, name));
      }
      writeFileSync(path.join(root, "package.json"), '{ "private": true, "workspaces": ["packages/*"] }\n');
    },
  });
  const { url } = await startDevServer(t, { ...project, root: path.join(project.root, "packages", "web") }, {
    plugins: [vue()],
    optimizeDeps: {},
  });
  const browser = await launchBrowser(t);
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await newPage(context);
  await page.goto(`${url}/`);
  await page.locator("article.card button").waitFor();
  assert.equal(await page.locator("article.card button").getAttribute("data-spotpatch-loc"), "packages/web/src/components/Button.vue:6:3");
  const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
  assert.ok(r.total >= 10, formatMeasurement(r));
  assert.equal(r.exact, r.total, formatMeasurement(r));
  assert.deepEqual((await chainOf(page, "article.card button")).map((s) => `${s.component}@${s.file}:${s.line}:${s.column}`), [
    "Button@packages/web/src/components/Card.vue:11:5",
    "Card@packages/web/src/pages/ProductPage.vue:13:5",
    "ProductPage@packages/web/src/App.vue:7:5",
  ]);
  assert.deepEqual(page.errors, []);
});

test("HMR: an edit that shifts Card.vue's lines re-renders with exact locations and chain, and they stay exact after a reload", async (t) => {
  const { page, project } = await openApp(t, { app: "vue-nested", script: null });
  await page.locator("article.card button").waitFor();
  const file = path.join(project.root, "src/components/Card.vue");
  // template only (two blank lines before the root): plugin-vue re-renders without remounting
  writeFileSync(file, readFileSync(file, "utf8").replace("<template>\n", "<template>\n\n\n"));
  await page.waitForFunction(() => document.querySelector("article.card")?.getAttribute("data-spotpatch-loc") === "src/components/Card.vue:10:3");
  const exactNow = async () => {
    const r = await measureLocations(page, project.root, { exclude: [OUTSIDE_APP] });
    assert.equal(r.exact, r.total, formatMeasurement(r));
  };
  await exactNow();
  assert.deepEqual((await chainOf(page, "article.card button"))[0], { file: "src/components/Card.vue", line: 13, column: 5, component: "Button" });
  // script + template edit (a full component reload), then a page reload
  writeFileSync(file, readFileSync(file, "utf8").replace('<script setup lang="ts">\n', '<script setup lang="ts">\n// one\n// two\n'));
  await page.waitForFunction(() => document.querySelector("article.card")?.getAttribute("data-spotpatch-loc") === "src/components/Card.vue:12:3");
  await exactNow();
  await page.reload();
  await page.locator("article.card button").waitFor();
  await exactNow();
  assert.deepEqual((await chainOf(page, "article.card button"))[0], { file: "src/components/Card.vue", line: 15, column: 5, component: "Button" });
  assert.deepEqual(page.errors, []);
});

test("vite build of a Vue app: no data-spotpatch-loc, no usage mark, nothing of SpotPatch", async (t) => {
  const project = makeDemoProject(t, { source: NESTED });
  const outDir = path.join(project.dir, "build-out");
  await build({
    configFile: false,
    root: project.root,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    plugins: [spotpatch({ command: [AGENT, "serve"] }), vue()],
    build: { outDir, emptyOutDir: true, sourcemap: true },
  });
  const files = readdirSync(outDir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath ?? e.path, e.name));
  assert.ok(files.some((f) => f.endsWith(".js")), files.join(", "));
  let sawButton = false;
  for (const file of files) {
    // the temp folder's own name (spotpatch-node-…) may appear in a non-production `__file`: not residue
    let text = readFileSync(file, "utf8").replaceAll(project.dir, "<tmp>");
    if (file.endsWith(".map")) {
      const map = JSON.parse(text);
      map.sources = map.sources.map((s) => s.replace(/^.*?node_modules\//, "node_modules/"));
      text = JSON.stringify(map);
    }
    if (text.includes("Add to cart")) sawButton = true;
    for (const needle of [/spotpatch/i, /data-spotpatch-loc/, /spotpatch-use/, /vueUsageChain/, /chain-vue/]) {
      const hit = needle.exec(text);
      assert.ok(!hit, hit ? `${path.relative(outDir, file)} contains ${needle}: …${text.slice(Math.max(0, hit.index - 80), hit.index + 80)}…` : "");
    }
  }
  assert.ok(sawButton, "the build contains the app");
});
