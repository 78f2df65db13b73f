/**
 * The code injected at page load (docs/node-shim.md "The overlay"). It stays small and costs nothing
 * while SpotPatch is closed: it creates the `<spotpatch-overlay>` host with an open shadow root, the
 * launcher button, and ONE `keydown` listener on `window` (capture) for the shortcut and for Alt. It does
 * no layout read. The overlay itself (Preact panel, picker, diff view) is imported on first open.
 *
 * Alt held arms a one-shot capture-phase listener set, so that Alt+click picks the element under the
 * pointer without the page seeing the click; releasing Alt (or leaving the window) disarms it.
 */
import type { LoaderArgs, OverlayHandle, OverlayOptions } from "../protocol/overlay.js";
import { storageKey } from "../protocol/overlay.js";

const HOST_STYLE =
  "all: initial !important; position: fixed !important; top: 0 !important; left: 0 !important; " +
  "width: 0 !important; height: 0 !important; z-index: 2147483647 !important; display: block !important; " +
  "visibility: visible !important; opacity: 1 !important; transform: none !important; pointer-events: auto !important; " +
  // The user-agent styles of a shown popover (the host is one: see `TopLayer`), neutralised.
  "right: auto !important; bottom: auto !important; margin: 0 !important; border: 0 !important; " +
  "padding: 0 !important; background: transparent !important; overflow: visible !important;";

const LAUNCHER_CSS = `
.sp-launcher { all: initial; position: fixed; z-index: 2147483647; width: 44px; height: 44px; border-radius: 50%;
  box-sizing: border-box; border: 2px solid #fff; background: #4338ca; color: #fff; cursor: grab; display: flex;
  align-items: center; justify-content: center; font: 600 15px/1 system-ui, sans-serif; touch-action: none;
  box-shadow: 0 2px 10px rgba(0,0,0,.35); user-select: none; }
.sp-launcher:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.sp-launcher[data-dragging] { cursor: grabbing; }
.sp-launcher[hidden] { display: none; }
.sp-launcher svg { width: 22px; height: 22px; pointer-events: none; }
`;

/** Corner → CSS inset of the launcher; a dragged place is stored as fractions of the viewport. */
const CORNERS: Record<string, string> = {
  "bottom-right": "right: 16px; bottom: 16px;",
  "bottom-left": "left: 16px; bottom: 16px;",
  "top-right": "right: 16px; top: 16px;",
  "top-left": "left: 16px; top: 16px;",
};

interface Shortcut {
  alt: boolean;
  shift: boolean;
  ctrl: boolean;
  meta: boolean;
  key: string;
}

/** "Alt+Shift+S" → its modifiers and key (lower case); throws on an empty key. */
function parseShortcut(text: string): Shortcut {
  const parts = text
    .split("+")
    .map((p) => p.trim())
    .filter(Boolean);
  const key = (parts.pop() ?? "").toLowerCase();
  if (!key) throw new Error(`SpotPatch: invalid shortcut "${text}"`);
  const mods = parts.map((p) => p.toLowerCase());
  const has = (...names: string[]) => mods.some((m) => names.includes(m));
  return {
    alt: has("alt", "option"),
    shift: has("shift"),
    ctrl: has("ctrl", "control"),
    meta: has("meta", "cmd", "command"),
    key,
  };
}

/** Whether `event` is `shortcut` (letters and digits by physical key, so Alt on macOS still matches). */
function matchesShortcut(event: KeyboardEvent, shortcut: Shortcut): boolean {
  if (event.altKey !== shortcut.alt || event.shiftKey !== shortcut.shift) return false;
  if (event.ctrlKey !== shortcut.ctrl || event.metaKey !== shortcut.meta) return false;
  const { key } = shortcut;
  if (/^[a-z]$/.test(key)) return event.code === `Key${key.toUpperCase()}`;
  if (/^[0-9]$/.test(key)) return event.code === `Digit${key}`;
  return event.key.toLowerCase() === key;
}

/** Natives the loader needs, captured when this module runs (before a page's later scripts can replace them). */
const attachShadow = Element.prototype.attachShadow;

/** A `<spotpatch-overlay>` that is ours (a second injection, e.g. a full reload race): it has our shadow root. A page's
 *  own element of that name (a decoy, or markup that happens to use it) has none and does not switch SpotPatch off. */
const oursIn = (doc: Document): boolean =>
  Array.from(doc.querySelectorAll("spotpatch-overlay")).some((el) => !!el.shadowRoot?.childElementCount);

