// ESLint for node-shim: its TypeScript (the plugin's server side and the page overlay) with type information
// from its tsconfigs, and its test and script modules; `npm run lint` runs it after `tsc --noEmit` on each.
// Lint rules only: no formatting rules, the code's layout is left as written.
import eslint from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["dist/", "node_modules/", "test-artifacts/", "test/apps/", "src/protocol/protocol.generated.ts"] },
  {
    // The tests, their helpers and the scripts (plain ES modules): the recommended rules without types.
    files: ["**/*.mjs"],
    extends: [eslint.configs.recommended],
    rules: {
      // They run in Node and, through page.evaluate, in the browser: an undefined name fails its test anyway.
      "no-undef": "off",
    },
  },
  {
    files: ["src/**/*.ts", "src/**/*.tsx"],
    extends: [eslint.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        project: ["./tsconfig.json", "./tsconfig.overlay.json", "./tsconfig.init.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // The overlay keeps the DOM's own prototype methods and getters (a hostile page may replace them) and
      // calls them with `.call`; the engine guard keeps `res.write`/`end` to restore them: unbound on purpose.
      "@typescript-eslint/unbound-method": "off",
      // Errors are worded at one boundary and never chain the foreign error, whose text may carry paths or
      // keys (docs/security.md): a `cause` would carry it on.
      "preserve-caught-error": "off",
      // `const { element: _element, ...rest } = target` drops a key.
      "@typescript-eslint/no-unused-vars": ["error", { ignoreRestSiblings: true }],
      // A timer declared before the closure that clears it and set later.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  // The rooms of src/ (each one's README.md; the map in src/index.ts): a room imports only what its README
  // allows. The overlay runs in the page and the server in Node: neither imports the other; both share
  // protocol/, the wire contract. src/index.ts, the package's face, may import any room.
  // test/architecture/import-boundaries.test.mjs shows each rule failing on a forbidden import.
  boundary("overlay", ["server", "locate", "init", "protocol/schema"], "the overlay runs in the page: it imports only protocol/ (not its Node-only schema.ts)"),
  boundary("server", ["overlay", "locate", "init"], "the dev-server side imports only protocol/"),
  boundary("locate", ["server", "overlay", "protocol", "init"], "the locators are leaves: they import no other room"),
  boundary("protocol", ["server", "overlay", "locate", "init"], "protocol/ is the leaf both sides share: it imports no other room"),
  boundary("init", ["server", "overlay", "locate", "protocol"], "init/ is bundled on its own: it imports no other room"),
);

/**
 * `no-restricted-imports` for the files of `room` (src/<room>/): a relative import or re-export that climbs out
 * into one of `rooms` (`../server/plugin.js` from src/overlay/, `../../server/x.js` from src/overlay/panel/)
 * is an error. (A dynamic `import()` is not covered; the code has none across rooms.)
 */
function boundary(room, rooms, why) {
  return {
    files: [`src/${room}/**/*.ts`, `src/${room}/**/*.tsx`],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: `^(?:\\.\\./)+(?:${rooms.join("|")})(?:/|\\.js$|$)`, message: `Import boundary: ${why} (src/${room}/README.md).` }] },
      ],
    },
  };
}
