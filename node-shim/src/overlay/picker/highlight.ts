/**
 * The picker's drawing inside the overlay layer: the hover box, its text-only label, the hint bar and
 * the area rectangle. Plain DOM with inline styles (the layer lives in the overlay's shadow root, so
 * page styles never reach it); every page-derived string goes through `textContent`.
 */
import type { Box } from "./dom.js";
import type { PickedTarget } from "./types.js";

const ACCENT = "#2563eb";
const FROZEN = "#b45309";
const LABEL_W = 480;
const LABEL_H = 20;
const LABEL_DELAY = 60;

function div(doc: Document, style: string, part: string): HTMLDivElement {
  const el = doc.createElement("div");
  el.setAttribute("part", part);
  el.setAttribute("data-spotpatch-picker", part);
  el.style.cssText = style;
  return el;
}

/**
 * A rectangle drawn with transforms only: five 1×1 px solid layers (fill and four edges) scaled and
 * translated into place. Moving or resizing it changes nothing but compositor transforms, so the browser
 * neither repaints nor re-layerizes the page under it each frame (a box with a real size and border did:
 * on a 5,000-element page that was most of the hover's cost).
 */
class Rectangle {
  readonly el: HTMLDivElement;
  private readonly parts: HTMLDivElement[];
  private shown = false;
  private color = "";

  constructor(doc: Document, part: string, fill: string) {
    this.el = div(doc, "position:fixed;left:0;top:0;width:0;height:0;pointer-events:none;z-index:2147483646;display:none;", part);
    this.el.setAttribute("aria-hidden", "true");
    this.parts = ["fill", "top", "right", "bottom", "left"].map((name) => {
      const p = doc.createElement("div");
      p.setAttribute("data-part", name);
      p.style.cssText =
        "position:absolute;left:0;top:0;width:1px;height:1px;transform-origin:0 0;will-change:transform;contain:strict;" +
        (name === "fill" ? `background:${fill};` : "");
      this.el.append(p);
      return p;
    });
  }

  show(r: Box, color: string, edge = 2): void {
    if (!this.shown) {
      this.shown = true;
      this.el.style.display = "block";
    }
    if (color !== this.color) {
      this.color = color;
      for (const p of this.parts.slice(1)) p.style.background = color;
    }
    const w = Math.max(r.width, edge);
    const h = Math.max(r.height, edge);
    const [fill, top, right, bottom, left] = this.parts as [HTMLDivElement, HTMLDivElement, HTMLDivElement, HTMLDivElement, HTMLDivElement];
    fill.style.transform = `translate(${r.x}px, ${r.y}px) scale(${w}, ${h})`;
    top.style.transform = `translate(${r.x}px, ${r.y}px) scale(${w}, ${edge})`;
    bottom.style.transform = `translate(${r.x}px, ${r.y + h - edge}px) scale(${w}, ${edge})`;
    left.style.transform = `translate(${r.x}px, ${r.y}px) scale(${edge}, ${h})`;
    right.style.transform = `translate(${r.x + w - edge}px, ${r.y}px) scale(${edge}, ${h})`;
  }

  hide(): void {
    if (!this.shown) return;
    this.shown = false;
    this.el.style.display = "none";
  }
}

export class Highlight {
  private readonly box: Rectangle;
  private readonly areaBox: Rectangle;
  readonly label: HTMLCanvasElement;
  readonly hint: HTMLDivElement;
  private last = "";
  private labelShown = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(layer: HTMLElement) {
    const doc = layer.ownerDocument;
    this.box = new Rectangle(doc, "highlight", "rgba(37,99,235,.12)");
    this.areaBox = new Rectangle(doc, "area", "rgba(37,99,235,.10)");
    // The label is a <canvas> drawn with fillText: text only by construction, its own compositing layer,
    // and a new text changes only its pixels. (A text node re-laid out in the shadow root made Chromium
    // repaint the whole page: 6-16 ms per label on a 5,000-element page, measured with tracing.) The
    // text is also kept in `data-text` (tests, devtools); the panel's cards carry it for assistive
    // technology, so the canvas is aria-hidden.
    this.label = doc.createElement("canvas");
    this.label.setAttribute("part", "highlight-label");
    this.label.setAttribute("data-spotpatch-picker", "highlight-label");
    this.label.setAttribute("aria-hidden", "true");
    this.label.style.cssText =
      "position:fixed;left:0;top:0;pointer-events:none;z-index:2147483646;will-change:transform,opacity;" +
      `display:none;width:${LABEL_W}px;height:${LABEL_H}px;`;
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
    layer.append(this.box.el, this.label, this.areaBox.el, this.hint);
  }