export function startLoader({ client, load, options }: LoaderArgs): void {
  if (oursIn(document)) return;
  // A same-origin iframe served by the same dev server: the top page's overlay already picks inside it.
  try {
    if (window.top !== window && window.top && oursIn(window.top.document)) return;
  } catch {
    /* a cross-origin parent: this frame is its own page */
  }
  const host = document.createElement("spotpatch-overlay");
  host.setAttribute("style", HOST_STYLE);
  let root: ShadowRoot;
  try {
    root = attachShadow.call(host, { mode: "open" });
  } catch (error) {
    console.error("SpotPatch: this page's Element.prototype.attachShadow failed, so the overlay cannot start:", error);
    return;
  }
  document.documentElement.appendChild(host);
  const top = new TopLayer(host);
  stopKeys(host);

  let handle: Promise<OverlayHandle> | undefined;
  const overlay = (): Promise<OverlayHandle> =>
    (handle ??= load().then((module) => module.mountOverlay({ client, host, options, keepOnTop: (on) => top.watch(on) })));
  const run = (action: (h: OverlayHandle) => void) => {
    top.ensure();
    overlay().then(action, (error: unknown) => {
      handle = undefined;
      console.error("SpotPatch: the overlay failed to load:", error);
    });
  };

  if (options.launcher) addLauncher(root, options, () => run((h) => (h.toggle ? h.toggle() : h.open())));

  let shortcut: Shortcut | undefined;
  try {
    shortcut = parseShortcut(options.shortcut);
  } catch (error) {
    console.error(error);
  }
  let armed: (() => void) | undefined;
  window.addEventListener(
    "keydown",
    (event) => {
      if (shortcut && matchesShortcut(event, shortcut)) {
        event.preventDefault();
        event.stopPropagation();
        run((h) => h.togglePick());
      } else if (event.key === "Alt" && !event.ctrlKey && !event.metaKey && !armed) {
        armed = armAltClick(
          host,
          (click) => run((h) => h.altPick(click)),
          () => (armed = undefined),
        );
      }
    },
    true,
  );

  // A page reloaded while the panel was open (a job running or in review) gets it back at once.
  try {
    if (sessionStorage.getItem(storageKey(options.projectKey, "open")) === "1") run((h) => h.open());
  } catch {
    /* storage disabled: the panel opens on demand */
  }
}

/**
 * Keys typed in the overlay stay in the overlay: the page's key handlers on `document` or `window` (a
 * "/" search hotkey, say) would otherwise see them with the host as their target and act on them. The
 * events still reach the overlay's own handlers (they run before the host's) and the loader's shortcut
 * listener (window, capture phase, before any of this).
 */
function stopKeys(host: HTMLElement): void {
  const stop = (event: Event) => event.stopPropagation();
  for (const type of ["keydown", "keyup", "keypress", "beforeinput", "input", "compositionstart", "compositionend"])
    host.addEventListener(type, stop);
}

/**
 * Keeps the host on top of the page and out of its containing blocks:
 * - the host is a manual popover shown at once, so it lives in the top layer: a `transform`, `filter`,
 *   `contain: paint` or `will-change` on `<html>` cannot make its fixed children scroll with the page;
 * - a page's popover or dialog opened later goes above it: on their `toggle` event the host is shown
 *   again (back on top). A modal dialog also makes everything outside itself inert, the host included,
 *   so while one is open the host is moved inside that dialog (and back to `<html>` when it closes);
 * - a page that removes the host (a script that cleans up unknown children of `<html>`) gets it back, a
 *   few times; then one console warning, and it is put back only when the shortcut is used.
 * Standing cost while the panel is closed: one `toggle` listener (capture) on the document and one
 * MutationObserver on `<html>`'s direct children (also on a modal dialog's parent while the host is in it). While the panel is open (`watch(true)`), one more
 * MutationObserver on `open` attributes (dialogs opened where `toggle` is not fired for them).
 * Without the Popover API, only the moves and re-attachment apply (the host is then a fixed element).
 */
class TopLayer {
  private readonly popover = typeof HTMLElement.prototype.showPopover === "function";
  private readonly modals: HTMLDialogElement[] = [];
  private removals = 0;
  private warned = false;
  private readonly childObserver: MutationObserver;
  private openObserver: MutationObserver | undefined;

  constructor(private readonly host: HTMLElement) {
    if (this.popover) host.setAttribute("popover", "manual");
    this.show();
    document.addEventListener("toggle", (event) => this.onToggle(event), true);
    this.childObserver = new MutationObserver(() => this.onChildren());
    this.childObserver.observe(document.documentElement, { childList: true });
  }

