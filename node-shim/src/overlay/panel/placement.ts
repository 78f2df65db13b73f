/**
 * Where the panel sits (issue 26 "Panel placement"), without markup: docked right, left or bottom, its
 * size, collapsed to a pill, remembered per project in localStorage (`spotpatch:<projectKey>:placement`,
 * the project key is a short hash of the root, never a path); and the pure geometry that moves it away
 * from the picked elements (`avoid`) and makes room on a small viewport (`smallReview`).
 *
 * Two layers: the user's placement (stored; changed only by an explicit choice: the menu, the shortcut,
 * the separator, the pill) and an automatic one for the moment (not stored) that a job's targets or pick
 * mode on a small viewport ask for. An explicit choice clears the automatic one and wins until the
 * situation changes (another job, other targets, pick mode on or off, another viewport size).
 */
import { storageKey } from "../../protocol/overlay.js";

export type Dock = "right" | "left" | "bottom";
export type Corner = "bottom-right" | "bottom-left" | "top-right" | "top-left";
export const DOCKS: readonly Dock[] = ["right", "left", "bottom"];

/** The user's placement. `width` (left/right docks) and `height` (bottom) in CSS px; null: the default. */
export interface Placement {
  dock: Dock;
  width: number | null;
  height: number | null;
  collapsed: boolean;
}

/** The automatic placement of the moment (never stored); `size` narrows the dock's own. */
export interface AutoPlacement {
  dock: Dock;
  size?: number;
  collapsed: boolean;
  corner?: Corner;
}

export interface Box {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

export interface Viewport {
  width: number;
  height: number;
}

/** Gap between the panel and the viewport's edges, and between the panel and what it avoids (px). */
export const MARGIN = 12;
const GAP = 8;
export const MIN_WIDTH = 300;
export const MIN_HEIGHT = 160;
export const DEFAULT_WIDTH = 440;
/** A review with a diff wants room for the code. */
export const WIDE_WIDTH = 720;
/** Below this viewport width the side docks cover the page: pick mode collapses, a review docks at the bottom. */
export const SMALL_WIDTH = 640;
/** The bottom dock's default height and, on a small viewport, its cap: a share of the viewport. */
const BOTTOM_SHARE = 0.4;
/** The pill's box for the geometry (its real size is about this or smaller). */
const PILL = { width: 260, height: 44 };

export const DEFAULT_PLACEMENT: Placement = { dock: "right", width: null, height: null, collapsed: false };

/** The stored placement, or the default for anything missing or malformed. */
export function parsePlacement(text: string | null): Placement {
  let raw: unknown;
  try {
    raw = JSON.parse(text ?? "null");
  } catch {
    raw = null;
  }
  if (!raw || typeof raw !== "object") return { ...DEFAULT_PLACEMENT };
  const r = raw as Record<string, unknown>;
  const size = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.round(v) : null);
  return {
    dock: DOCKS.includes(r.dock as Dock) ? (r.dock as Dock) : "right",
    width: size(r.width),
    height: size(r.height),
    collapsed: r.collapsed === true,
  };
}

export const isSmall = (viewport: Viewport): boolean => viewport.width < SMALL_WIDTH;

/**
 * The largest size a dock may take on this viewport (px): width for left/right, height for bottom. On a small
 * viewport the bottom dock stops at its share, so the page stays pickable; the resize handle's range says the same.
 */
export function maxSize(dock: Dock, viewport: Viewport): number {
  if (dock !== "bottom") return Math.max(MIN_WIDTH, viewport.width - 2 * MARGIN);
  const full = viewport.height - 2 * MARGIN;
  return Math.max(MIN_HEIGHT, isSmall(viewport) ? Math.min(full, Math.round(viewport.height * BOTTOM_SHARE)) : full);
}

export function minSize(dock: Dock, viewport: Viewport): number {
  return Math.min(dock === "bottom" ? MIN_HEIGHT : MIN_WIDTH, maxSize(dock, viewport));
}

