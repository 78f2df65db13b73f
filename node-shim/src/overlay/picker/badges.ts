/**
 * Numbered badges pinned to picked elements. Each badge follows its element through scroll, resize and
 * layout changes: a ResizeObserver and scroll/resize listeners schedule a re-position, and a cheap
 * requestAnimationFrame loop (one rect read per badge, ≤ maxTargets badges) runs only while badges exist,
 * catching moves nothing else reports. A badge whose element leaves the DOM disappears and
 * `onDetached(n)` is called once for it. Region targets are pinned to their document coordinates.
 */
import { connected, type Box, viewportRect } from "./dom.js";
import type { Badges, PickedTarget } from "./types.js";

interface Entry {
  n: number;
  target: PickedTarget;
  el: HTMLDivElement;
  last: string;
}

const SIZE = 22;

export function createBadges(layer: HTMLElement, onDetached: (n: number) => void): Badges {
  const doc = layer.ownerDocument;
  const entries = new Map<number, Entry>();
  const detached = new Set<PickedTarget>();
  let frame = 0;
  let observer: ResizeObserver | null = null;

  const schedule = (): void => {
    if (!frame && entries.size > 0) frame = requestAnimationFrame(tick);
  };
  const onScroll = (): void => schedule();
  let listening = false;
  const listen = (on: boolean): void => {
    if (on === listening) return;
    listening = on;
    if (on) {
      window.addEventListener("scroll", onScroll, { capture: true, passive: true });
      window.addEventListener("resize", onScroll, { passive: true });
    } else {
      window.removeEventListener("scroll", onScroll, { capture: true });
      window.removeEventListener("resize", onScroll);
    }
    if (on) observer = typeof ResizeObserver === "function" ? new ResizeObserver(schedule) : null;
    else {
      observer?.disconnect();
      observer = null;
    }
  };

  function position(e: Entry): void {
    const t = e.target;
    let r: Box;
    if (t.element) {
      if (!connected(t.element)) {
        remove(e);
        if (!detached.has(t)) {
          detached.add(t);
          onDetached(e.n);
        }
        return;
      }
      r = viewportRect(t.element);
    } else if (t.region) {
      r = { x: t.region.x - scrollX, y: t.region.y - scrollY, width: t.region.width, height: t.region.height };
    } else return;
    const hidden = r.width === 0 && r.height === 0;
    const x = Math.min(Math.max(r.x - SIZE / 2, 0), innerWidth - SIZE);
    const y = Math.min(Math.max(r.y - SIZE / 2, 0), innerHeight - SIZE);
    const key = hidden ? "hidden" : `${Math.round(x)},${Math.round(y)}`;
    if (key === e.last) return;
    e.last = key;
    e.el.style.display = hidden ? "none" : "flex";
    e.el.style.transform = `translate(${x}px, ${y}px)`;
  }

  function tick(): void {
    frame = 0;
    for (const e of [...entries.values()]) position(e);
    // The loop runs only while badges exist.
    if (entries.size > 0) frame = requestAnimationFrame(tick);
    else listen(false);
  }

  function remove(e: Entry): void {
    e.el.remove();
    if (e.target.element) observer?.unobserve(e.target.element);
    entries.delete(e.n);
  }

  function make(n: number): HTMLDivElement {
    const el = doc.createElement("div");
    el.setAttribute("part", "badge");
    el.setAttribute("data-spotpatch-badge", String(n));
    el.setAttribute("aria-hidden", "true");
    el.textContent = String(n);
    el.style.cssText =
      "position:fixed;left:0;top:0;pointer-events:none;z-index:2147483645;box-sizing:border-box;" +
      `width:${SIZE}px;height:${SIZE}px;border-radius:50%;display:none;align-items:center;justify-content:center;` +
      "font:600 12px/1 system-ui,sans-serif;color:#fff;background:#2563eb;border:2px solid #fff;" +
      "box-shadow:0 1px 4px rgba(0,0,0,.35);";
    layer.append(el);
    return el;
  }

  return {
    update(list) {
      const wanted = new Map(list.map((item) => [item.n, item.target]));
      for (const e of [...entries.values()]) {
        if (wanted.get(e.n) !== e.target) remove(e);
      }
      for (const [n, target] of wanted) {
        if (entries.has(n) || detached.has(target)) continue;
        const e: Entry = { n, target, el: make(n), last: "" };
        entries.set(n, e);
        if (entries.size === 1) listen(true);
        if (target.element) safe(() => observer?.observe(target.element as Element));
      }
      if (entries.size === 0) listen(false);
      for (const e of entries.values()) position(e);
      schedule();
    },
    destroy() {
      for (const e of [...entries.values()]) remove(e);
      if (frame) cancelAnimationFrame(frame);
      frame = 0;
      listen(false);
    },
  };
}

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    /* an element from a frame that went away */
  }
}
