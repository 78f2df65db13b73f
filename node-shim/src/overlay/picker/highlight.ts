/**
 * The picker's drawing inside the overlay layer: the hover box, its text-only label, the hint bar and
 * the area rectangle. Plain DOM with inline styles (the layer lives in the overlay's shadow root, so
 * page styles never reach it); every page-derived string goes through `textContent`.
 */
import type { Box } from "./dom.js";
import type { PickedTarget } from "./types.js";

const ACCENT = "#2563eb";
const FROZEN = "#d97706";

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
  readonly hint: HTMLDivElement;
  readonly area: HTMLDivElement;
  private last = "";

  constructor(private readonly layer: HTMLElement) {
    const doc = layer.ownerDocument;
    const fixed = "position:fixed;left:0;top:0;pointer-events:none;box-sizing:border-box;z-index:2147483646;";
    this.box = div(doc, `${fixed}display:none;border:2px solid ${ACCENT};background:rgba(37,99,235,.12);border-radius:3px;`, "highlight");
    this.label = div(
      doc,
      `${fixed}display:none;max-width:min(480px,90vw);overflow:hidden;white-space:nowrap;text-overflow:ellipsis;` +
        `font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#fff;background:${ACCENT};` +
        "padding:2px 6px;border-radius:3px;box-shadow:0 1px 3px rgba(0,0,0,.3);",
      "highlight-label",
    );
    this.hint = div(
      doc,
      `${fixed}display:none;left:50%;top:8px;transform:translateX(-50%);max-width:90vw;` +
        "font:13px/1.4 system-ui,sans-serif;color:#fff;background:rgba(17,24,39,.92);padding:6px 12px;border-radius:6px;" +
        "box-shadow:0 2px 8px rgba(0,0,0,.3);",
      "picker-hint",
    );
    this.hint.setAttribute("role", "status");
    this.hint.setAttribute("aria-live", "polite");
    this.area = div(doc, `${fixed}display:none;border:2px dashed ${ACCENT};background:rgba(37,99,235,.10);`, "area");
    this.label.setAttribute("aria-hidden", "true");
    this.box.setAttribute("aria-hidden", "true");
    this.area.setAttribute("aria-hidden", "true");
    layer.append(this.box, this.label, this.area, this.hint);
  }

  /** Draw the box at `r` (top viewport coordinates) with `text` as its label; `frozen` changes the colour. */
  show(r: Box, text: string, frozen: boolean): void {
    const color = frozen ? FROZEN : ACCENT;
    const b = this.box.style;
    b.display = "block";
    b.borderColor = color;
    b.borderStyle = frozen ? "dashed" : "solid";
    b.transform = `translate(${r.x}px, ${r.y}px)`;
    b.width = `${Math.max(r.width, 2)}px`;
    b.height = `${Math.max(r.height, 2)}px`;
    if (text !== this.last) {
      this.label.textContent = text;
      this.last = text;
    }
    const l = this.label.style;
    l.display = "block";
    l.background = color;
    // Above the box when there is room, else inside its top edge; kept within the viewport.
    const above = r.y - 22;
    const y = above >= 0 ? above : Math.min(Math.max(r.y + 2, 0), innerHeight - 22);
    const x = Math.min(Math.max(r.x, 0), Math.max(innerWidth - 200, 0));
    l.transform = `translate(${x}px, ${y}px)`;
  }

  hide(): void {
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
