// Issue 29: the vite.config editor of `spotpatch-agent init` (src/init/config-edit.ts), run as the ONE
// bundled file the Python package carries (scripts/build-config-edit.mjs, built once into a temp folder and
// run from there, with no node_modules next to it).
//
// Each case writes a config into a temp Vite project (a copy of a create-vite template, or a package.json
// with "type": "module") whose node_modules holds links to node-shim's packages and a stub
// `vite-plugin-spotpatch` whose default export returns {name: 'spotpatch'}. Every "edit" answer is written
// and loaded with Vite's own loadConfigFromFile: the resolved plugins must be spotpatch then exactly the
// plugins the config had (the real framework plugins), and the editor run again on its own output answers
// "unchanged". Every "refuse" answer carries the import line and spotpatch() to paste, and its reason names
// no absolute path. The create-vite templates are read from node-shim's installed create-vite, and their
// expected text is derived from the template (the import after the last import, spotpatch() first).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { loadConfigFromFile } from "vite";

const NODE_SHIM = fileURLToPath(new URL("../..", import.meta.url));
const TEMPLATES = path.join(NODE_SHIM, "node_modules", "create-vite");
const IMPORT = "import spotpatch from 'vite-plugin-spotpatch'";

let work;
let bundle;
let serial = 0;

