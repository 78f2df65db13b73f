/**
 * The picker's drawing inside the overlay layer: the hover box, its label and the area rectangle on one
 * viewport canvas, and the hint bar. The layer lives in the overlay's shadow root, so page styles never
 * reach it; page-derived strings are drawn with fillText or set with `textContent`, never parsed.
 */
import type { Box } from "./dom.js";
import type { PickedTarget } from "./types.js";

const ACCENT = "#2563eb";
const FROZEN = "#b45309";
const LABEL_W = 480;
const LABEL_H = 20;

function div(doc: Document, style: string, part: string): HTMLDivElement {
  const el = doc.createElement("div");
  el.setAttribute("part", part);
  el.setAttribute("data-spotpatch-picker", part);
  el.style.cssText = style;
  return el;
}

/**
 * Everything that moves with the pointer (hover box, label, area rectangle) is drawn into ONE canvas the
 * size of the viewport that never moves: a frame changes its pixels only, so Chromium neither repaints
 * nor re-layerizes the page. Measured on 2,500 clipped cells: DOM boxes moved by transforms cost 5-9 ms of
 * `Layerize` per move, a text node 6-16 ms of `Paint` per label; the canvas costs < 0.5 ms. The label is
 * drawn with fillText (text only by construction); `data-label` / `data-box` on the canvas say what is
 * drawn (tests, devtools). The panel's cards carry the text for assistive technology (aria-hidden here).
 */
export class Highlight {
  readonly canvas: HTMLCanvasElement;
  readonly hint: HTMLDivElement;
  private box: { r: Box; text: string; color: string } | null = null;
  private area: Box | null = null;
  private shown = false;
  private size = "";
  /** What the last frame drew (box, label, area): the next frame clears only these, not the viewport
   * (a full clearRect rasterized 4 MB per move on a software canvas: measured, Commit 0.84 -> 0.68 ms). */
  private dirty: Box[] = [];

  constructor(layer: HTMLElement) {
    const doc = layer.ownerDocument;
    this.canvas = doc.createElement("canvas");
    this.canvas.setAttribute("part", "highlight");
    this.canvas.setAttribute("data-spotpatch-picker", "highlight");
    this.canvas.setAttribute("aria-hidden", "true");
    this.canvas.style.cssText = "position:fixed;left:0;top:0;pointer-events:none;z-index:2147483646;display:none;";
    // A compact reminder of the keys at the bottom left, clear of the panel's column on the right (the
    // panel holds the accessible hint text, so this one is hidden from assistive technology).
    this.hint = div(
      doc,
      "position:fixed;pointer-events:none;box-sizing:border-box;z-index:2147483646;display:none;left:12px;bottom:12px;" +
        "max-width:min(560px,45vw);font:12px/1.4 system-ui,sans-serif;color:#fff;" +
        "background:rgba(17,24,39,.88);padding:4px 10px;border-radius:6px;box-shadow:0 2px 8px rgba(0,0,0,.3);",
      "picker-hint",
    );
    this.hint.setAttribute("aria-hidden", "true");
    layer.append(this.canvas, this.hint);
  }

  /** Draw the box at `r` (top viewport coordinates) with `text` as its label; `frozen` changes the colour. */
  show(r: Box, text: string, frozen: boolean): void {
    this.box = { r, text, color: frozen ? FROZEN : ACCENT };
    if (this.canvas.getAttribute("data-label") !== text) this.canvas.setAttribute("data-label", text);
    this.canvas.setAttribute("data-box", `${r.x},${r.y},${r.width},${r.height}`);
    this.draw();
  }

  hide(): void {
    if (!this.box) return;
    this.box = null;
    this.canvas.setAttribute("data-label", "");
    this.draw();
  }

  setHint(text: string | null): void {
    this.hint.textContent = text ?? "";
    this.hint.style.display = text ? "block" : "none";
  }

  showArea(r: Box | null): void {
    if (!r && !this.area) return;
    this.area = r;
    this.draw();
  }

  destroy(): void {
    this.canvas.remove();
    this.hint.remove();
  }

