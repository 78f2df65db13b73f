/** The overlay's screenshot module (dist/overlay-screenshot.js, served as `virtual:spotpatch/screenshot`). */
export { domToCanvas } from "modern-screenshot";