  /**
   * Draw the box at `r` (top viewport coordinates) with `text` as its label; `frozen` changes the colour.
   * Per frame only transforms change (compositor work). A new label text is written when the hover rests
   * (LABEL_DELAY ms without another change) or at once with `now` (keyboard moves, freeze): laying out
   * text while the mouse sweeps a large page costs a page paint per frame.
   */
  show(r: Box, text: string, frozen: boolean, now = false): void {
    const color = frozen ? FROZEN : ACCENT;
    this.box.show(r, color);
    const l = this.label.style;
    if (!this.labelShown) {
      this.labelShown = true;
      l.display = "block";
    }
    // Above the box when there is room, else inside its top edge; kept within the viewport. Left-aligned
    // on the box; near the right edge, right-aligned on the box's right side instead.
    const above = r.y - LABEL_H - 2;
    const y = above >= 0 ? above : Math.min(Math.max(r.y + 2, 0), innerHeight - LABEL_H);
    const right = r.x + LABEL_W > innerWidth;
    const x = right ? Math.max(Math.min(r.x + r.width, innerWidth) - LABEL_W, 0) : Math.max(r.x, 0);
    l.transform = `translate(${x}px, ${y}px)`;
    const key = `${text}\u0000${color}\u0000${right}`;
    if (key === this.last) return;
    this.last = key;
    clearTimeout(this.timer);
    const write = () => {
      drawLabel(this.label, text, color, right);
      l.opacity = "1";
    };
    if (now) write();
    else {
      l.opacity = "0";
      this.timer = setTimeout(write, LABEL_DELAY);
    }
  }

  hide(): void {
    clearTimeout(this.timer);
    this.last = "";
    this.box.hide();
    if (this.labelShown) {
      this.labelShown = false;
      this.label.style.display = "none";
    }
  }

  setHint(text: string | null): void {
    this.hint.textContent = text ?? "";
    this.hint.style.display = text ? "block" : "none";
  }

  showArea(r: Box | null): void {
    if (r) this.areaBox.show(r, ACCENT);
    else this.areaBox.hide();
  }

  destroy(): void {
    clearTimeout(this.timer);
    this.box.el.remove();
    this.label.remove();
    this.hint.remove();
    this.areaBox.el.remove();
  }
}

/** Draw `text` on its coloured pill into the label canvas (device pixels; ellipsis when too long). */
function drawLabel(canvas: HTMLCanvasElement, text: string, color: string, right: boolean): void {
  const dpr = Math.min(Math.max(window.devicePixelRatio || 1, 1), 4);
  if (canvas.width !== LABEL_W * dpr) {
    canvas.width = LABEL_W * dpr;
    canvas.height = LABEL_H * dpr;
  }
  canvas.setAttribute("data-text", text);
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, LABEL_W, LABEL_H);
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
  const x = right ? LABEL_W - w : 0;
  ctx.fillStyle = color;
  ctx.beginPath();
  if (typeof ctx.roundRect === "function") ctx.roundRect(x, 0, w, LABEL_H, 3);
  else ctx.rect(x, 0, w, LABEL_H);
  ctx.fill();
  ctx.fillStyle = "#fff";
  ctx.textBaseline = "middle";
  ctx.fillText(shown, x + pad, LABEL_H / 2 + 0.5);
}

/** The label text: `tag · Component · file:line` (or "source unknown"). */
export function labelText(label: PickedTarget["label"], unknown: string): string {
  return [label.tag, label.component, label.location ?? unknown].filter(Boolean).join(" · ");
}
