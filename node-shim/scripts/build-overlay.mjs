// Bundles the browser overlay with Vite's own library build (no extra bundler):
//   src/overlay/loader.ts  -> dist/overlay-loader.js  (injected at page load: launcher + shortcut only)
//   src/overlay/index.tsx  -> dist/overlay.js         (loaded on first open: picker, panel, diff view)
//   src/overlay/visual/screenshot-lib.ts -> dist/overlay-screenshot.js (modern-screenshot, loaded on the
//                                           overlay's first picture: it stays out of the 80 KB first open)
// Both are single self-contained ES modules (Preact, diff2html and @medv/finder are bundled in), served
// by the plugin as virtual modules (see src/server/plugin.ts). Run by `npm run build` after tsc.
import { fileURLToPath } from "node:url";

import { build } from "vite";

const root = fileURLToPath(new URL("..", import.meta.url));

for (const [entry, fileName] of [
  ["src/overlay/loader.ts", "overlay-loader"],
  ["src/overlay/index.tsx", "overlay"],
  ["src/overlay/visual/screenshot-lib.ts", "overlay-screenshot"],
]) {
  await build({
    root,
    configFile: false,
    logLevel: "warn",
    publicDir: false,
    oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
    build: {
      outDir: "dist",
      emptyOutDir: false,
      minify: true,
      sourcemap: false,
      target: "es2022",
      lib: { entry, formats: ["es"], fileName: () => `${fileName}.js` },
      // The overlay imports the screenshot module by its virtual id (served by the plugin), never inlines it.
      rollupOptions: { external: ["virtual:spotpatch/screenshot"] },
    },
  });
}
