/**
 * The panel's placement on the page (issue 26): the header's placement menu, the resize separator on
 * the panel's inner edge, the pill the panel collapses to, the polite live region saying why the panel
 * moved by itself, the Alt+Shift+D shortcut, and `usePlacement`, which moves the panel away from the
 * picked elements in review and while picking. Geometry and storage: placement.ts.
 */
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

import type { MessageKey } from "../i18n.js";
import type { PickedTarget } from "../picker/types.js";
import type { Controller } from "./controller.js";
import {
  DOCKS,
  avoid,
  clampSize,
  dockSize,
  intersects,
  isSmall,
  maxSize,
  minSize,
  panelBox,
  pillCorner,
  smallReview,
  type Avoidance,
  type Corner,
  type Dock,
  type PlacementStore,
  type TargetBox,
  type Viewport,
} from "./placement.js";
import { ACTIVE } from "./state.js";

/** Where the panel is drawn now. */
export interface Layout {
  dock: Dock;
  size: number;
  collapsed: boolean;
  corner: Corner;
  situation: string | null;
}

const viewport = (): Viewport => ({ width: window.innerWidth, height: window.innerHeight });

/**
 * What the automatic placement depends on: pick mode, the job and its phase, the composer's targets, the
 * viewport's size; null when none applies (the composer without pick mode).
 */
function situationOf(ctl: Controller): string | null {
  const { job, picking, drafts } = ctl.state;
  if (!job && !picking) return null;
  const status = job?.snapshot.status ?? "";
  const phase = ACTIVE.has(status) ? "active" : status;
  const v = viewport();
  return [picking ?? "", job?.jobId ?? "", phase, drafts.map((d) => d.key).join(","), v.width, v.height].join("|");
}

/** The target's box in the top page's viewport, or null when it is not on the page. */
function boxOf(target: PickedTarget): TargetBox["box"] | null {
  if (target.element) {
    if (!target.element.isConnected) return null;
    const r = target.element.getBoundingClientRect();
    const frame = target.element.ownerDocument.defaultView?.frameElement?.getBoundingClientRect();
    const dx = frame?.left ?? 0;
    const dy = frame?.top ?? 0;
    return { left: r.left + dx, top: r.top + dy, right: r.right + dx, bottom: r.bottom + dy };
  }
  const g = target.region;
  if (!g) return null;
  const left = g.x - window.scrollX;
  const top = g.y - window.scrollY;
  return { left, top, right: left + g.width, bottom: top + g.height };
}

/** The job's targets (numbered as its cards) and the composer's waiting ones (numbered as theirs). */
function targetBoxes(ctl: Controller): TargetBox[] {
  const { job, drafts } = ctl.state;
  const out: TargetBox[] = [];
  const add = (target: PickedTarget, n: number) => {
    const box = boxOf(target);
    if (box && box.right > box.left && box.bottom > box.top) out.push({ n, box });
  };
  job?.input?.targets.forEach((entry, i) => add(entry.target, i + 1));
  drafts.forEach((draft, i) => add(draft.target, i + 1));
  return out;
}

const canScroll = () => document.documentElement.scrollHeight > window.innerHeight + 1;

/**
 * The panel's layout, and the automatic placement: when the situation changes (a new job phase, new
 * targets, pick mode, a resize) and the user has not chosen in it, the panel moves off the targets in
 * view (review, pick mode), collapses to the pill in pick mode on a small viewport, and docks at the
 * bottom with the targets scrolled into view for a review on a small viewport. Each move is announced.
 */
