/**
 * The picker: pick mode over the user's page (hover highlight + label, click / Shift+click, keyboard
 * walk, freeze, area drag), Alt+click picks, text-selection targets, pausing animations, and the
 * numbered badges pinned to picked elements. Plain DOM, no framework; everything it draws lives in the
 * `layer` PANEL gives it inside the overlay's shadow root.
 *
 * Pick mode (start() … Esc / stop() / a pick without Shift):
 * - Hover: one `elementFromPoint` (descending into open shadow roots and same-origin iframes) and one
 *   rect read per animation frame, whatever the number of mouse events; the label (tag · component ·
 *   file:line, or "source unknown") is drawn with fillText on the picker's canvas: text only, never parsed.
 * - Every pointer, mouse, touch and click event is swallowed in the capture phase on `window` (and on
 *   each same-origin iframe's window), so the page's handlers never see them; events aimed at the
 *   overlay itself (its host element) pass. Wheel events pass, so the page still scrolls.
 * - Keys (also with the focus on an overlay button; never while typing in an overlay text box): Esc leaves; ArrowUp parent, ArrowDown first child,
 *   ArrowLeft / ArrowRight previous / next sibling; Enter picks (Shift+Enter picks and stays); F freezes
 *   the hover (the highlight stays on the element while the mouse goes elsewhere; arrows still walk) and
 *   F again unfreezes. Starting pick mode highlights `document.activeElement` (through open shadow roots)
 *   or, when nothing is focused, the element at the viewport centre: picking needs no mouse. Never
 *   `<html>`/`<body>`/`<head>`: when the centre is empty page, the first visible element with a source
 *   location, else the first visible focusable element, and the hint says so.
 * - Area mode (`start("area")`): drag a rectangle; the located elements (`data-spotpatch-loc`) whose box
 *   lies inside it become targets (outermost only, document order, ≤ 50), or one region target when none
 *   is located; a click without a drag picks the element under it.
 * - A pick without Shift ends pick mode silently (onPick's `stay: false` says so); Esc and stop() end it
 *   and call onExit.
 *
 * Limits (what the picker cannot do, by the browser's rules):
 * - Same-origin iframes (their document readable from the page, e.g. served by the same dev server):
 *   their elements are hovered and picked like the page's own, with rects offset by the iframe's position
 *   (nesting ≤ 3 levels); listeners are attached to their windows only while picking, also to frames that
 *   load later (on the first hover into them). Source locations there come from their own
 *   `data-spotpatch-loc`, so only when that document is served by the same dev server with the plugin.
 * - Cross-origin (and sandboxed without allow-same-origin) iframes are opaque: they are picked as the
 *   `<iframe>` element itself, never their content. The browser sends mouse events over such a frame to
 *   the frame, so while picking each one (in the top document, ≤ 32) is covered by a transparent shield in
 *   the overlay layer that takes those events instead (from the next frame drawn on: with site isolation
 *   the browser routes input by what was last drawn). Outside pick mode, Alt+click over one reaches the
 *   frame, not SpotPatch.
 * - Closed shadow roots are opaque (their host is picked); open ones are entered. A selector inside a
 *   shadow root is written `host-selector >>> inner-selector`.
 * - `pointer-events: none` elements are skipped by hit testing: reach them with the arrow keys from their
 *   parent or a sibling.
 * - Area mode collects located elements of the top document only (not inside shadow roots or iframes;
 *   drag over those, or pick them one by one). Alt+click (outside pick mode) works in the top document.
 * - A page that replaced DOM methods before SpotPatch loaded gives the picker its replacements (natives
 *   are captured when the picker module loads); every such call is guarded, so the worst case is a
 *   missing detail (no selector, no rect), never an exception.
 * - A page listener registered on `window` in the capture phase before pick mode began runs before the
 *   picker's and still sees the event (the picker swallows everything after it).
 * - Animations: see pause.ts (the page's own shadow roots are paused through getAnimations() only).
 */
import { describeElement, quickLabel } from "./describe.js";
import {
  type Box,
  elementAt,
  frameDocument,
  frameOffset,
  isOverlay,
  ownerDoc,
  queryAll,
  safe,
  sameOriginDocuments,
  viewportRect,
} from "./dom.js";
import { Highlight, labelText } from "./highlight.js";
import { enterForOverlayControl, initialElement, startElement, typingInOverlay, walk } from "./navigate.js";
import { areaTargets } from "./selection.js";
import type { PickedTarget, Picker, PickerOptions } from "./types.js";
import { hasKey, translator } from "../i18n.js";

