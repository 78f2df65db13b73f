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

export class Highlight {
  readonly box: HTMLDivElement;
  readonly label: HTMLDivElement;
  private readonly labelText: HTMLSpanElement;
  readonly hint: HTMLDivElement;
  readonly area: HTMLDivElement;
  private last = "";
  private state = "";
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(layer: HTMLElement) {
    const doc = layer.ownerDocument;
    // Every drawn element is its own compositing layer and a layout boundary (`contain: strict` with an
    // explicit size): moving it is a transform change and a new label text lays out only the label, never
    // the page (measured: without this, a label change re-laid out a 5,000-element page, > 50 ms).
    const fixed =
      "position:fixed;left:0;top:0;pointer-events:none;box-sizing:border-box;z-index:2147483646;will-change:transform,opacity;contain:strict;";
    this.box = div(doc, `${fixed}display:none;border:2px solid ${ACCENT};background:rgba(37,99,235,.12);border-radius:3px;`, "highlight");
    this.label = div(doc, `${fixed}display:none;width:${LABEL_W}px;height:${LABEL_H}px;overflow:hidden;`, "highlight-label");
    this.labelText = doc.createElement("span");
    this.labelText.style.cssText =
      "display:inline-block;box-sizing:border-box;max-width:100%;height:100%;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;" +
      `font:12px/18px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#fff;background:${ACCENT};` +
      "padding:1px 6px;border-radius:3px;";
    this.label.append(this.labelText);
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
    this.area = div(doc, `${fixed}display:none;border:2px dashed ${ACCENT};background:rgba(37,99,235,.10);`, "area");
    this.label.setAttribute("aria-hidden", "true");
    this.box.setAttribute("aria-hidden", "true");
    this.area.setAttribute("aria-hidden", "true");
    layer.append(this.box, this.label, this.area, this.hint);
  }

  /**
   * Draw the box at `r` (top viewport coordinates) with `text` as its label; `frozen` changes the colour.
   * Per frame only transforms and sizes change (compositor work). A new label text is written when the
   * hover rests (LABEL_DELAY ms without another change) or at once with `now` (keyboard moves, freeze):
   * re-laying out text while the mouse sweeps a large page costs a full page paint per frame.
   */
  show(r: Box, text: string, frozen: boolean, now = false): void {
    const color = frozen ? FROZEN : ACCENT;
    const b = this.box.style;
    if (this.state !== `${frozen}`) {
      this.state = `${frozen}`;
      b.borderColor = color;
      b.borderStyle = frozen ? "dashed" : "solid";
      this.labelText.style.background = color;
    }
    b.display = "block";
    b.transform = `translate(${r.x}px, ${r.y}px)`;
    b.width = `${Math.max(r.width, 2)}px`;
    b.height = `${Math.max(r.height, 2)}px`;
    const l = this.label.style;
    l.display = "block";
    // Above the box when there is room, else inside its top edge; kept within the viewport.
    const above = r.y - LABEL_H - 2;
    const y = above >= 0 ? above : Math.min(Math.max(r.y + 2, 0), innerHeight - LABEL_H);
    // Left-aligned on the box; near the right edge, right-aligned on the box's right side instead.
    const right = r.x + LABEL_W > innerWidth;
    const x = right ? Math.max(Math.min(r.x + r.width, innerWidth) - LABEL_W, 0) : Math.max(r.x, 0);
    if (l.textAlign !== (right ? "right" : "left")) l.textAlign = right ? "right" : "left";
    l.transform = `translate(${x}px, ${y}px)`;
    if (text === this.last) return;
    this.last = text;
    clearTimeout(this.timer);
    if (now) this.writeLabel(text);
    else {
      l.opacity = "0";
      this.timer = setTimeout(() => this.writeLabel(text), LABEL_DELAY);
    }
  }

  private writeLabel(text: string): void {
    this.labelText.textContent = text;
    this.label.style.opacity = "1";
  }

  hide(): void {
    clearTimeout(this.timer);
    this.last = "";
    this.box.style.display = "none";
    this.label.style.display = "none";
  }

  setHint(text: string | null): void {
    this.hint.textContent = text ?? "";
    this.hint.style.display = text ? "block" : "none";
  }

  showArea(r: Box | null): void {
    const a = this.area.style;
    if (!r) {
      a.display = "none";
      return;
    }
    a.display = "block";
    a.transform = `translate(${r.x}px, ${r.y}px)`;
    a.width = `${r.width}px`;
    a.height = `${r.height}px`;
  }

  destroy(): void {
    clearTimeout(this.timer);
    this.box.remove();
    this.label.remove();
    this.hint.remove();
    this.area.remove();
  }
}

/** The label text: `tag · Component · file:line` (or "source unknown"). */
export function labelText(label: PickedTarget["label"], unknown: string): string {
  return [label.tag, label.component, label.location ?? unknown].filter(Boolean).join(" · ");
}