export function usePlacement(ctl: Controller, store: PlacementStore, wide: boolean): Layout {
  const [, setVersion] = useState(0);
  useEffect(() => store.subscribe(() => setVersion((n) => n + 1)), [store]);
  const open = ctl.state.open;
  // Closed, the overlay costs nothing: no resize listener, so a resize renders nothing and schedules no
  // frame (the panel's effects run after a frame). Opening reads the viewport afresh.
  useEffect(() => {
    if (!open) return;
    const onResize = () => setVersion((n) => n + 1);
    window.addEventListener("resize", onResize);
    return () => window.removeEventListener("resize", onResize);
  }, [open]);
  useEffect(() => {
    if (!open) return;
    const onKey = (event: KeyboardEvent) => {
      if (!event.altKey || !event.shiftKey || event.ctrlKey || event.metaKey || event.code !== "KeyD") return;
      event.preventDefault();
      cycleDock(ctl, store);
    };
    window.addEventListener("keydown", onKey, true);
    return () => window.removeEventListener("keydown", onKey, true);
  }, [open, ctl, store]);
  const situation = situationOf(ctl);
  useLayoutEffect(() => decide(ctl, store, situation, wide), [ctl, store, situation, wide, open]);
  const v = viewport();
  const effective = store.effective;
  return {
    dock: effective.dock,
    size: clampSize(effective.dock, effective.size ?? dockSize(store.placement, effective.dock, v, wide), v),
    collapsed: effective.collapsed,
    corner: effective.corner ?? (effective.dock === "left" ? "bottom-left" : "bottom-right"),
    situation,
  };
}

function decide(ctl: Controller, store: PlacementStore, situation: string | null, wide: boolean): void {
  const key = `${ctl.state.open}|${situation}|${wide}`;
  if (key === store.decidedFor) return;
  store.decidedFor = key;
  if (!ctl.state.open || situation === null) {
    if (store.auto) store.setAuto(null, "");
    return;
  }
  if (!store.mayMove(situation)) return;
  const v = viewport();
  const user = store.placement;
  const t = ctl.t;
  if (ctl.state.picking && isSmall(v)) {
    const corner = pillCorner(targetBoxes(ctl), v);
    store.setAuto({ dock: user.dock, collapsed: true, corner }, user.collapsed ? null : t("placement.pickCollapsed"));
    return;
  }
  let boxes = targetBoxes(ctl);
  if (!boxes.length) return store.setAuto(null, null);
  if (user.collapsed) return store.setAuto({ dock: user.dock, collapsed: true, corner: pillCorner(boxes, v) }, null);
  const sizes = Object.fromEntries(DOCKS.map((d) => [d, dockSize(user, d, v, wide)])) as Record<Dock, number>;
  const here = panelBox(user.dock, sizes[user.dock], v);
  let move: Avoidance | null =
    isSmall(v) && ctl.state.job
      ? smallReview(boxes, v, here, sizes.bottom)
      : avoid(boxes, v, user.dock, sizes, canScroll());
  if (move?.scrollBy) {
    window.scrollBy({ top: move.scrollBy, behavior: "instant" });
    // The page may not scroll that far (its end): measure again, and go on from there if still covered.
    boxes = targetBoxes(ctl);
    const size = move.auto.size ?? sizes[move.auto.dock];
    const box = panelBox(move.auto.dock, size, v);
    if (!move.auto.collapsed && boxes.some((b) => intersects(b.box, box))) {
      const next = avoid(boxes, v, move.auto.dock, { ...sizes, [move.auto.dock]: size }, false);
      if (next) move = { ...next, covered: move.covered };
    }
  }
  if (!move) return store.setAuto(null, null);
  const same = move.auto.dock === user.dock && !move.auto.collapsed && move.auto.size === undefined;
  if (same) return store.setAuto(null, null);
  const numbers = move.covered.length ? move.covered : boxes.map((b) => b.n);
  const targets =
    numbers.length === 1 ? t("placement.target", { n: numbers[0]! }) : t("placement.targets", { list: numbers.join(", ") });
  const message: MessageKey = move.auto.collapsed ? "placement.movedPill" : `placement.moved.${move.auto.dock}`;
  store.setAuto(move.auto, t(message, { targets }));
}

/** Alt+Shift+D: right → left → bottom → pill → right (the pill expands where it was docked). */
function cycleDock(ctl: Controller, store: PlacementStore): void {
  const { dock, collapsed } = store.effective;
  const root = ctl.layer.getRootNode() as ShadowRoot;
  if (collapsed) {
    const onPill = root.activeElement?.classList.contains("sp-pill") ?? false;
    store.choose({ collapsed: false, dock: "right" }, situationOf(ctl));
    if (onPill) ctl.focusRequest = { kind: "panel" }; // read by the panel's render that `choose` causes
    return;
  }
  if (dock === "bottom") {
    store.focusPill = !!root.activeElement?.closest(".sp-panel");
    store.choose({ collapsed: true }, situationOf(ctl));
    return;
  }
  store.choose({ dock: DOCKS[DOCKS.indexOf(dock) + 1]!, collapsed: false }, situationOf(ctl));
}

