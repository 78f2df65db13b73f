/**
 * `pauseAnimations`: freeze the page so transient states can be picked, and put back exactly what ran.
 *
 * Per same-origin document (the top one and its same-origin iframes, see dom.ts):
 * - one injected `<style>` pauses every CSS animation (`animation-play-state: paused !important`, so its
 *   removal gives each animation back its own play state) and makes transitions that start later instant
 *   (`transition-duration/delay: 0s`; running ones are not cancelled, so nothing jumps), on every element
 *   except SpotPatch's host; removed on resume;
 * - every running CSS transition and Web Animation of `document.getAnimations()` is paused with
 *   `pause()`; `resume()` calls `play()` on exactly those (animations the page had paused stay paused;
 *   SpotPatch's own, inside its host, are never touched);
 * - every playing `<video>`/`<audio>` is paused; resume plays those again (a rejected `play()` is ignored);
 * - SVG SMIL animations (`svg.pauseAnimations()`) are paused and unpaused the same way.
 * Limits: the page's own shadow roots are reached by `getAnimations()` but not by the injected style.
 */
import { HOST_TAG, isOverlay, queryAll, safe, sameOriginDocuments } from "./dom.js";

const STYLE_ATTR = "data-spotpatch-pause";
const CSS =
  `:where(*:not(${HOST_TAG})), :where(*:not(${HOST_TAG}))::before, :where(*:not(${HOST_TAG}))::after {` +
  " animation-play-state: paused !important; transition-duration: 0s !important; transition-delay: 0s !important; }";

export function pauseAnimations(doc: Document = document): { resume(): void } {
  const undo: (() => void)[] = [];
  for (const d of sameOriginDocuments(doc)) undo.push(pauseDocument(d));
  let done = false;
  return {
    resume() {
      if (done) return;
      done = true;
      for (const fn of undo.reverse()) safe(fn, undefined);
    },
  };
}

function pauseDocument(doc: Document): () => void {
  const animations = safe(() => doc.getAnimations(), [] as Animation[]);
  const paused: Animation[] = [];
  for (const a of animations) {
    const target = safe(() => (a.effect as KeyframeEffect | null)?.target ?? null, null);
    if (target && isOverlay(target)) continue;
    // CSS animations are paused by the style below, which restores their own play state when removed.
    if ("animationName" in a) continue;
    if (safe(() => a.playState, "idle") !== "running") continue;
    if (safe(() => (a.pause(), true), false)) paused.push(a);
  }
  const style = doc.createElement("style");
  style.setAttribute(STYLE_ATTR, "");
  style.textContent = CSS;
  safe(() => (doc.head ?? doc.documentElement).append(style), undefined);

  const media: HTMLMediaElement[] = [];
  for (const m of queryAll(doc, "video, audio") as HTMLMediaElement[]) {
    if (safe(() => !m.paused && !m.ended, false)) {
      safe(() => m.pause(), undefined);
      media.push(m);
    }
  }
  const svgs: SVGSVGElement[] = [];
  for (const s of queryAll(doc, "svg") as SVGSVGElement[]) {
    if (typeof s.pauseAnimations === "function" && safe(() => !s.animationsPaused(), false)) {
      safe(() => s.pauseAnimations(), undefined);
      svgs.push(s);
    }
  }
  return () => {
    style.remove();
    for (const a of paused) safe(() => a.play(), undefined);
    for (const m of media) safe(() => void m.play()?.catch(() => {}), undefined);
    for (const s of svgs) safe(() => s.unpauseAnimations(), undefined);
  };
}