export const clampSize = (dock: Dock, size: number, viewport: Viewport): number =>
  Math.round(Math.min(maxSize(dock, viewport), Math.max(minSize(dock, viewport), size)));

/** The dock's size: the user's, else the default (wide for a review with a diff); a small viewport caps the bottom. */
export function dockSize(placement: Placement, dock: Dock, viewport: Viewport, wide: boolean): number {
  if (dock === "bottom") {
    return clampSize(dock, placement.height ?? Math.round(viewport.height * BOTTOM_SHARE), viewport);
  }
  return clampSize(dock, placement.width ?? (wide ? WIDE_WIDTH : DEFAULT_WIDTH), viewport);
}

/** The panel's box docked at `dock` with `size` (viewport coordinates). */
export function panelBox(dock: Dock, size: number, viewport: Viewport): Box {
  if (dock === "bottom")
    return { left: MARGIN, right: viewport.width - MARGIN, top: viewport.height - MARGIN - size, bottom: viewport.height - MARGIN };
  const top = MARGIN;
  const bottom = viewport.height - MARGIN;
  return dock === "right"
    ? { left: viewport.width - MARGIN - size, right: viewport.width - MARGIN, top, bottom }
    : { left: MARGIN, right: MARGIN + size, top, bottom };
}

export function pillBox(corner: Corner, viewport: Viewport): Box {
  const left = corner.endsWith("left") ? MARGIN : viewport.width - MARGIN - PILL.width;
  const top = corner.startsWith("top") ? MARGIN : viewport.height - MARGIN - PILL.height;
  return { left, top, right: left + PILL.width, bottom: top + PILL.height };
}

export const intersects = (a: Box, b: Box): boolean =>
  a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

const visible = (box: Box, viewport: Viewport): boolean =>
  box.right > 0 && box.bottom > 0 && box.left < viewport.width && box.top < viewport.height && box.right > box.left;

/** A picked target's number (as its card and badge show it) and its box in the viewport. */
export interface TargetBox {
  n: number;
  box: Box;
}

/** The result of `avoid`: where to go, which targets the current place covered, how far to scroll. */
export interface Avoidance {
  auto: AutoPlacement;
  covered: number[];
  scrollBy?: number;
}

/**
 * Where the panel goes so that it covers none of `targets` (those in view), or null when where it is
 * covers none. Tried in order: another dock at its size; a side dock narrowed to the room beside the
 * targets (≥ MIN_WIDTH); the bottom dock with the page scrolled so all targets sit above it; the bottom
 * dock lowered to the room under them (≥ MIN_HEIGHT); the pill in a corner that covers none.
 */
export function avoid(
  targets: TargetBox[],
  viewport: Viewport,
  current: Dock,
  sizes: Record<Dock, number>,
  canScroll: boolean,
): Avoidance | null {
  const inView = targets.filter((t) => visible(t.box, viewport));
  const coveredBy = (box: Box) => inView.filter((t) => intersects(t.box, box)).map((t) => t.n);
  const covered = coveredBy(panelBox(current, sizes[current], viewport));
  if (!covered.length) return null;
  const free = (dock: Dock, size: number) => !coveredBy(panelBox(dock, size, viewport)).length;
  for (const dock of DOCKS) if (dock !== current && free(dock, sizes[dock])) return { auto: { dock, collapsed: false }, covered };
  const boxes = inView.map((t) => t.box);
  const room: Record<Dock, number> = {
    right: viewport.width - MARGIN - GAP - Math.max(...boxes.map((b) => b.right)),
    left: Math.min(...boxes.map((b) => b.left)) - MARGIN - GAP,
    bottom: viewport.height - MARGIN - GAP - Math.max(...boxes.map((b) => b.bottom)),
  };
  for (const dock of ["right", "left"] as const)
    if (room[dock] >= MIN_WIDTH && free(dock, Math.floor(room[dock])))
      return { auto: { dock, size: Math.floor(room[dock]), collapsed: false }, covered };
  const all = targets.map((t) => t.box);
  if (canScroll && all.length) {
    const top = Math.min(...all.map((b) => b.top));
    const bottom = Math.max(...all.map((b) => b.bottom));
    if (bottom - top <= viewport.height - 2 * MARGIN - GAP - sizes.bottom)
      return { auto: { dock: "bottom", collapsed: false }, covered, scrollBy: Math.round(top - MARGIN) };
  }
  if (room.bottom >= MIN_HEIGHT) return { auto: { dock: "bottom", size: Math.floor(room.bottom), collapsed: false }, covered };
  return { auto: { dock: current, collapsed: true, corner: pillCorner(inView, viewport) }, covered };
}

