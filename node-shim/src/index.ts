/**
 * vite-plugin-spotpatch: point at elements of your running page and get one reviewable, revertable
 * diff (docs/design.md §1, §15). `spotpatch()` returns two dev-only plugins:
 *
 * - `spotpatch:server` — the engine process, the `/__spotpatch/` endpoints, the injected client and
 *   the page overlay (launcher, picker, panel; `overlay: false` keeps only the client);
 * - `spotpatch:locate` — stamps JSX elements with `data-spotpatch-loc="file:line:col"`;
 * - `spotpatch:locate-vue` — the same for the native elements of `.vue` templates (plus usage sites).
 * - `spotpatch:locate-svelte` (+ `-registry`) — the same for `.svelte` components (src/locate-svelte.ts).
 *
 * A production build (`vite build`) contains none of it.
 */

import type { Plugin } from "vite";

import { spotpatchLocate, type SpotpatchLocateOptions } from "./locate.js";
import { spotpatchLocateVue } from "./locate-vue.js";
import { spotpatchLocateSvelte } from "./locate-svelte.js";
import { resolveOptions, type SpotPatchOptions } from "./options.js";
import { spotpatchServer } from "./plugin.js";

export type { OverlaySettings, SpotPatchOptions } from "./options.js";
export type { OverlayOptions } from "./overlay/types.js";
export type * from "./protocol.generated.js";
export { PROTOCOL_VERSION } from "./protocol.generated.js";
export { spotpatchLocate } from "./locate.js";
export { spotpatchLocateVue } from "./locate-vue.js";
export { VIRTUAL_CLIENT_ID } from "./plugin.js";

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
