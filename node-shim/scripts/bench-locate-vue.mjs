// What the Vue locator costs (issue 15): `vite dev` transforms of generated `.vue` files with
// @vitejs/plugin-vue alone, and with `spotpatch:locate-vue` in front of it. Prints the median time per
// 1,000 source lines of both, the overhead, and the locator's own `injectVueLocations` time.
//
//   cd node-shim && npm run build && node scripts/bench-locate-vue.mjs [files=40] [rounds=7]
//
// Each round uses a fresh dev server (no transform cache) in middleware mode and rewrites every file with
// a round-specific first line, so no parse cache (compiler-sfc keeps one per source text) carries over:
// as in real use, where a file is transformed again only after it changed. The files live in a temp
// folder with node_modules linked to node-shim's. Nothing is served over the network.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

import * as sfc from "@vue/compiler-sfc";
import vue from "@vitejs/plugin-vue";
import { createServer } from "vite";

import { injectVueLocations, spotpatchLocateVue } from "../dist/locate/locate-vue.js";

const NODE_SHIM = fileURLToPath(new URL("..", import.meta.url));
const FILES = Number(process.argv[2] ?? 40);
const ROUNDS = Number(process.argv[3] ?? 7);

/** A realistic SFC: script setup, a template of nested elements, components and directives, a style. */
function component(i) {
  const rows = [];
  for (let r = 0; r < 30; r++) {
    rows.push(
      `    <li v-for="item in items${r % 3}" :key="item.id" class="row row-${r}">`,
      `      <span class="label">{{ item.label }}</span>`,
      `      <Badge :count="item.count" @click="pick(item)" />`,
      `      <a :href="item.href" target="_blank"><img :src="item.icon" alt="" /> open</a>`,
      `    </li>`,
    );
  }
  return [
    `<script setup lang="ts">`,
    `import { ref } from "vue";`,
    `import Badge from "./Badge.vue";`,
    `const items0 = ref([{ id: 1, label: "a", count: 1, href: "#", icon: "/i.svg" }]);`,
    `const items1 = items0;`,
    `const items2 = items0;`,
    `function pick(item: unknown) { console.log(item); }`,
    `</script>`,
    ``,
    `<template>`,
    `  <section class="c${i}">`,
    `  <h2>Component ${i}</h2>`,
    `  <ul>`,
    ...rows,
    `  </ul>`,
    `  </section>`,
    `</template>`,
    ``,
    `<style scoped>`,
    `.row { display: flex; gap: 4px; }`,
    `</style>`,
    ``,
  ].join("\n");
}

const dir = mkdtempSync(path.join(tmpdir(), "spotpatch-bench-vue-"));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
try {
  mkdirSync(path.join(dir, "src"));
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(dir, "node_modules"), "dir");
  writeFileSync(path.join(dir, "src", "Badge.vue"), `<template><b class="badge"><slot /></b></template>\n`);
  const sources = Array.from({ length: FILES }, (_, i) => component(i));
  const lines = sources.reduce((n, s) => n + s.split("\n").length, 0);
  let generation = 0;
  /** The sources with a first line no earlier round had. */
  const fresh = () => {
    generation++;
    return sources.map((code) => `<!-- generation ${generation} -->\n${code}`);
  };

  async function round(withLocator) {
    fresh().forEach((code, i) => writeFileSync(path.join(dir, "src", `C${i}.vue`), code));
    const server = await createServer({
      configFile: false,
      root: dir,
      cacheDir: path.join(dir, ".vite"),
      logLevel: "silent",
      server: { middlewareMode: true, hmr: false, ws: false },
      optimizeDeps: { noDiscovery: true, include: [] },
      plugins: [...(withLocator ? [spotpatchLocateVue()] : []), vue()],
    });
    try {
      await server.transformRequest("/src/Badge.vue"); // warm up plugin-vue's compiler and caches
      const start = performance.now();
      for (let i = 0; i < FILES; i++) await server.transformRequest(`/src/C${i}.vue`);
      return performance.now() - start;
    } finally {
      await server.close();
    }
  }

  const without = [];
  const withLoc = [];
  for (let r = 0; r < ROUNDS; r++) {
    without.push(await round(false));
    withLoc.push(await round(true));
  }
  const inject = [];
  for (let r = 0; r < ROUNDS; r++) {
    const codes = fresh();
    const start = performance.now();
    codes.forEach((code, i) => injectVueLocations(code, `src/C${i}.vue`, { compiler: sfc }));
    inject.push(performance.now() - start);
  }
  const per1k = (ms) => (ms * 1000) / lines;
  const a = per1k(median(without));
  const b = per1k(median(withLoc));
  console.log(`${FILES} .vue files, ${lines} lines, ${ROUNDS} rounds (median)`);
  console.log(`plugin-vue alone:            ${a.toFixed(1)} ms / 1,000 lines`);
  console.log(`with spotpatch:locate-vue:   ${b.toFixed(1)} ms / 1,000 lines  (+${(b - a).toFixed(1)} ms, ${(((b - a) / a) * 100).toFixed(0)} %)`);
  console.log(`injectVueLocations alone:    ${per1k(median(inject)).toFixed(1)} ms / 1,000 lines`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
