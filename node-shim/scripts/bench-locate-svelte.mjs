// What the Svelte locator costs (issue 15): `vite dev` transforms of generated `.svelte` files with
// @sveltejs/vite-plugin-svelte alone, and with `spotpatch:locate-svelte` (+ its registry half) next to it.
// Prints the median time per 1,000 source lines of both (wall clock, and this process's CPU time, which a
// busy machine disturbs less), the overhead, and the locator's own `injectSvelteLocations` time (Svelte's
// parser included).
//
//   cd node-shim && npm run build && node scripts/bench-locate-svelte.mjs [files=40] [rounds=7]
//
// Each round uses a fresh dev server (no transform cache) in middleware mode; the files live in a temp
// folder with node_modules linked to node-shim's. Nothing is served over the network.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

import { svelte } from "@sveltejs/vite-plugin-svelte";
import { parse } from "svelte/compiler";
import { createServer } from "vite";

import { injectSvelteLocations, spotpatchLocateSvelte } from "../dist/locate/locate-svelte.js";

const NODE_SHIM = fileURLToPath(new URL("..", import.meta.url));
const FILES = Number(process.argv[2] ?? 40);
const ROUNDS = Number(process.argv[3] ?? 7);

/** A realistic component: a TS script, a template of nested elements, blocks and components, a style. */
function component(i) {
  const rows = [];
  for (let r = 0; r < 30; r++) {
    rows.push(
      `  {#each items${r % 3} as item (item.id)}`,
      `    <li class="row row-${r}"><span class="label">{item.label}</span>`,
      `      <Badge count={item.count} onclick={() => pick(item)} />`,
      `      {#if item.href}<a href={item.href} target="_blank"><img src={item.icon} alt="" /> open</a>{/if}`,
      `    </li>`,
      `  {/each}`,
    );
  }
  return [
    `<script lang="ts">`,
    `  import Badge from "./Badge.svelte";`,
    `  let items0 = $state([{ id: 1, label: "a", count: 1, href: "#", icon: "/i.svg" }]);`,
    `  const items1 = items0;`,
    `  const items2 = items0;`,
    `  function pick(item: unknown) { console.log(item); }`,
    `</script>`,
    ``,
    `<section class="c${i}">`,
    `  <h2>Component ${i}</h2>`,
    `  <ul>`,
    ...rows,
    `  </ul>`,
    `</section>`,
    ``,
    `<style>`,
    `  .row { display: flex; gap: 4px; }`,
    `</style>`,
    ``,
  ].join("\n");
}

const dir = mkdtempSync(path.join(tmpdir(), "spotpatch-bench-svelte-"));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
try {
  mkdirSync(path.join(dir, "src"));
  symlinkSync(path.join(NODE_SHIM, "node_modules"), path.join(dir, "node_modules"), "dir");
  writeFileSync(path.join(dir, "src", "Badge.svelte"), `<script>let { count, ...rest } = $props();</script>\n<b class="badge" {...rest}>{count}</b>\n`);
  const sources = [];
  for (let i = 0; i < FILES; i++) {
    const code = component(i);
    sources.push(code);
    writeFileSync(path.join(dir, "src", `C${i}.svelte`), code);
  }
  const lines = sources.reduce((n, s) => n + s.split("\n").length, 0);

  async function round(withLocator) {
    const server = await createServer({
      configFile: false,
      root: dir,
      cacheDir: path.join(dir, ".vite"),
      logLevel: "silent",
      server: { middlewareMode: true, hmr: false, ws: false },
      optimizeDeps: { noDiscovery: true, include: [] },
      plugins: [...(withLocator ? spotpatchLocateSvelte() : []), svelte({ configFile: false })],
    });
    try {
      await server.transformRequest("/src/Badge.svelte"); // warm up the compiler (and our parser lookup)
      const start = performance.now();
      const cpu = process.cpuUsage();
      for (let i = 0; i < FILES; i++) await server.transformRequest(`/src/C${i}.svelte`);
      const used = process.cpuUsage(cpu);
      return { wall: performance.now() - start, cpu: (used.user + used.system) / 1000 };
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
    const start = performance.now();
    sources.forEach((code, i) => injectSvelteLocations(code, `src/C${i}.svelte`, parse));
    inject.push(performance.now() - start);
  }
  const per1k = (ms) => (ms * 1000) / lines;
  console.log(`${FILES} .svelte files, ${lines} lines, ${ROUNDS} rounds (median)`);
  for (const kind of ["wall", "cpu"]) {
    const a = per1k(median(without.map((r) => r[kind])));
    const b = per1k(median(withLoc.map((r) => r[kind])));
    console.log(`[${kind}] vite-plugin-svelte alone:        ${a.toFixed(1)} ms / 1,000 lines`);
    console.log(`[${kind}] with spotpatch:locate-svelte:    ${b.toFixed(1)} ms / 1,000 lines  (+${(b - a).toFixed(1)} ms, ${(((b - a) / a) * 100).toFixed(0)} %)`);
  }
  console.log(`injectSvelteLocations alone:     ${per1k(median(inject)).toFixed(1)} ms / 1,000 lines`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