  /** Before each use (shortcut, launcher): attached, inside the open modal dialog if any, on top. */
  ensure(): void {
    if (!this.host.isConnected) {
      this.removals = 0;
      if (this.warned) this.childObserver.observe(document.documentElement, { childList: true });
    }
    this.place(false);
  }

  watch(on: boolean): void {
    if (on && !this.openObserver) {
      this.openObserver = new MutationObserver((records) => {
        if (records.some((r) => r.target instanceof HTMLDialogElement)) this.place(true);
      });
      this.openObserver.observe(document.body ?? document.documentElement, {
        attributes: true,
        attributeFilter: ["open"],
        subtree: true,
      });
    } else if (!on && this.openObserver) {
      this.openObserver.disconnect();
      this.openObserver = undefined;
    }
  }

  private onToggle(event: Event): void {
    const target = event.target;
    if (target === this.host || !(target instanceof Element)) return;
    if (target instanceof HTMLDialogElement) {
      const at = this.modals.indexOf(target);
      if (at >= 0) this.modals.splice(at, 1);
      if (isModal(target)) this.modals.push(target);
      this.place(target.open);
    } else if (target.hasAttribute("popover") && (event as ToggleEvent).newState === "open") {
      this.place(true); // a <details> toggle or a popover closing changes nothing here
    }
  }

  private onChildren(): void {
    if (this.host.isConnected) return;
    // A dialog the host sat in may have been removed with it: then <html> is its place again.
    this.removals += 1;
    if (this.removals <= 3) {
      this.place(false);
      return;
    }
    this.childObserver.disconnect(); // never a remove/re-attach loop with the page
    if (!this.warned) {
      this.warned = true;
      console.warn("SpotPatch: the page keeps removing the overlay; it comes back with the shortcut.");
    }
  }

  /** The topmost open modal dialog (the host must be inside it to stay usable), else `<html>`. */
  private parent(): Element {
    for (let i = this.modals.length - 1; i >= 0; i -= 1) {
      const dialog = this.modals[i]!;
      if (dialog.isConnected && isModal(dialog)) return dialog;
      this.modals.splice(i, 1);
    }
    const open = document.querySelectorAll("dialog[open]");
    for (let i = open.length - 1; i >= 0; i -= 1) if (isModal(open[i] as HTMLDialogElement)) return open[i]!;
    return document.documentElement;
  }

  /** Move the host where it belongs; `raise`: show it again so it is above what the page just opened. */
  private place(raise: boolean): void {
    const host = this.host;
    const parent = this.parent();
    const moving = host.parentNode !== parent;
    if (!moving && !raise && host.isConnected) return;
    const focused = host.shadowRoot?.activeElement as HTMLElement | null | undefined;
    if (moving) {
      parent.appendChild(host);
      // Removing the dialog (not just closing it) removes the host too: watch the dialog's parent as well.
      if (parent !== document.documentElement && parent.parentNode) {
        this.childObserver.observe(parent.parentNode, { childList: true });
      } else if (!this.warned) {
        this.childObserver.disconnect(); // back on <html>: its children only again
        this.childObserver.observe(document.documentElement, { childList: true });
      }
    }
    else if (this.popover && host.matches(":popover-open")) host.hidePopover();
    this.show();
    if (focused && focused.isConnected && host.shadowRoot?.activeElement !== focused) focused.focus({ preventScroll: true });
  }

  private show(): void {
    if (!this.popover || !this.host.isConnected) return;
    try {
      if (!this.host.matches(":popover-open")) this.host.showPopover();
    } catch {
      /* not shown (e.g. in a document being torn down): it stays a fixed element */
    }
  }
}

function isModal(dialog: HTMLDialogElement): boolean {
  if (!dialog.open) return false;
  try {
    return dialog.matches(":modal");
  } catch {
    return false; // no :modal support: treated as non-modal
  }
}

/** While Alt is held: swallow the pointer sequence of one click on the page and hand the click over. */
function armAltClick(host: HTMLElement, onClick: (event: MouseEvent) => void, done: () => void): () => void {
  const swallow = (event: Event) => {
    const mouse = event as MouseEvent;
    if (!mouse.altKey || event.composedPath().includes(host)) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    if (event.type === "click") {
      disarm();
      onClick(frozen(mouse));
    }
  };
  const types = ["pointerdown", "mousedown", "pointerup", "mouseup", "click", "auxclick", "contextmenu"];
  const keyup = (event: KeyboardEvent) => {
    if (event.key === "Alt") disarm();
  };
  const disarm = () => {
    for (const type of types) window.removeEventListener(type, swallow, true);
    window.removeEventListener("keyup", keyup, true);
    window.removeEventListener("blur", disarm, true);
    done();
  };
  for (const type of types) window.addEventListener(type, swallow, true);
  window.addEventListener("keyup", keyup, true);
  window.addEventListener("blur", disarm, true);
  return disarm;
}

