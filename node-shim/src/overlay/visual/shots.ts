/**
 * Pictures of picked elements, taken inside the page (issue 26 "Visual evidence"): modern-screenshot
 * clones the element with its computed styles into an SVG `foreignObject` and draws it on a canvas — no
 * browser extension, no request leaves the page. Then the picture for a vision model (WebP where the
 * browser encodes it, else PNG; at most MAX_IMAGE_BYTES) and the pixel difference of two pictures.
 *
 * modern-screenshot (MIT, no dependencies, maintained: 4.7.0 of April 2026) rather than html-to-image (last
 * release February 2025). It adds about 12 KB gzip, so it is its own module (`virtual:spotpatch/screenshot`,
 * dist/overlay-screenshot.js), imported on the first picture: the overlay's first open stays within its
 * 80 KB budget (tests/bench/README.md "Overlay").
 */

import { HOST_TAG } from "../picker/dom.js";

/** The engine's bounds (spotpatch_agent/protocol/annotation.py): decoded bytes per target and per job. */
export const MAX_IMAGE_BYTES = 256 * 1024;
export const MAX_JOB_IMAGE_BYTES = 512 * 1024;
/** Longest side of a picture, in canvas pixels: a thumbnail and a model's view need no more. */
const MAX_SIDE = 640;
/** Elements inside a picked element beyond which no picture is taken (a whole page section). */
const MAX_NODES = 1500;
/** A channel difference up to this is anti-aliasing noise, not a change. */
const NOISE = 24;
/** Opacity of the magenta over a changed pixel. */
const TINT = 0.6;

export interface Shot {
  /** The picture itself (kept for the pixel difference). */
  canvas: HTMLCanvasElement;
  /** A data URL to show it. */
  url: string;
  /** Canvas pixels per CSS pixel: the after picture is taken at the same scale as the before one. */
  scale: number;
  /** What a vision model may receive (absent when even the smallest encoding is over MAX_IMAGE_BYTES). */
  image: { mediaType: "image/png" | "image/webp"; data: string; bytes: number } | null;
}

export interface PixelDiff {
  url: string;
  /** Share of changed pixels, 0..100. */
  percent: number;
  changed: number;
}

/** The first non-transparent background colour from `el` up (the page's colour behind the element). */
function backdrop(el: Element): string {
  for (let cur: Element | null = el; cur; cur = cur.parentElement) {
    const color = getComputedStyle(cur).backgroundColor;
    if (color && color !== "transparent" && !/rgba\(.*,\s*0\)$/.test(color)) return color;
  }
  return "#ffffff";
}

/**
 * The element's picture at `scale` (default: fit MAX_SIDE, at most 1), or null: no size, more than
 * MAX_NODES elements inside (cloning each one's computed style would stall a big page), or it failed.
 */
export async function capture(el: Element, scale?: number): Promise<Shot | null> {
  try {
    const rect = el.getBoundingClientRect();
    if (!(rect.width >= 1 && rect.height >= 1) || el.getElementsByTagName("*").length > MAX_NODES) return null;
    const s = scale ?? Math.min(1, MAX_SIDE / Math.max(rect.width, rect.height));
    const { domToCanvas } = await import("virtual:spotpatch/screenshot");
    const canvas = await domToCanvas(el, {
      scale: s,
      backgroundColor: backdrop(el),
      timeout: 5000,
      filter: (node) => !(node instanceof Element && node.localName === HOST_TAG),
    });
    return { canvas, url: canvas.toDataURL("image/png"), scale: s, image: encode(canvas) };
  } catch {
    return null; // a picture is evidence, never a reason to fail picking (a hostile page's DOM included)
  }
}

/** WebP (or PNG where the browser cannot encode WebP) under MAX_IMAGE_BYTES, halving the size at most 4 times. */
function encode(canvas: HTMLCanvasElement): Shot["image"] {
  let source = canvas;
  for (let i = 0; i < 5; i += 1) {
    const url = source.toDataURL("image/webp", 0.85);
    const mediaType = url.startsWith("data:image/webp;") ? "image/webp" : "image/png";
    const data = url.slice(url.indexOf(",") + 1);
    const bytes = Math.floor((data.length * 3) / 4) - (data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0);
    if (bytes <= MAX_IMAGE_BYTES) return { mediaType, data, bytes };
    const half = document.createElement("canvas");
    half.width = Math.max(1, Math.floor(source.width / 2));
    half.height = Math.max(1, Math.floor(source.height / 2));
    half.getContext("2d")?.drawImage(source, 0, 0, half.width, half.height);
    source = half;
  }
  return null;
}

/** Both pictures on one white canvas of the larger size each way (the element may have grown). */
function pixelsOf(shot: Shot, width: number, height: number): Uint8ClampedArray {
  const c = document.createElement("canvas");
  c.width = width;
  c.height = height;
  const g = c.getContext("2d", { willReadFrequently: true })!;
  g.fillStyle = "#fff";
  g.fillRect(0, 0, width, height);
  g.drawImage(shot.canvas, 0, 0);
  return g.getImageData(0, 0, width, height).data;
}

/**
 * The pixel difference of `before` and `after`: the after picture faded, every changed pixel tinted
 * magenta (#e6007a at TINT over the after pixel), and the share of changed pixels (a channel differing by more than NOISE).
 */
export function pixelDiff(before: Shot, after: Shot): PixelDiff {
  const width = Math.max(before.canvas.width, after.canvas.width);
  const height = Math.max(before.canvas.height, after.canvas.height);
  const a = pixelsOf(before, width, height);
  const b = pixelsOf(after, width, height);
  const out = document.createElement("canvas");
  out.width = width;
  out.height = height;
  const g = out.getContext("2d")!;
  const image = g.createImageData(width, height);
  const d = image.data;
  let changed = 0;
  for (let i = 0; i < d.length; i += 4) {
    const delta = Math.max(
      Math.abs(a[i]! - b[i]!),
      Math.abs(a[i + 1]! - b[i + 1]!),
      Math.abs(a[i + 2]! - b[i + 2]!),
      Math.abs(a[i + 3]! - b[i + 3]!),
    );
    if (delta > NOISE) {
      // Changed: magenta over the after picture (its shapes still show through).
      changed += 1;
      d[i] = 230 * TINT + b[i]! * (1 - TINT);
      d[i + 1] = b[i + 1]! * (1 - TINT);
      d[i + 2] = 122 * TINT + b[i + 2]! * (1 - TINT);
    } else {
      // Unchanged: the after picture, faded to a light grey so the tint stands out.
      const grey = (b[i]! * 0.3 + b[i + 1]! * 0.59 + b[i + 2]! * 0.11) * 0.35 + 255 * 0.65;
      d[i] = d[i + 1] = d[i + 2] = grey;
    }
    d[i + 3] = 255;
  }
  g.putImageData(image, 0, 0);
  const total = width * height;
  return { url: out.toDataURL("image/png"), percent: total ? (changed / total) * 100 : 0, changed };
}