/** The first corner whose pill covers none of `targets` (bottom-right when every one does). */
export function pillCorner(targets: TargetBox[], viewport: Viewport): Corner {
  const corners: Corner[] = ["bottom-right", "bottom-left", "top-right", "top-left"];
  return corners.find((c) => !targets.some((t) => intersects(t.box, pillBox(c, viewport)))) ?? "bottom-right";
}

/**
 * A review on a small viewport: the bottom dock (at most BOTTOM_SHARE of the height), the page scrolled
 * so that the targets sit above it when they fit there (else so that the first one does, and the pill when
 * even that one does not fit). `covered`: the targets the panel would cover where it is now.
 */
export function smallReview(
  targets: TargetBox[],
  viewport: Viewport,
  current: Box,
  bottom: number,
): Avoidance {
  const covered = targets.filter((t) => visible(t.box, viewport) && intersects(t.box, current)).map((t) => t.n);
  const room = viewport.height - 2 * MARGIN - GAP - bottom;
  const all = targets.map((t) => t.box);
  const top = Math.min(...all.map((b) => b.top));
  const end = Math.max(...all.map((b) => b.bottom));
  if (end - top <= room) return { auto: { dock: "bottom", collapsed: false }, covered, scrollBy: Math.round(top - MARGIN) };
  return { auto: { dock: "bottom", collapsed: true, corner: "bottom-right" }, covered, scrollBy: Math.round(top - MARGIN) };
}

/**
 * The placement state: the user's (stored) and the automatic one, its subscribers, and the live region's
 * last message. Storage errors (disabled, full) keep the placement for this page only.
 */
export class PlacementStore {
  placement: Placement;
  auto: AutoPlacement | null = null;
  /** The situation in which the user last chose: no automatic move while it lasts. */
  private pinned: string | null = null;
  /** The situation the automatic placement was last worked out for. */
  decidedFor: string | null = null;
  /** The live region's text (polite): why the panel moved by itself. */
  announcement = "";
  /** The pill takes the focus on its next render (a collapse from the keyboard). */
  focusPill = false;
  private listeners = new Set<() => void>();
  private readonly key: string;

  constructor(projectKey: string) {
    this.key = storageKey(projectKey, "placement");
    let text: string | null;
    try {
      text = localStorage.getItem(this.key);
    } catch {
      text = null;
    }
    this.placement = parsePlacement(text);
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  /** Where the panel is now: the automatic placement if any, else the user's. */
  get effective(): { dock: Dock; collapsed: boolean; size?: number; corner?: Corner } {
    return this.auto ?? this.placement;
  }

  /** An explicit choice of the user: stored, the automatic placement dropped, no automatic move in `situation`. */
  choose(patch: Partial<Placement>, situation: string | null): void {
    const base = this.auto ? { ...this.placement, dock: this.auto.dock, collapsed: this.auto.collapsed } : this.placement;
    this.placement = { ...base, ...patch };
    this.auto = null;
    this.pinned = situation;
    this.announcement = "";
    try {
      localStorage.setItem(this.key, JSON.stringify(this.placement));
    } catch {
      /* storage disabled or full: this page only */
    }
    this.notify();
  }

  /** Whether an automatic move may happen in `situation` (the user has not chosen in it). */
  mayMove(situation: string): boolean {
    return this.pinned !== situation;
  }

  setAuto(auto: AutoPlacement | null, announcement: string | null): void {
    this.auto = auto;
    if (announcement !== null) this.announcement = announcement;
    this.notify();
  }
}