/**
 * What the picker needs of a click, kept after its dispatch (the overlay may still be loading then, and
 * a dispatched event's `composedPath()` is empty). The click itself was already swallowed.
 */
function frozen(event: MouseEvent): MouseEvent {
  const path = event.composedPath();
  const { clientX, clientY, altKey, shiftKey, ctrlKey, metaKey, button } = event;
  const copy = {
    type: "click",
    target: path[0] ?? event.target,
    clientX,
    clientY,
    altKey,
    shiftKey,
    ctrlKey,
    metaKey,
    button,
    cancelable: false,
    defaultPrevented: true,
    composedPath: () => path,
    preventDefault() {},
    stopPropagation() {},
    stopImmediatePropagation() {},
  };
  return copy as unknown as MouseEvent;
}

/** The draggable launcher; its place (fractions of the viewport) is remembered per project. */
function addLauncher(root: ShadowRoot, options: OverlayOptions, onActivate: () => void): void {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(LAUNCHER_CSS);
  root.adoptedStyleSheets = [...root.adoptedStyleSheets, sheet];
  const button = document.createElement("button");
  button.type = "button";
  button.className = "sp-launcher";
  button.setAttribute("aria-label", "SpotPatch");
  button.title = `SpotPatch (${options.shortcut})`;
  button.innerHTML =
    '<svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" aria-hidden="true">' +
    '<circle cx="12" cy="12" r="7"/><circle cx="12" cy="12" r="2" fill="currentColor"/>' +
    '<path d="M12 1v4M12 19v4M1 12h4M19 12h4"/></svg>';
  const key = storageKey(options.projectKey, "launcher");
  const place = (x: number, y: number) => {
    const clampX = `clamp(4px, calc(${x * 100}vw - 22px), calc(100vw - 48px))`;
    const clampY = `clamp(4px, calc(${y * 100}vh - 22px), calc(100vh - 48px))`;
    button.setAttribute("style", `left: ${clampX}; top: ${clampY};`);
  };
  button.setAttribute("style", CORNERS[options.launcher as string] ?? CORNERS["bottom-right"]!);
  try {
    const saved = JSON.parse(localStorage.getItem(key) ?? "null") as { x?: unknown; y?: unknown } | null;
    if (saved && typeof saved.x === "number" && typeof saved.y === "number") place(saved.x, saved.y);
  } catch {
    /* no or bad stored place: the configured corner */
  }

  let suppressClick = false;
  let drag: { id: number; dx: number; dy: number; moved: boolean; startX: number; startY: number } | undefined;
  button.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    const rect = button.getBoundingClientRect(); // a layout read on user input only
    drag = {
      id: event.pointerId,
      dx: event.clientX - rect.left,
      dy: event.clientY - rect.top,
      moved: false,
      startX: event.clientX,
      startY: event.clientY,
    };
    button.setPointerCapture(event.pointerId);
  });
  button.addEventListener("pointermove", (event) => {
    if (!drag || event.pointerId !== drag.id) return;
    if (!drag.moved && Math.hypot(event.clientX - drag.startX, event.clientY - drag.startY) < 5) return;
    drag.moved = true;
    button.toggleAttribute("data-dragging", true);
    const x = (event.clientX - drag.dx + 22) / window.innerWidth;
    const y = (event.clientY - drag.dy + 22) / window.innerHeight;
    place(x, y);
  });
  const end = (event: PointerEvent) => {
    if (!drag || event.pointerId !== drag.id) return;
    if (drag.moved) {
      const x = Math.min(1, Math.max(0, (event.clientX - drag.dx + 22) / window.innerWidth));
      const y = Math.min(1, Math.max(0, (event.clientY - drag.dy + 22) / window.innerHeight));
      place(x, y);
      try {
        localStorage.setItem(key, JSON.stringify({ x, y }));
      } catch {
        /* storage full or disabled: the place lasts for this page only */
      }
      suppressClick = true; // the click that ends a drag does not open the panel
      setTimeout(() => (suppressClick = false), 0);
    }
    button.removeAttribute("data-dragging");
    drag = undefined;
  };
  button.addEventListener("pointerup", end);
  button.addEventListener("pointercancel", end);
  button.addEventListener("click", () => {
    if (!suppressClick) onActivate();
  });
  root.appendChild(button);
}