/** The header's placement menu: Dock right / left / bottom, Collapse; arrow keys, Home/End, Esc. */
export function PlacementMenu({ ctl, store, layout }: { ctl: Controller; store: PlacementStore; layout: Layout }) {
  const { t } = ctl;
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const menu = useRef<HTMLUListElement>(null);
  const items = () => [...(menu.current?.querySelectorAll<HTMLElement>("[role^='menuitem']") ?? [])];
  const [focusAt, setFocusAt] = useState<number | null>(null);
  useLayoutEffect(() => {
    if (!open || focusAt === null) return;
    const list = items();
    list[(focusAt + list.length) % list.length]?.focus();
    setFocusAt(null);
  }, [open, focusAt]);
  const close = (refocus: boolean) => {
    setOpen(false);
    if (refocus) button.current?.focus();
  };
  const pick = (choice: Dock | "collapse") => {
    setOpen(false);
    if (choice === "collapse") {
      store.focusPill = true;
      store.choose({ collapsed: true }, layout.situation);
    } else {
      store.choose({ dock: choice, collapsed: false }, layout.situation);
      button.current?.focus();
    }
  };
  const onMenuKey = (e: KeyboardEvent) => {
    const list = items();
    const at = list.indexOf((ctl.layer.getRootNode() as ShadowRoot).activeElement as HTMLElement);
    const move: Record<string, number> = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: list.length - 1 };
    if (e.key in move) {
      e.preventDefault();
      list[(move[e.key]! + list.length) % list.length]?.focus();
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation(); // the menu's Esc, not the panel's
      close(true);
    } else if (e.key === "Tab") close(false);
  };
  const choices: { id: Dock | "collapse"; label: MessageKey }[] = [
    { id: "right", label: "placement.dock.right" },
    { id: "left", label: "placement.dock.left" },
    { id: "bottom", label: "placement.dock.bottom" },
    { id: "collapse", label: "placement.collapse" },
  ];
  return (
    <div
      class="sp-menu-wrap"
      onFocusOut={(e) => {
        const next = e.relatedTarget as Node | null;
        if (open && next && !(e.currentTarget as HTMLElement).contains(next)) setOpen(false);
      }}
    >
      <button
        ref={button}
        type="button"
        class="sp-icon"
        aria-label={t("placement.menu")}
        title={`${t("placement.menu")} (Alt+Shift+D)`}
        aria-haspopup="menu"
        aria-expanded={open ? "true" : "false"}
        aria-controls="sp-place-menu"
        aria-keyshortcuts="Alt+Shift+D"
        onClick={() => {
          setOpen(!open);
          if (!open) setFocusAt(Math.max(0, DOCKS.indexOf(layout.dock)));
        }}
        onKeyDown={(e) => {
          if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
          e.preventDefault();
          setOpen(true);
          setFocusAt(e.key === "ArrowDown" ? 0 : -1);
        }}
      >
        <svg class="sp-dock-icon" viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">
          <rect x="1.5" y="2.5" width="13" height="11" rx="1.5" fill="none" stroke="currentColor" />
          <rect x="9" y="3" width="5" height="10" fill="currentColor" />
        </svg>
      </button>
      {open && (
        <div class="sp-menu" data-up={layout.dock === "bottom" ? "" : undefined}>
          <ul ref={menu} id="sp-place-menu" role="menu" aria-label={t("placement.menu")} onKeyDown={onMenuKey}>
            {choices.map((c) => (
              <li key={c.id} role="none">
                <button
                  type="button"
                  role={c.id === "collapse" ? "menuitem" : "menuitemradio"}
                  aria-checked={c.id === "collapse" ? undefined : c.id === layout.dock ? "true" : "false"}
                  tabIndex={-1}
                  onClick={() => pick(c.id)}
                >
                  <span aria-hidden="true" class="sp-menu-check">
                    {c.id === layout.dock ? "✓" : ""}
                  </span>
                  {t(c.label)}
                </button>
              </li>
            ))}
          </ul>
          <p class="sp-muted sp-menu-help">{t("placement.help")}</p>
        </div>
      )}
    </div>
  );
}