  private draw(): void {
    const c = this.canvas;
    if (!this.box && !this.area) {
      if (this.shown) {
        this.shown = false;
        c.style.display = "none";
        c.width = 0; // no viewport-sized bitmap kept while nothing is drawn
        c.height = 0;
        this.size = "";
        this.dirty = [];
      }
      return;
    }
    const dpr = Math.min(Math.max(window.devicePixelRatio || 1, 1), 3);
    const w = innerWidth;
    const h = innerHeight;
    const size = `${w}x${h}@${dpr}`;
    if (size !== this.size) {
      this.size = size;
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
      c.style.width = `${w}px`;
      c.style.height = `${h}px`;
      this.dirty = [];
    }
    if (!this.shown) {
      this.shown = true;
      c.style.display = "block";
    }
    const ctx = c.getContext("2d");
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    for (const d of this.dirty) ctx.clearRect(d.x - 2, d.y - 2, d.width + 4, d.height + 4);
    this.dirty = [];
    if (this.area) {
      const a = this.area;
      ctx.fillStyle = "rgba(37,99,235,.10)";
      ctx.fillRect(a.x, a.y, a.width, a.height);
      this.dirty.push(a);
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 2;
      ctx.strokeStyle = ACCENT;
      ctx.strokeRect(a.x + 1, a.y + 1, Math.max(a.width - 2, 0), Math.max(a.height - 2, 0));
      ctx.setLineDash([]);
    }
    if (this.box) {
      const { r, text, color } = this.box;
      const bw = Math.max(r.width, 2);
      const bh = Math.max(r.height, 2);
      ctx.fillStyle = "rgba(37,99,235,.12)";
      ctx.fillRect(r.x, r.y, bw, bh);
      this.dirty.push({ x: r.x, y: r.y, width: bw, height: bh });
      ctx.lineWidth = 2;
      ctx.strokeStyle = color;
      if (color === FROZEN) ctx.setLineDash([5, 3]);
      ctx.strokeRect(r.x + 1, r.y + 1, bw - 2, bh - 2);
      ctx.setLineDash([]);
      this.dirty.push(drawLabel(ctx, r, text, color, w, h));
    }
  }
}

/** The label: `text` on a pill above the box (inside its top edge when there is no room), kept in the
 * viewport; cut with an ellipsis at LABEL_W. */
function drawLabel(ctx: CanvasRenderingContext2D, r: Box, text: string, color: string, vw: number, vh: number): Box {
  ctx.font = "12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
  const pad = 6;
  let shown = text;
  if (ctx.measureText(shown).width > LABEL_W - 2 * pad) {
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(`${text.slice(0, mid)}…`).width <= LABEL_W - 2 * pad) lo = mid;
      else hi = mid - 1;
    }
    shown = `${text.slice(0, lo)}…`;
  }
  const w = Math.ceil(ctx.measureText(shown).width) + 2 * pad;
  const above = r.y - LABEL_H - 2;
  const y = above >= 0 ? above : Math.min(Math.max(r.y + 2, 0), vh - LABEL_H);
  // Left-aligned on the box; near the right edge, right-aligned on the box's right side instead.
  const x = r.x + w > vw ? Math.max(Math.min(r.x + r.width, vw) - w, 0) : Math.max(r.x, 0);
  ctx.fillStyle = color;
  ctx.beginPath();
  if (typeof ctx.roundRect === "function") ctx.roundRect(x, y, w, LABEL_H, 3);
  else ctx.rect(x, y, w, LABEL_H);
  ctx.fill();
  ctx.fillStyle = "#fff";
  ctx.textBaseline = "middle";
  ctx.fillText(shown, x + pad, y + LABEL_H / 2 + 0.5);
  return { x, y, width: w, height: LABEL_H };
}

/** The label text: `tag · Component · file:line` (or "source unknown"). */
export function labelText(label: PickedTarget["label"], unknown: string): string {
  return [label.tag, label.component, label.location ?? unknown].filter(Boolean).join(" · ");
}