before(() => {
  work = realpathSync(mkdtempSync(path.join(tmpdir(), "spotpatch-config-edit-")));
  bundle = path.join(work, "bin", "config-edit.mjs");
  const built = spawnSync(process.execPath, ["scripts/build-config-edit.mjs", "--out", bundle], { cwd: NODE_SHIM, encoding: "utf8" });
  assert.equal(built.status, 0, built.stderr);
  // One node_modules for every project below it: links to node-shim's packages, and the stub plugin.
  const modules = path.join(work, "projects", "node_modules");
  mkdirSync(modules, { recursive: true });
  for (const name of readdirSync(path.join(NODE_SHIM, "node_modules"))) {
    if (name === ".bin" || name.startsWith(".") || name === "vite-plugin-spotpatch") continue;
    symlinkSync(path.join(NODE_SHIM, "node_modules", name), path.join(modules, name), "dir");
  }
  const stub = path.join(modules, "vite-plugin-spotpatch");
  mkdirSync(stub);
  writeFileSync(path.join(stub, "package.json"), JSON.stringify({ name: "vite-plugin-spotpatch", type: "module", exports: { ".": { import: "./index.js" } } }));
  writeFileSync(path.join(stub, "index.js"), "export default function spotpatch() {\n  return { name: 'spotpatch' }\n}\nexport { spotpatch }\n");
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A fresh project folder: a copy of `template`, else a package.json (`"type": "module"` unless esm: false). */
function project({ template, esm = true } = {}) {
  const root = path.join(work, "projects", `p${++serial}`);
  if (template) cpSync(path.join(TEMPLATES, `template-${template}`), root, { recursive: true });
  else {
    mkdirSync(root);
    writeFileSync(path.join(root, "package.json"), JSON.stringify(esm ? { name: "app", type: "module" } : { name: "app" }));
  }
  return root;
}

/** Run the bundled editor; its stdout must be one JSON line and its exit code 0. */
function edit(...args) {
  // maxBuffer: a multi-megabyte config's answer is a few megabytes of JSON.
  const run = spawnSync(process.execPath, [bundle, ...args], { cwd: work, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stderr, "");
  assert.match(run.stdout, /^\{.*\}\n$/);
  return JSON.parse(run.stdout);
}

async function flatten(list) {
  const out = [];
  for (const item of (await list) ?? []) {
    const value = await item;
    if (Array.isArray(value)) out.push(...(await flatten(value)));
    else if (value) out.push(value);
  }
  return out;
}

/** The names of the plugins Vite resolves from the config file (function configs called for `vite dev`). */
async function pluginNames(file) {
  const loaded = await loadConfigFromFile({ command: "serve", mode: "development" }, file, path.dirname(file), "silent");
  assert.ok(loaded, `Vite could not load ${path.basename(file)}`);
  return (await flatten(loaded.config.plugins)).map((plugin) => plugin.name);
}

/**
 * Write `source` as `name` in a new project, expect an "edit" answer with exactly `expected` (when given),
 * write it, load it (unless load: false): spotpatch first, then the plugins the original had. Then the editor on its own output
 * answers "unchanged". Returns the edited text.
 */
async function expectEdit(name, source, expected, options = {}) {
  const root = options.root ?? project();
  const file = path.join(root, name);
  writeFileSync(file, source);
  const before = options.load === false ? undefined : await pluginNames(file);
  const answer = edit(file);
  assert.equal(answer.status, "edit", JSON.stringify(answer));
  assert.deepEqual(Object.keys(answer).sort(), ["code", "status"]);
  if (expected !== undefined) assert.equal(answer.code, expected);
  writeFileSync(file, answer.code);
  if (before) {
    const names = await pluginNames(file);
    assert.deepEqual(names, ["spotpatch", ...before.filter((pluginName) => pluginName !== "spotpatch")]);
  }
  assert.deepEqual(edit(file), { status: "unchanged" }, "the editor on its own output");
  return answer.code;
}

/** Expect a "refuse" with a reason matching `reason` and paste lines holding the import and spotpatch(). */
function expectRefuse(name, source, reason, options = {}) {
  const root = options.root ?? project();
  const file = path.join(root, name);
  writeFileSync(file, source);
  const answer = edit(file);
  assert.equal(answer.status, "refuse", JSON.stringify(answer));
  assert.match(answer.reason, reason);
  assert.ok(!answer.reason.includes(work) && !/(^|[\s(])\/\w/.test(answer.reason), `a path in the reason: ${answer.reason}`);
  const [importLine, pluginsLine, ...rest] = answer.paste.split("\n");
  assert.match(importLine, /^import spotpatch from (['"])vite-plugin-spotpatch\1;?$/);
  // spotpatch() first (with the arguments the file's own call has, if it has one).
  assert.match(pluginsLine, /^plugins: \[spotpatch\((\{[^\n]*\})?\)(, .*)?\],$/s);
  assert.deepEqual(rest, []);
  if (options.paste) assert.equal(answer.paste, options.paste);
  assert.equal(readFileSync(file, "utf8"), source, "the editor never writes");
  return answer;
}

for (const template of ["react-ts", "vue-ts", "svelte-ts", "preact-ts", "solid-ts"]) {
  test(`create-vite ${template}: spotpatch() first, the import after the template's imports, nothing else changed`, async () => {
    const root = project({ template });
    const source = readFileSync(path.join(root, "vite.config.ts"), "utf8");
    // The expectation, derived from the template without the editor: one line inserted, one list prefixed.
    const lines = source.split("\n");
    const lastImport = lines.findLastIndex((line) => line.startsWith("import "));
    assert.ok(lastImport >= 0 && source.split("plugins: [").length === 2, "the template's shape changed");
    lines.splice(lastImport + 1, 0, IMPORT);
    const expected = lines.join("\n").replace("plugins: [", "plugins: [spotpatch(), ");
    await expectEdit("vite.config.ts", source, expected, { root });
  });
}

test("create-vite vanilla-ts has no vite.config: --create gives a minimal vite.config.ts that loads", async () => {
  const root = project({ template: "vanilla-ts" });
  assert.deepEqual(readdirSync(root).filter((name) => name.startsWith("vite.config")), []);
  assert.ok(existsSync(path.join(root, "tsconfig.json")));
  const answer = edit("--create", path.join(root, "vite.config.ts"));
  assert.deepEqual(answer, {
    status: "edit",
    code: `import { defineConfig } from 'vite'\n${IMPORT}\n\n// https://vite.dev/config/\nexport default defineConfig({\n  plugins: [spotpatch()],\n})\n`,
  });
  assert.ok(!existsSync(path.join(root, "vite.config.ts")), "--create writes nothing");
  writeFileSync(path.join(root, "vite.config.ts"), answer.code);
  assert.deepEqual(await pluginNames(path.join(root, "vite.config.ts")), ["spotpatch"]);
  assert.deepEqual(edit(path.join(root, "vite.config.ts")), { status: "unchanged" });
  // The same file for a JS project; a project Vite loads as CommonJS is told to create a .mjs/.mts.
  assert.deepEqual(edit("--create", path.join(root, "vite.config.js")), answer);
  const cjs = project({ esm: false });
  assert.equal(edit("--create", path.join(cjs, "vite.config.js")).status, "refuse");
  assert.match(edit("--create", path.join(cjs, "vite.config.ts")).reason, /create vite\.config\.mts instead/);
  assert.equal(edit("--create", path.join(cjs, "vite.config.mts")).status, "edit");
});

test("plugins in a const array declared once: spotpatch() first in that array", async () => {
  await expectEdit(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nconst plugins = [react()]\n\nexport default defineConfig({\n  plugins,\n})\n",
    `import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n${IMPORT}\n\nconst plugins = [spotpatch(), react()]\n\nexport default defineConfig({\n  plugins,\n})\n`,
  );
});

test("plugins in a let, or a name declared twice: refused with a line that works for any value", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nlet plugins = [react()]\nif (process.env.CI) plugins = []\n\nexport default defineConfig({ plugins })\n",
    /plugins comes from the variable plugins, which is not a const array literal/,
    { paste: `${IMPORT}\nplugins: [spotpatch(), plugins],` },
  );
  expectRefuse(
    "vite.config.ts",
    "import react from '@vitejs/plugin-react'\nconst list = [react()]\nfunction other() { const list = []; return list }\nexport default { plugins: list, other }\n",
    /the variable list/,
  );
});

test("plugins built by a function call: refused, the call nested after spotpatch()", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nfunction getPlugins() {\n  return [react()]\n}\n\nexport default defineConfig({\n  plugins: getPlugins(),\n})\n",
    /plugins is built by a call to getPlugins\(\.\.\.\)/,
    { paste: `${IMPORT}\nplugins: [spotpatch(), getPlugins()],` },
  );
});

test("a function config with a block body and one return of an object (a nested function's return aside): edited inside it", async () => {
  await expectEdit(
    "vite.config.ts",
    "import { defineConfig, loadEnv } from 'vite'\nimport vue from '@vitejs/plugin-vue'\n\nexport default defineConfig(({ mode }) => {\n  const env = loadEnv(mode, process.cwd(), '')\n  return {\n    base: env.BASE ?? '/',\n    plugins: [vue()],\n    build: { rollupOptions: { output: { manualChunks(id) { return id.includes('node_modules') ? 'vendor' : undefined } } } },\n  }\n})\n",
    `import { defineConfig, loadEnv } from 'vite'\nimport vue from '@vitejs/plugin-vue'\n${IMPORT}\n\nexport default defineConfig(({ mode }) => {\n  const env = loadEnv(mode, process.cwd(), '')\n  return {\n    base: env.BASE ?? '/',\n    plugins: [spotpatch(), vue()],\n    build: { rollupOptions: { output: { manualChunks(id) { return id.includes('node_modules') ? 'vendor' : undefined } } } },\n  }\n})\n`,
  );
});

test("an arrow config returning an object without plugins, tab-indented: plugins added first, tabs kept", async () => {
  await expectEdit(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\n\nexport default defineConfig(() => ({\n\tserver: {\n\t\tport: 5174,\n\t},\n}))\n",
    `import { defineConfig } from 'vite'\n${IMPORT}\n\nexport default defineConfig(() => ({\n\tplugins: [spotpatch()],\n\tserver: {\n\t\tport: 5174,\n\t},\n}))\n`,
  );
});

test("a function config with two returns: refused", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig(({ command }) => {\n  if (command === 'build') return { plugins: [react()] }\n  return { plugins: [react()], server: { port: 3000 } }\n})\n",
    /the config function has 2 return statements/,
  );
});

test("a .mjs config exporting a plain object, with a @ts-check pragma and no imports", async () => {
  await expectEdit(
    "vite.config.mjs",
    "// @ts-check\n\n/** @type {import('vite').UserConfig} */\nexport default {\n  server: { port: 3000 },\n}\n",
    `// @ts-check\n${IMPORT}\n\n/** @type {import('vite').UserConfig} */\nexport default {\n  plugins: [spotpatch()],\n  server: { port: 3000 },\n}\n`,
  );
  await expectEdit(
    "vite.config.mjs",
    "import preact from '@preact/preset-vite'\n\nexport default {\n  plugins: [preact()],\n}\n",
    `import preact from '@preact/preset-vite'\n${IMPORT}\n\nexport default {\n  plugins: [spotpatch(), preact()],\n}\n`,
  );
});

test("a config with comments in and around plugins: every comment kept where it was", async () => {
  const source = [
    "import { defineConfig } from 'vite' // vite itself",
    "/* the framework */",
    "import solid from 'vite-plugin-solid'",
    "",
    "// https://vite.dev/config/",
    "export default defineConfig({",
    "  // plugins run in this order",
    "  plugins: [",
    "    // Solid's JSX transform",
    "    solid(), // keep it",
    "    /* inspect(), */",
    "  ], // end of plugins",
    "  /* dev server */",
    "  server: { port: 3000 },",
    "})",
    "",
  ].join("\n");
  const code = await expectEdit(
    "vite.config.ts",
    source,
    [
      "import { defineConfig } from 'vite' // vite itself",
      "/* the framework */",
      "import solid from 'vite-plugin-solid'",
      IMPORT,
      "",
      "// https://vite.dev/config/",
      "export default defineConfig({",
      "  // plugins run in this order",
      "  plugins: [",
      "    spotpatch(),",
      "    // Solid's JSX transform",
      "    solid(), // keep it",
      "    /* inspect(), */",
      "  ], // end of plugins",
      "  /* dev server */",
      "  server: { port: 3000 },",
      "})",
      "",
    ].join("\n"),
  );
  for (const comment of source.match(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g)) assert.ok(code.includes(comment), comment);
});

test("semicolons and double quotes: the import is written in the file's style", async () => {
  await expectEdit(
    "vite.config.js",
    'import { defineConfig } from "vite";\nimport react from "@vitejs/plugin-react";\n\nexport default defineConfig({\n  plugins: [\n    react(),\n  ],\n});\n',
    'import { defineConfig } from "vite";\nimport react from "@vitejs/plugin-react";\nimport spotpatch from "vite-plugin-spotpatch";\n\nexport default defineConfig({\n  plugins: [\n    spotpatch(),\n    react(),\n  ],\n});\n',
  );
});

test("CRLF line ends are kept", async () => {
  await expectEdit(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\r\nimport vue from '@vitejs/plugin-vue'\r\n\r\nexport default defineConfig({\r\n  plugins: [\r\n    vue(),\r\n  ],\r\n})\r\n",
    `import { defineConfig } from 'vite'\r\nimport vue from '@vitejs/plugin-vue'\r\n${IMPORT}\r\n\r\nexport default defineConfig({\r\n  plugins: [\r\n    spotpatch(),\r\n    vue(),\r\n  ],\r\n})\r\n`,
  );
});

test("mergeConfig: refused", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig, mergeConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nconst base = defineConfig({ base: '/' })\n\nexport default mergeConfig(base, defineConfig({ plugins: [react()] }))\n",
    /mergeConfig/,
    { paste: `${IMPORT}\nplugins: [spotpatch()],` },
  );
});