/** The focusable separator on the panel's inner edge: drag it, or arrows (Shift: bigger steps), Home, End. */
export function Separator({ ctl, store, layout }: { ctl: Controller; store: PlacementStore; layout: Layout }) {
  const { dock, size } = layout;
  const v = viewport();
  const drag = useRef<number | null>(null);
  const resize = (next: number) => {
    const value = clampSize(dock, next, v);
    store.choose(dock === "bottom" ? { height: value } : { width: value }, layout.situation);
  };
  const fromPointer = (e: PointerEvent) =>
    dock === "right" ? v.width - 12 - e.clientX : dock === "left" ? e.clientX - 12 : v.height - 12 - e.clientY;
  const grow: Record<Dock, string[]> = { right: ["ArrowLeft", "ArrowUp"], left: ["ArrowRight", "ArrowUp"], bottom: ["ArrowUp"] };
  const shrink: Record<Dock, string[]> = { right: ["ArrowRight", "ArrowDown"], left: ["ArrowLeft", "ArrowDown"], bottom: ["ArrowDown"] };
  return (
    <div
      class="sp-sep"
      role="separator"
      tabIndex={0}
      aria-label={ctl.t("placement.resize")}
      aria-orientation={dock === "bottom" ? "horizontal" : "vertical"}
      aria-valuenow={size}
      aria-valuemin={minSize(dock, v)}
      aria-valuemax={maxSize(dock, v)}
      aria-valuetext={ctl.t("placement.size", { size })}
      onKeyDown={(e) => {
        const step = e.shiftKey ? 64 : 16;
        let next: number | null = null;
        if (grow[dock].includes(e.key)) next = size + step;
        else if (shrink[dock].includes(e.key)) next = size - step;
        else if (e.key === "Home") next = minSize(dock, v);
        else if (e.key === "End") next = maxSize(dock, v);
        if (next === null) return;
        e.preventDefault();
        resize(next);
      }}
      onPointerDown={(e) => {
        if (e.button !== 0) return;
        e.preventDefault();
        (e.currentTarget as HTMLElement).setPointerCapture(e.pointerId);
        drag.current = e.pointerId;
      }}
      onPointerMove={(e) => {
        if (drag.current === e.pointerId) resize(fromPointer(e));
      }}
      onPointerUp={(e) => {
        if (drag.current !== e.pointerId) return;
        drag.current = null;
        (e.currentTarget as HTMLElement).releasePointerCapture(e.pointerId);
      }}
    />
  );
}

/** The collapsed panel: the job's state in a small button; click or Enter expands the panel. */
export function Pill({ ctl, store, layout }: { ctl: Controller; store: PlacementStore; layout: Layout }) {
  const { t, state } = ctl;
  const button = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!store.focusPill) return;
    store.focusPill = false;
    button.current?.focus();
  });
  const status = state.job?.snapshot.status;
  const text = status
    ? ctl.statusText(status)
    : state.picking
      ? t("pick.status.picking")
      : t("placement.pillIdle");
  const tone = !status
    ? undefined
    : ACTIVE.has(status)
      ? "busy"
      : status === "failed"
        ? "bad"
        : status === "awaiting-review" || status === "applied" || status === "reverted"
          ? "ok"
          : "warn";
  return (
    <button
      ref={button}
      type="button"
      class="sp-pill"
      lang={state.lang}
      data-corner={layout.corner}
      data-tone={tone}
      aria-keyshortcuts="Alt+Shift+D"
      title={t("placement.expand")}
      onClick={() => {
        ctl.focusRequest = { kind: "panel" };
        store.choose({ collapsed: false }, layout.situation);
      }}
    >
      {tone === "busy" ? <span class="sp-spin" aria-hidden="true" /> : <span class="sp-pill-dot" aria-hidden="true" />}
      <span>{t("panel.title")}</span>
      {/* In pick mode the picker's own hint says so: a short pill leaves more of the page to pick. */}
      <span class={status || !state.picking ? "sp-pill-status" : "sp-visually-hidden"}>{text}</span>
      <span class="sp-visually-hidden">{t("placement.expand")}</span>
    </button>
  );
}

/** The polite live region: why the panel moved by itself (outside the panel, so it stays when collapsed). */
export function PlacementLive({ store, lang }: { store: PlacementStore; lang: string }) {
  return (
    <div class="sp-visually-hidden" role="status" aria-live="polite" lang={lang} data-placement-live="">
      {store.announcement}
    </div>
  );
}
