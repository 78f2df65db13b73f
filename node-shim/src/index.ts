/**
 * vite-plugin-spotpatch: point at elements of your running page and get one reviewable, revertable
 * diff (docs/design.md §1, §15). `spotpatch()` returns two dev-only plugins:
 *
 * - `spotpatch:server` — the engine process, the `/__spotpatch/` endpoints, the injected client and
 *   the page overlay (launcher, picker, panel; `overlay: false` keeps only the client);
 * - `spotpatch:locate` — stamps JSX elements with `data-spotpatch-loc="file:line:col"`;
 * - `spotpatch:locate-vue` — the same for the native elements of `.vue` templates (plus usage sites).
 * - `spotpatch:locate-svelte` (+ `-registry`) — the same for `.svelte` components (src/locate/locate-svelte.ts).
 *
 * A production build (`vite build`) contains none of it.
 *
 * This file is the package's face (with `protocol/client.ts`, the `./client` export) and the one module that
 * puts the rooms of src/ together. Each room has a README.md saying what it owns and what it may import
 * (eslint.config.mjs enforces it):
 *
 * - `server/` — the dev-server side in Node: the plugin, endpoints and guards, the engine's supervisor and client,
 *   options and config file;
 * - `locate/` — the source locators (JSX, Vue, Svelte, HTML and scripts);
 * - `overlay/` — the page overlay (loader, panel, picker), bundled for the browser;
 * - `protocol/` — the contract both sides share: schema, generated types, the page client, the overlay interface;
 * - `init/` — the vite.config editor of `spotpatch-agent init`, bundled on its own.
 */

import type { Plugin } from "vite";

import { spotpatchLocate, type SpotpatchLocateOptions } from "./locate/locate.js";
import { spotpatchLocateVue } from "./locate/locate-vue.js";
import { spotpatchLocateSvelte } from "./locate/locate-svelte.js";
import { resolveOptions, type SpotPatchOptions } from "./server/options.js";
import { spotpatchServer } from "./server/plugin.js";

export type { OverlaySettings, SpotPatchOptions } from "./server/options.js";
export type { OverlayOptions } from "./protocol/overlay.js";
export type * from "./protocol/protocol.generated.js";
export { PROTOCOL_VERSION } from "./protocol/protocol.generated.js";
export { spotpatchLocate } from "./locate/locate.js";
export { spotpatchLocateVue } from "./locate/locate-vue.js";
export { VIRTUAL_CLIENT_ID } from "./server/plugin.js";

/** The SpotPatch plugins (`[spotpatch:server, spotpatch:locate, spotpatch:locate-vue, spotpatch:locate-svelte, …-registry]`). Throws on invalid options. */
export function spotpatch(options: SpotPatchOptions = {}): Plugin[] {
  const resolved = resolveOptions(options);
  const locateOptions: SpotpatchLocateOptions = {};
  return [
    spotpatchServer(resolved, locateOptions),
    spotpatchLocate(locateOptions),
    spotpatchLocateVue(locateOptions),
    ...spotpatchLocateSvelte(locateOptions),
  ];
}

export default spotpatch;
