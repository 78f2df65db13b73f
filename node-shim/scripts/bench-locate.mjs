// The locator benchmark (issue 15; tests/bench/README.md "Locator"). From node-shim/, after `npm run build`:
//
//   node scripts/bench-locate.mjs [--lines 1000] [--runs 15] [--json]
//
// For each framework, a generated source file of about --lines lines (typical markup of that framework)
// is transformed by a real Vite dev server (`server.transformRequest`, the module invalidated before every
// run; `server.transformIndexHtml` for the HTML page) twice: with the framework's own plugin only (the
// baseline) and with `spotpatchLocate()` listed first. Runs alternate between the two servers; the
// median of --runs is reported, and the overhead scaled to 1,000 lines. Vue and Svelte rows are printed as
// "n/a" until their locators land (their slots are in FRAMEWORKS below).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { createServer } from "vite";

import { spotpatchLocate } from "../dist/locate/locate.js";

const { values: args } = parseArgs({
  options: { lines: { type: "string", default: "1000" }, runs: { type: "string", default: "15" }, json: { type: "boolean", default: false } },
});
const LINES = Number(args.lines);
const RUNS = Number(args.runs);

/** One JSX component of 12 lines: elements, attributes, a map, a component usage. */
const jsxBlock = (i, cls) => `export function Section${i}({ items }: { items: string[] }) {
  return (
    <section ${cls}="card" data-i="${i}">
      <h2 title="t${i}">Title {${i}}</h2>
      <ul>
        {items.map((it) => (
          <li key={it}><Item label={it} /><span>{it}</span></li>
        ))}
      </ul>
    </section>
  );
}
`;
const jsxFile = (cls) => {
  let out = `const Item = (p: { label: string }) => <b>{p.label}</b>;\n`;
  for (let i = 0; out.split("\n").length < LINES; i++) out += jsxBlock(i, cls);
  return out;
};
const vanillaFile = () => {
  let out = `const el = document.createElement("div");\nconst n = 1;\n`;
  for (let i = 0; out.split("\n").length < LINES; i++) {
    out += `el.innerHTML = \`\n<section id="s${i}" class="card">\n  <h2>Title \${n}</h2>\n  <ul>\n    <li><a href="#a${i}">one</a></li>\n    <li><img src="/x.png" alt=""></li>\n  </ul>\n</section>\`\n`;
  }
  return out;
};
const htmlFile = () => {
  let body = "";
  for (let i = 0; body.split("\n").length < LINES - 10; i++) {
    body += `    <section id="s${i}" class="card">\n      <h2>Title ${i}</h2>\n      <p>Some <b>text</b> and <a href="#x">a link</a>.</p>\n    </section>\n`;
  }
  return `<!doctype html>\n<html lang="en">\n  <head>\n    <meta charset="UTF-8" />\n    <title>Bench</title>\n  </head>\n  <body>\n${body}  </body>\n</html>\n`;
};

const FRAMEWORKS = [
  { name: "react (.tsx)", file: "src/Bench.tsx", source: () => jsxFile("className"), plugins: async () => [(await import("@vitejs/plugin-react")).default()] },
  { name: "preact (.tsx)", file: "src/Bench.tsx", source: () => jsxFile("class"), plugins: async () => (await import("@preact/preset-vite")).default() },
  { name: "solid (.tsx)", file: "src/Bench.tsx", source: () => jsxFile("class"), plugins: async () => [(await import("vite-plugin-solid")).default()] },
  { name: "vanilla (.ts innerHTML)", file: "src/bench.ts", source: vanillaFile, plugins: async () => [] },
  { name: "HTML page (index.html)", file: "index.html", source: htmlFile, plugins: async () => [], html: true },
  { name: "vue (.vue)", pending: "the vue helper's locator" },
  { name: "svelte (.svelte)", pending: "the svelte helper's locator" },
];

async function serverFor(root, plugins) {
  const server = await createServer({
    configFile: false,
    root,
    cacheDir: path.join(root, ".vite-cache"),
    logLevel: "silent",
    clearScreen: false,
    optimizeDeps: { noDiscovery: true, include: [] },
    server: { middlewareMode: true, hmr: false, ws: false },
    plugins,
  });
  return server;
}

async function timeOnce(server, fw, code) {
  const url = `/${fw.file}`;
  const start = process.hrtime.bigint();
  if (fw.html) {
    await server.transformIndexHtml(url, code);
  } else {
    server.moduleGraph.invalidateAll();
    const result = await server.transformRequest(url);
    if (!result) throw new Error(`no result for ${url}`);
  }
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rows = [];
for (const fw of FRAMEWORKS) {
  if (fw.pending) {
    rows.push({ framework: fw.name, lines: null, baselineMs: null, withLocateMs: null, overheadMsPer1000: null, note: `n/a (${fw.pending})` });
    continue;
  }
  const root = mkdtempSync(path.join(tmpdir(), "spotpatch-bench-locate-"));
  try {
    const code = fw.source();
    const full = path.join(root, fw.file);
    mkdirSync(path.dirname(full), { recursive: true });
    symlinkSync(path.resolve("node_modules"), path.join(root, "node_modules"), "dir"); // the frameworks' runtimes
    writeFileSync(full, code);
    const lines = code.split("\n").length;
    const base = await serverFor(root, await fw.plugins());
    const withLocate = await serverFor(root, [spotpatchLocate(), ...(await fw.plugins())]);
    try {
      // Warm-up (plugin initialisation, JIT) and a check that the locator did its work.
      for (let i = 0; i < 3; i++) {
        await timeOnce(base, fw, code);
        await timeOnce(withLocate, fw, code);
      }
      const stamped = fw.html
        ? await withLocate.transformIndexHtml(`/${fw.file}`, code)
        : (withLocate.moduleGraph.invalidateAll(), (await withLocate.transformRequest(`/${fw.file}`)).code);
      if (!stamped.includes("data-spotpatch-loc")) throw new Error(`${fw.name}: the locator stamped nothing`);
      const a = [];
      const b = [];
      for (let i = 0; i < RUNS; i++) {
        a.push(await timeOnce(base, fw, code));
        b.push(await timeOnce(withLocate, fw, code));
      }
      const baselineMs = median(a);
      const withLocateMs = median(b);
      rows.push({
        framework: fw.name,
        lines,
        baselineMs,
        withLocateMs,
        overheadMsPer1000: ((withLocateMs - baselineMs) * 1000) / lines,
        note: "",
      });
    } finally {
      await base.close();
      await withLocate.close();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (args.json) {
  console.log(JSON.stringify({ lines: LINES, runs: RUNS, rows }, null, 2));
} else {
  const f = (x) => (x === null ? "n/a" : x.toFixed(1));
  console.log(`spotpatch:locate transform overhead (median of ${RUNS}; ~${LINES}-line file per framework)`);
  console.log("framework                 lines  baseline ms  with locate ms  overhead ms/1000 lines  overhead %");
  for (const r of rows) {
    const pct = r.baselineMs ? `${(((r.withLocateMs - r.baselineMs) / r.baselineMs) * 100).toFixed(0)} %` : "n/a";
    console.log(
      `${r.framework.padEnd(24)} ${String(r.lines ?? "n/a").padStart(6)} ${f(r.baselineMs).padStart(12)} ${f(r.withLocateMs).padStart(15)} ${f(r.overheadMsPer1000).padStart(23)} ${pct.padStart(11)}${r.note ? `  ${r.note}` : ""}`,
    );
  }
}