const ENGLISH = translator("en");

export type { Badges, PickedTarget, Picker, PickerOptions } from "./types.js";
export { describeElement } from "./describe.js";
export { targetFromSelection } from "./selection.js";
export { pauseAnimations } from "./pause.js";
export { createBadges } from "./badges.js";


/** Events swallowed in pick mode (capture phase, window). Wheel and keys are not here. */
const SWALLOWED = [
  "pointerdown",
  "pointerup",
  "pointermove",
  "pointerover",
  "pointerout",
  "pointerenter",
  "pointerleave",
  "pointercancel",
  "gotpointercapture",
  "mousedown",
  "mouseup",
  "mousemove",
  "mouseover",
  "mouseout",
  "mouseenter",
  "mouseleave",
  "click",
  "dblclick",
  "auxclick",
  "contextmenu",
  "touchstart",
  "touchmove",
  "touchend",
  "touchcancel",
  "dragstart",
  "selectstart",
] as const;

const MIN_DRAG = 4;

export function createPicker(options: PickerOptions): Picker {
  const { layer, onPick, onExit } = options;
  const host = safe<Element | null>(() => (layer.getRootNode() as ShadowRoot).host ?? null, null);
  const t = (key: string): string => {
    const s = safe(() => options.t(key), key);
    return s && s !== key ? s : hasKey(key) ? ENGLISH(key) : key; // the catalog's English, never a second copy
  };
  let highlight: Highlight | null = null;
  let active = false;
  let mode: "element" | "area" = "element";
  let frozen = false;
  let hovered: Element | null = null;
  let hoveredText = "";
  let pointer: { x: number; y: number } | null = null;
  let frame = 0;
  let drag: { x: number; y: number; rect: Box | null } | null = null;
  let swallowClick = false;
  /** After a pick ends pick mode at pointerup (area mode), the rest of that click (mouseup, click) is
   * still swallowed: the listeners stay one task longer. */
  let lingerTimer: ReturnType<typeof setTimeout> | undefined;
  const windows = new Set<Window>();

  const isOwn = (target: EventTarget | null): boolean =>
    !!target && (target === host || (target instanceof Node && isOverlay(target)));

  /** Client coordinates of `e` in the top page's viewport (events from iframes are offset). */
  function topPoint(e: MouseEvent | Touch, win: Window): { x: number; y: number } {
    if (win === window) return { x: e.clientX, y: e.clientY };
    const o = frameOffset(safe(() => win.document, null));
    return { x: e.clientX + o.x, y: e.clientY + o.y };
  }

  function render(): void {
    frame = 0;
    if (!active || !highlight) return;
    if (shieldsDirty) placeShields();
    if (drag) {
      highlight.showArea(drag.rect);
      return;
    }
    if (!frozen && pointer && !drag) {
      const el = hitAt(pointer.x, pointer.y);
      if (el !== hovered) setHover(el);
    }
    if (hovered && safe(() => hovered!.isConnected, false)) {
      const r = viewportRect(hovered);
      // A frozen element that got hidden (a closed :hover menu) keeps its last box; it stays pickable.
      if (r.width > 0 || r.height > 0 || !frozen) {
        highlight.show(r, hoveredText, frozen);
      }
    } else highlight.hide();
  }

  function schedule(): void {
    if (!frame) frame = requestAnimationFrame(render);
  }

  function setHover(el: Element | null): void {
    if (el && isOverlay(el)) el = null;
    hovered = el;
    if (el) {
      const doc = ownerDoc(el);
      if (doc && doc !== document) attach(doc.defaultView);
      const inner = frameDocument(el);
      if (inner) attach(inner.defaultView);
      hoveredText = labelText(quickLabel(el), t("pick.label.unknown")) + (frozen ? ` · ${t("pick.frozen")}` : "");
    }
  }

  function pick(targets: PickedTarget[], stay: boolean, linger = false): void {
    if (targets.length === 0) return;
    if (!stay) deactivate(linger);
    safe(() => onPick(targets, { stay }), undefined);
  }

  function pickElement(el: Element | null, stay: boolean, linger = false): void {
    if (!el || isOverlay(el)) return;
    pick([describeElement(el)], stay, linger);
  }

  const onEvent = (e: Event): void => {
    // The overlay's own UI gets its events, except while an area drag owns the pointer (a drag may end
    // over the panel).
    if (isOwn(e.target) && !(drag && active) && !isShield(e)) return;
    // Touch events keep their default (scrolling, and the click a tap makes, which then picks).
    if (e.cancelable && !e.type.startsWith("touch")) e.preventDefault();
    e.stopImmediatePropagation();
    if (!active) return; // lingering after a pick: swallow only
    const win = safe(() => ((e.target as Node | null)?.ownerDocument ?? (e.target as Document))?.defaultView ?? window, window) ?? window;
    const type = e.type;
    if (type === "pointermove" || type === "mousemove") {
      pointer = topPoint(e as MouseEvent, win);
      if (drag) updateDrag(pointer);
      else if (!frozen) schedule();
      return;
    }
    if (type === "pointerdown" && mode === "area" && (e as PointerEvent).button === 0) {
      const p = topPoint(e as MouseEvent, win);
      drag = { x: p.x, y: p.y, rect: null };
      highlight?.hide();
      return;
    }
    if (type === "pointerup" && drag) {
      const d = drag;
      drag = null;
      highlight?.showArea(null);
      swallowClick = true;
      if (d.rect && d.rect.width >= MIN_DRAG && d.rect.height >= MIN_DRAG) {
        pick(areaTargets(d.rect), (e as MouseEvent).shiftKey, true);
      } else {
        const p = topPoint(e as MouseEvent, win);
        pickElement(hitAt(p.x, p.y), (e as MouseEvent).shiftKey, true);
      }
      return;
    }
    if (type === "click") {
      if (swallowClick) {
        swallowClick = false;
        return;
      }
      if ((e as MouseEvent).button !== 0) return;
      let el = hovered;
      if (!frozen) {
        const p = topPoint(e as MouseEvent, win);
        el = hitAt(p.x, p.y) ?? hovered;
      }
      pickElement(el, (e as MouseEvent).shiftKey);
    }
  };

  function updateDrag(p: { x: number; y: number }): void {
    if (!drag) return;
    const rect = { x: Math.min(drag.x, p.x), y: Math.min(drag.y, p.y), width: Math.abs(p.x - drag.x), height: Math.abs(p.y - drag.y) };
    drag.rect = rect;
    schedule(); // drawn by the next frame, like the hover
  }

  const onScroll = (): void => {
    shieldsDirty = true;
    schedule();
  };

  /**
   * Cross-origin iframes get a transparent shield in the layer while picking: the browser sends the
   * mouse events over such a frame to the frame, where the picker can neither see nor swallow them. Over
   * a shield they reach the picker, which hovers and picks the <iframe> itself.
   */
  let shields: { frame: Element; el: HTMLDivElement }[] = [];
  let shieldsDirty = false;
  function addShields(): void {
    for (const frame of queryAll(document, "iframe, frame").slice(0, 32)) {
      if (frameDocument(frame) || isOverlay(frame)) continue;
      const el = layer.ownerDocument.createElement("div");
      el.setAttribute("data-spotpatch-picker", "frame-shield");
      el.setAttribute("aria-hidden", "true");
      el.style.cssText = "position:fixed;left:0;top:0;pointer-events:auto;background:transparent;z-index:2147483640;contain:strict;";
      layer.append(el);
      shields.push({ frame, el });
    }
    placeShields();
  }
  function placeShields(): void {
    shieldsDirty = false;
    for (const { frame, el } of shields) {
      const r = viewportRect(frame);
      el.style.display = r.width > 0 && r.height > 0 ? "block" : "none";
      el.style.transform = `translate(${r.x}px, ${r.y}px)`;
      el.style.width = `${r.width}px`;
      el.style.height = `${r.height}px`;
    }
  }
  function removeShields(): void {
    for (const { el } of shields) el.remove();
    shields = [];
  }
  /** The iframe whose shield is topmost at (x, y) in the overlay (not under the panel), or null. */
  function shieldAt(x: number, y: number): Element | null {
    if (shields.length === 0) return null;
    const root = layer.getRootNode() as ShadowRoot | Document;
    const top = safe(() => root.elementFromPoint(x, y), null);
    return shields.find((s) => s.el === top)?.frame ?? null;
  }
  /** The page element at (x, y), or the cross-origin iframe under a shield there. */
  function hitAt(x: number, y: number): Element | null {
    return elementAt(x, y) ?? shieldAt(x, y);
  }
  const isShield = (e: Event): boolean => {
    const origin = safe(() => e.composedPath()[0], null);
    return origin instanceof Element && shields.some((s) => s.el === origin);
  };

  /** A keyboard move: the hover stays where the keys put it until the mouse moves again. */
  function moveTo(el: Element): void {
    pointer = null;
    setHover(el);
    safe(() => el.scrollIntoView({ block: "nearest", inline: "nearest" }), undefined);
    schedule();
  }

  const onKey = (e: KeyboardEvent): void => {
    if (!active || e.isComposing || e.ctrlKey || e.metaKey || e.altKey) return;
    if (isOwn(e.target) && typingInOverlay(e)) return;
    const k = e.key;
    let handled = true;
    if (k === "Escape") {
      stop();
    } else if (k === "Enter" && hovered && !(isOwn(e.target) && enterForOverlayControl(e))) {
      // Without a highlighted element (the mouse is on the panel), or on a panel button other than Pick elements,
      // Enter stays the focused button's.
      pickElement(hovered, e.shiftKey);
    } else if (k === "f" || k === "F") {
      frozen = !frozen;
      if (hovered) setHover(hovered);
      schedule();
    } else if (k === "ArrowUp" || k === "ArrowDown" || k === "ArrowLeft" || k === "ArrowRight") {
      const next = hovered ? walk(hovered, k) : initialElement(hitAt);
      if (next) moveTo(next);
    } else handled = false;
    if (handled) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  };

  function attach(win: Window | null | undefined): void {
    if (!win || windows.has(win)) return;
    const ok = safe(() => {
      for (const type of SWALLOWED) win.addEventListener(type, onEvent, { capture: true, passive: false });
      win.addEventListener("keydown", onKey, { capture: true });
      win.addEventListener("scroll", onScroll, { capture: true, passive: true });
      win.addEventListener("resize", onScroll, { passive: true });
      return true;
    }, false);
    if (ok) windows.add(win);
  }

  function detachAll(): void {
    for (const win of windows) {
      safe(() => {
        for (const type of SWALLOWED) win.removeEventListener(type, onEvent, { capture: true });
        win.removeEventListener("keydown", onKey, { capture: true });
        win.removeEventListener("scroll", onScroll, { capture: true });
        win.removeEventListener("resize", onScroll);
      }, undefined);
    }
    windows.clear();
  }

  function deactivate(linger = false): boolean {
    if (!active) return false;
    active = false;
    clearTimeout(lingerTimer);
    if (linger) {
      lingerTimer = setTimeout(() => {
        if (active) return;
        detachAll();
        removeShields();
      }, 0);
    } else {
      detachAll();
      removeShields();
    }
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    drag = null;
    frozen = false;
    hovered = null;
    pointer = null;
    swallowClick = false;
    highlight?.hide();
    highlight?.showArea(null);
    highlight?.setHint(null);
    return true;
  }

  function stop(): void {
    if (deactivate()) safe(() => onExit(), undefined);
  }

  return {
    get active() {
      return active;
    },
    start(m = "element") {
      mode = m;
      highlight ??= new Highlight(layer);
      highlight.setHint(t(m === "area" ? "pick.status.area" : "pick.hint"));
      if (active) return;
      active = true;
      clearTimeout(lingerTimer);
      removeShields();
      for (const doc of sameOriginDocuments()) attach(doc.defaultView);
      addShields();
      if (m === "element") {
        const { el, from } = startElement(hitAt);
        if (from === "located" || from === "focusable") highlight.setHint(`${t("pick.hint")} ${t(`pick.start.${from}`)}`);
        setHover(el);
        schedule();
      }
    },
    stop,
    pickFromEvent(event) {
      if (isOwn(event.target)) return null;
      const path = safe(() => event.composedPath(), [] as EventTarget[]);
      let el: Element | null = null;
      for (const node of path) {
        if (node instanceof Element || (node as Node)?.nodeType === 1) {
          el = node as Element;
          break;
        }
      }
      if (!el || isOverlay(el)) return null;
      if (event.cancelable) event.preventDefault();
      event.stopImmediatePropagation();
      return describeElement(el);
    },
    destroy() {
      deactivate();
      highlight?.destroy();
      highlight = null;
    },
  };
}
