/** The screenshot module the plugin serves (src/server/plugin.ts), built from visual/screenshot-lib.ts. */
declare module "virtual:spotpatch/screenshot" {
  export { domToCanvas } from "modern-screenshot";
}