test("plugins chosen by a condition: refused, the condition nested after spotpatch()", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig(({ mode }) => ({\n  plugins: mode === 'x' ? [react()] : [],\n}))\n",
    /plugins is chosen by a condition/,
    { paste: `${IMPORT}\nplugins: [spotpatch(), mode === 'x' ? [react()] : []],` },
  );
});

test("a spread-only plugins array, or a config object spreading another: refused", () => {
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport shared from './shared'\n\nexport default defineConfig({\n  plugins: [...shared.plugins],\n})\n",
    /only spreads other arrays/,
    { paste: `${IMPORT}\nplugins: [spotpatch(), ...shared.plugins],` },
  );
  expectRefuse("vite.config.ts", "import shared from './shared'\n\nexport default {\n  ...shared,\n  base: '/',\n}\n", /spreads another object/);
});

test("CommonJS: module.exports, a .cjs config, and a .ts config in a package without \"type\": \"module\"", () => {
  expectRefuse(
    "vite.config.cjs",
    "const react = require('@vitejs/plugin-react')\n\nmodule.exports = {\n  plugins: [react()],\n}\n",
    /vite\.config\.cjs is CommonJS \(module\.exports\)/,
    { paste: `${IMPORT}\nplugins: [spotpatch(), react()],` },
  );
  expectRefuse(
    "vite.config.js",
    "const { defineConfig } = require('vite')\n\nmodule.exports = defineConfig({})\n",
    /is CommonJS \(module\.exports\)/,
  );
  expectRefuse("vite.config.cjs", "export default { plugins: [] }\n", /as CommonJS \(its extension\).*rename it to vite\.config\.mjs/);
  expectRefuse(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [react()],\n})\n",
    /loads vite\.config\.ts as CommonJS \(the nearest package\.json has no "type": "module"\).*rename it to vite\.config\.mts/,
    { root: project({ esm: false }), paste: `${IMPORT}\nplugins: [spotpatch(), react()],` },
  );
});

