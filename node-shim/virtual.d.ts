// Types of the module the plugin injects into the page. Reference them with
// `/// <reference types="vite-plugin-spotpatch/virtual" />` (or list it in tsconfig "types").
declare module "virtual:spotpatch/client" {
  export * from "vite-plugin-spotpatch/client";
  /** The client of this dev-server start (it carries the session token). */
  export const spotpatch: import("vite-plugin-spotpatch/client").SpotPatchClient;
}
