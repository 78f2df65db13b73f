// Bundles the vite.config editor of `spotpatch-agent init` (src/init/config-edit.ts, contract in
// src/init/config-edit.ts's header) into ONE self-contained ES module for Node 20, with Vite's own build
// (as scripts/build-overlay.mjs does for the overlay): an SSR build with every dependency bundled in
// (magicast, @babel/parser, magic-string), so the file runs from any folder with no node_modules.
//
//   node scripts/build-config-edit.mjs --out <file.mjs>
//
// Checks before it writes: the bundle is one chunk whose only imports are `node:*` builtins, and it
// answers a sample config from an empty folder. Prints the written file's name and size.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { build } from "vite";

const root = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({ options: { out: { type: "string" } } });
if (!values.out) {
  console.error("usage: node scripts/build-config-edit.mjs --out <file.mjs>");
  process.exit(2);
}
const out = path.resolve(values.out);

const result = await build({
  root,
  configFile: false,
  logLevel: "warn",
  publicDir: false,
  ssr: { noExternal: true, target: "node" },
  build: {
    ssr: "src/init/config-edit.ts",
    write: false,
    minify: true,
    sourcemap: false,
    target: "node20",
    copyPublicDir: false,
    rollupOptions: { output: { format: "es", codeSplitting: false } },
  },
});

const outputs = (Array.isArray(result) ? result : [result]).flatMap((entry) => entry.output);
const chunks = outputs.filter((item) => item.type === "chunk");
if (chunks.length !== 1 || outputs.length !== 1) {
  throw new Error(`expected one chunk, got ${outputs.map((item) => item.fileName).join(", ")}`);
}
const [chunk] = chunks;
const foreign = [...chunk.imports, ...chunk.dynamicImports].filter((id) => !id.startsWith("node:"));
if (foreign.length > 0) throw new Error(`the bundle imports more than node builtins: ${foreign.join(", ")}`);
// A `require` left for a bundled CommonJS module would need node_modules at run time.
const required = [...chunk.code.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((match) => match[1]).filter((id) => !id.startsWith("node:"));
if (required.length > 0) throw new Error(`the bundle requires more than node builtins: ${required.join(", ")}`);

// Smoke run from an empty folder: the file must work with nothing next to it.
const scratch = mkdtempSync(path.join(tmpdir(), "spotpatch-config-edit-"));
try {
  const bundle = path.join(scratch, "config-edit.mjs");
  writeFileSync(bundle, chunk.code);
  writeFileSync(path.join(scratch, "package.json"), '{"type": "module"}\n');
  writeFileSync(path.join(scratch, "vite.config.ts"), "import { defineConfig } from 'vite'\n\nexport default defineConfig({})\n");
  const answer = JSON.parse(execFileSync(process.execPath, [bundle, path.join(scratch, "vite.config.ts")], { cwd: scratch, encoding: "utf8" }));
  if (answer.status !== "edit" || !answer.code.includes("plugins: [spotpatch()]")) {
    throw new Error(`the bundle's smoke run answered ${JSON.stringify(answer)}`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, chunk.code);
console.log(`${path.basename(out)} ${(Buffer.byteLength(chunk.code) / 1024).toFixed(1)} KB`);