test("a config that does not parse: refused, the paste lines in the file's quote style", () => {
  const answer = expectRefuse("vite.config.ts", 'import react from "@vitejs/plugin-react"\n\nexport default {\n  plugins: [react(),\n', /^vite\.config\.ts does not parse \(/);
  assert.equal(answer.paste, 'import spotpatch from "vite-plugin-spotpatch"\nplugins: [spotpatch()],');
  // TypeScript syntax in a .js config does not parse as JavaScript (Vite would fail on it too).
  expectRefuse("vite.config.js", "const port: number = 3000\nexport default { server: { port } }\n", /does not parse/);
  expectRefuse("vite.config.ts", "", /has no export default/);
});

test("already there under another name: unchanged when first, else moved first; the import alone: only the call is added", async () => {
  const root = project();
  const present = "import { defineConfig } from 'vite'\nimport sp from 'vite-plugin-spotpatch'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [sp(), react()],\n})\n";
  writeFileSync(path.join(root, "vite.config.ts"), present);
  assert.deepEqual(edit(path.join(root, "vite.config.ts")), { status: "unchanged" });
  // After react() it is not where it must be (both are enforce: 'pre'): moved to the front.
  await expectEdit("vite.config.ts", present.replace("[sp(), react()]", "[react(), sp()]"), present);
  await expectEdit(
    "vite.config.ts",
    "import { defineConfig } from 'vite'\nimport { spotpatch as sp } from 'vite-plugin-spotpatch'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [react()],\n})\n",
    "import { defineConfig } from 'vite'\nimport { spotpatch as sp } from 'vite-plugin-spotpatch'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [sp(), react()],\n})\n",
  );
  // The name spotpatch taken by something else: the import gets a free name.
  await expectEdit(
    "vite.config.ts",
    "import react from '@vitejs/plugin-react'\n\nconst spotpatch = '/spot/'\n\nexport default {\n  base: spotpatch,\n  plugins: [react()],\n}\n",
    "import react from '@vitejs/plugin-react'\nimport vitePluginSpotpatch from 'vite-plugin-spotpatch'\n\nconst spotpatch = '/spot/'\n\nexport default {\n  base: spotpatch,\n  plugins: [vitePluginSpotpatch(), react()],\n}\n",
  );
});

test("more shapes: a config const with satisfies, vitest's defineConfig, an empty object", async () => {
  await expectEdit(
    "vite.config.ts",
    "import type { UserConfig } from 'vite'\nimport vue from '@vitejs/plugin-vue'\n\nconst config = {\n  plugins: [vue()],\n} satisfies UserConfig\n\nexport default config\n",
    `import type { UserConfig } from 'vite'\nimport vue from '@vitejs/plugin-vue'\n${IMPORT}\n\nconst config = {\n  plugins: [spotpatch(), vue()],\n} satisfies UserConfig\n\nexport default config\n`,
  );
  await expectEdit(
    "vite.config.mts",
    "import { defineConfig } from 'vitest/config'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [react()],\n  test: { environment: 'node' },\n})\n",
    `import { defineConfig } from 'vitest/config'\nimport react from '@vitejs/plugin-react'\n${IMPORT}\n\nexport default defineConfig({\n  plugins: [spotpatch(), react()],\n  test: { environment: 'node' },\n})\n`,
    { load: false }, // vitest is not among node-shim's packages: the text is checked, not loaded
  );
  await expectEdit("vite.config.js", "export default {}\n", `${IMPORT}\n\nexport default { plugins: [spotpatch()] }\n`);
});

test("usage errors exit 2; a missing file is refused without its path", () => {
  const run = spawnSync(process.execPath, [bundle], { encoding: "utf8" });
  assert.equal(run.status, 2);
  assert.equal(run.stdout, "");
  assert.equal(spawnSync(process.execPath, [bundle, "notes.txt"], { encoding: "utf8" }).status, 2);
  const answer = edit(path.join(work, "projects", "missing", "vite.config.ts"));
  assert.equal(answer.status, "refuse");
  assert.equal(answer.reason, "vite.config.ts does not exist");
});

// spotpatch() must run before the framework plugins (all enforce: 'pre', so their order in plugins decides).
for (const [template, framework] of [
  ["react-ts", "react()"],
  ["solid-ts", "solid()"],
]) {
  test(`create-vite ${template} with spotpatch() after ${framework}: the call moved to the front, nothing else changed`, async () => {
    const root = project({ template });
    const pristine = readFileSync(path.join(root, "vite.config.ts"), "utf8");
    const lines = pristine.split("\n");
    lines.splice(lines.findLastIndex((line) => line.startsWith("import ")) + 1, 0, IMPORT);
    const withImport = lines.join("\n");
    assert.ok(withImport.includes(`plugins: [${framework}]`), "the template's shape changed");
    await expectEdit(
      "vite.config.ts",
      withImport.replace(`plugins: [${framework}]`, `plugins: [${framework}, spotpatch({ overlay: { hotkey: 'alt+s' } })]`),
      withImport.replace(`plugins: [${framework}]`, `plugins: [spotpatch({ overlay: { hotkey: 'alt+s' } }), ${framework}]`),
      { root },
    );
  });
}

test("spotpatch() on a line of its own after other plugins: its lines (comments too) moved above the first plugin's", async () => {
  const head = `import { defineConfig } from 'vite'\nimport vue from '@vitejs/plugin-vue'\nimport react from '@vitejs/plugin-react'\n${IMPORT}\n\nexport default defineConfig({\n`;
  await expectEdit(
    "vite.config.ts",
    `${head}  plugins: [\n    // the framework\n    vue(), // keep\n    react(),\n    // SpotPatch\n    spotpatch(), // pick\n  ],\n})\n`,
    `${head}  plugins: [\n    // SpotPatch\n    spotpatch(), // pick\n    // the framework\n    vue(), // keep\n    react(),\n  ],\n})\n`,
  );
  // No trailing comma in the list: none after the move either.
  await expectEdit(
    "vite.config.ts",
    `${head}  plugins: [\n    vue(),\n    spotpatch()\n  ]\n})\n`,
    `${head}  plugins: [\n    spotpatch(),\n    vue()\n  ]\n})\n`,
  );
  // CRLF, and a const array declared once.
  await expectEdit(
    "vite.config.ts",
    `${IMPORT}\r\nimport vue from '@vitejs/plugin-vue'\r\n\r\nconst plugins = [\r\n  vue(),\r\n  spotpatch(),\r\n]\r\n\r\nexport default { plugins }\r\n`,
    `${IMPORT}\r\nimport vue from '@vitejs/plugin-vue'\r\n\r\nconst plugins = [\r\n  spotpatch(),\r\n  vue(),\r\n]\r\n\r\nexport default { plugins }\r\n`,
  );
  // Inline between two others: the entry and one separator go, the rest of the list keeps its lines.
  await expectEdit(
    "vite.config.ts",
    `${head}  plugins: [vue(), /* sp */ spotpatch(),\n    react()],\n})\n`,
    `${head}  plugins: [/* sp */ spotpatch(), vue(),\n    react()],\n})\n`,
  );
  // The plugin's instance in a const: that name moved.
  await expectEdit(
    "vite.config.ts",
    `${IMPORT}\nimport vue from '@vitejs/plugin-vue'\n\nconst sp = spotpatch()\n\nexport default { plugins: [vue(), sp] }\n`,
    `${IMPORT}\nimport vue from '@vitejs/plugin-vue'\n\nconst sp = spotpatch()\n\nexport default { plugins: [sp, vue()] }\n`,
  );
});

test("spotpatch() after another plugin where it cannot be moved from (a spread, a nested array, a condition): refused", async () => {
  const head = `import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n${IMPORT}\n\n`;
  const notFirst = /^spotpatch\(\) must come first in plugins$/;
  expectRefuse(
    "vite.config.ts",
    `${head}export default defineConfig(({ command }) => ({\n  plugins: [react(), ...(command === 'serve' ? [spotpatch()] : [])],\n}))\n`,
    notFirst,
    { paste: `${IMPORT}\nplugins: [spotpatch(), react(), ...(command === 'serve' ? [] : [])],` },
  );
  expectRefuse(
    "vite.config.ts",
    `${head}export default defineConfig({\n  plugins: [react(), [spotpatch({ overlay: false }), react()]],\n})\n`,
    notFirst,
    { paste: `${IMPORT}\nplugins: [spotpatch({ overlay: false }), react(), [react()]],` },
  );
  expectRefuse(
    "vite.config.ts",
    `${head}export default defineConfig(({ mode }) => ({\n  plugins: mode === 'x' ? [react(), spotpatch()] : [spotpatch()],\n}))\n`,
    notFirst,
    { paste: `${IMPORT}\nplugins: [spotpatch(), mode === 'x' ? [react()] : []],` },
  );
  // First on every way the list can turn out (or only where this file cannot see): unchanged, as before.
  for (const plugins of ["[...(process.env.CI ? [] : [spotpatch()]), react()]", "[[spotpatch()], react()]", "process.env.CI ? [react()] : [spotpatch(), react()]", "[spotpatch(), react()]"]) {
    const root = project();
    writeFileSync(path.join(root, "vite.config.ts"), `${head}export default defineConfig({\n  plugins: ${plugins},\n})\n`);
    assert.deepEqual(edit(path.join(root, "vite.config.ts")), { status: "unchanged" }, plugins);
  }
});

test("a namespace import (sp.default()) or { default as sp }: recognised, never a second import or call", async () => {
  const tail = "import react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [PLUGINS],\n})\n";
  for (const [binding, call] of [
    ["* as sp", "sp.default()"],
    ["{ default as sp }", "sp()"],
  ]) {
    const source = (plugins) => `import { defineConfig } from 'vite'\nimport ${binding} from 'vite-plugin-spotpatch'\n${tail.replace("PLUGINS", plugins)}`;
    const root = project();
    writeFileSync(path.join(root, "vite.config.ts"), source(`${call}, react()`));
    assert.deepEqual(edit(path.join(root, "vite.config.ts")), { status: "unchanged" }, binding);
    await expectEdit("vite.config.ts", source(`react(), ${call}`), source(`${call}, react()`));
    // The import alone: the call through it is added, no second import.
    await expectEdit("vite.config.ts", source("react()"), source(`${call}, react()`));
  }
});

test("a config that is not UTF-8 (a Latin-1 byte in a comment): refused, never an edit that turns it into U+FFFD", () => {
  const root = project();
  const file = path.join(root, "vite.config.ts");
  const bytes = Buffer.concat([
    Buffer.from("import { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\n// Caf"),
    Buffer.from([0xe9]), // é in Latin-1
    Buffer.from("\nexport default defineConfig({\n  plugins: [react()],\n})\n"),
  ]);
  writeFileSync(file, bytes);
  const answer = edit(file);
  assert.equal(answer.status, "refuse", JSON.stringify(answer));
  assert.match(answer.reason, /^vite\.config\.ts is not UTF-8 \(line 4 /);
  assert.equal(answer.paste, `${IMPORT}\nplugins: [spotpatch(), react()],`);
  assert.ok(readFileSync(file).equals(bytes), "the editor never writes");
  // Already set up: nothing to write, so unchanged.
  writeFileSync(file, Buffer.concat([bytes.subarray(0, bytes.indexOf("\nexport")), Buffer.from(`\n${IMPORT}\nexport default { plugins: [spotpatch()] }\n`)]));
  assert.deepEqual(edit(file), { status: "unchanged" });
});

test("a UTF-8 byte order mark is kept exactly (first, once), also when the import goes at the top", async () => {
  for (const [source, expected] of [
    ["\uFEFFexport default {}\n", `\uFEFF${IMPORT}\n\nexport default { plugins: [spotpatch()] }\n`],
    ["\uFEFF// @ts-check\nexport default {}\n", `\uFEFF// @ts-check\n${IMPORT}\n\nexport default { plugins: [spotpatch()] }\n`],
    [
      "\uFEFFimport vue from '@vitejs/plugin-vue'\n\nexport default { plugins: [vue()] }\n",
      `\uFEFFimport vue from '@vitejs/plugin-vue'\n${IMPORT}\n\nexport default { plugins: [spotpatch(), vue()] }\n`,
    ],
  ]) {
    const root = project();
    await expectEdit("vite.config.mjs", source, expected, { root });
    const written = readFileSync(path.join(root, "vite.config.mjs"));
    assert.deepEqual([...written.subarray(0, 4)], [0xef, 0xbb, 0xbf, expected.charCodeAt(1)]);
    // On the pipe the BOM (any non-ASCII character) is a \u escape: the same text whatever encoding reads it.
    writeFileSync(path.join(root, "vite.config.mjs"), source);
    const raw = spawnSync(process.execPath, [bundle, path.join(root, "vite.config.mjs")], { encoding: "latin1" }).stdout;
    assert.match(raw, /^[\x20-\x7e]*\n$/);
    assert.ok(raw.includes("\\ufeff"));
  }
  // A BOM in package.json (npm and Vite accept it) still says "type": "module".
  const root = project();
  writeFileSync(path.join(root, "package.json"), `\uFEFF${readFileSync(path.join(root, "package.json"), "utf8")}`);
  await expectEdit("vite.config.js", "export default {}\n", `${IMPORT}\n\nexport default { plugins: [spotpatch()] }\n`, { root });
});

test("a 2.7 MB config (a huge array literal): edited, no stack overflow; a chain too deep to parse and a file over 5 MB: refused plainly", async () => {
  const numbers = Array.from({ length: 400_000 }, (_, i) => i).join(",");
  const source = `import react from '@vitejs/plugin-react'\n\nconst table = [${numbers}]\n\nexport default {\n  define: { TABLE_SIZE: table.length },\n  plugins: [react()],\n}\n`;
  assert.ok(source.length > 2_600_000);
  const code = await expectEdit("vite.config.mjs", source, undefined, { load: false });
  assert.equal(code, source.replace("\n\nconst table", `\n${IMPORT}\n\nconst table`).replace("plugins: [react()]", "plugins: [spotpatch(), react()]"));
  const chain = `export default {\n  define: { SUM: ${Array.from({ length: 500_000 }, () => "1").join(" + ")} },\n}\n`;
  const deep = expectRefuse("vite.config.mjs", chain, /^vite\.config\.mjs nests its code too deeply for this editor to parse/);
  assert.doesNotMatch(deep.reason, /call stack/i);
  expectRefuse("vite.config.mjs", `export default {}\n/* ${"x".repeat(5 * 1024 * 1024)} */\n`, /^vite\.config\.mjs is too large to edit safely \(5\.0 MB; the editor reads at most 5 MB\)$/);
});
