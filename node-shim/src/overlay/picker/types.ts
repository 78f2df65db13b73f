/** The picker's public types (docs/node-shim.md "Picking"; the contract PANEL codes against). */
import type { AreaInfo, ElementInfo, SourceLocation, UsageSite } from "../../protocol/protocol.generated.js";

export interface PickedTarget {
  /** The live element; null for a region target. */
  element: Element | null;
  /** Document coordinates (CSS px of the top page) of a region target; region targets only. */
  region?: { x: number; y: number; width: number; height: number };
  /** A region target's rectangle (page coordinates), the viewport's size and the located elements overlapping
   * it (≤ 8, largest overlap first): sent as the target's `area` (issue 26). */
  area?: AreaInfo;
  /** The selected text of a text target, ≤ 500 characters. */
  quote?: string;
  /** tagName, selector (@medv/finder), text ≤ 500, allowed attributes, rect (document coordinates). */
  info: ElementInfo;
  /** The nearest `data-spotpatch-loc` (the element's own, else its nearest located ancestor's) + component. */
  source: SourceLocation | null;
  /** Where each enclosing component instance is used, innermost first (≤ 5; picker/chain.ts); absent when none. */
  usageChain?: UsageSite[];
  /** Where `source` came from: the element's own attribute, or the nearest located ancestor's. */
  sourceFrom?: "element" | "ancestor";
  /** What the highlight label and a card show: tag, component name when known, "file:line" when known. */
  label: { tag: string; component?: string; location?: string };
  /** The path (pathname + search) of the same-origin iframe holding the element, if any. */
  frame?: string;
}

export interface PickerOptions {
  /** Element inside the overlay's shadow root for the highlight, label and area rectangle. */
  layer: HTMLElement;
  /** Click: stay=false; Shift+click (or Shift+Enter): stay=true (pick mode goes on). */
  onPick(targets: PickedTarget[], opts: { stay: boolean }): void;
  /** Esc (or stop()). */
  onExit(): void;
  /** PANEL's i18n for the picker's strings (`pick.*` keys of ../i18n.ts); a missing one falls back to the catalog's English. */
  t(key: string, vars?: Record<string, string | number>): string;
}

export interface Picker {
  start(mode?: "element" | "area"): void;
  stop(): void;
  readonly active: boolean;
  /** The target under an Alt+click outside pick mode (the event is swallowed), or null. */
  pickFromEvent(event: MouseEvent): PickedTarget | null;
  destroy(): void;
}

export interface Badges {
  update(list: { n: number; target: PickedTarget }[]): void;
  /** false: hide the badges and drop every listener and observer (the panel closed); true: show them again. */
  setVisible(visible: boolean): void;
  destroy(): void;
}
