// Mounts the picker alone (no panel) the way the overlay does: a <spotpatch-overlay> host with an open
// shadow root and a layer. Keys (outside pick mode): P starts pick mode, A starts area mode, K pauses or
// resumes animations, S targets the selected text, B hides or shows the badges (as the panel does on
// close / open). Results go to window.__picks / #out (text only).
import { createBadges, createPicker, pauseAnimations, targetFromSelection, type PickedTarget } from "spotpatch-picker";

const host = document.createElement("spotpatch-overlay");
host.setAttribute("style", "all: initial !important; position: fixed !important; top: 0 !important; left: 0 !important; width: 0 !important; height: 0 !important; z-index: 2147483647 !important; display: block !important;");
const shadow = host.attachShadow({ mode: "open" });
const layer = document.createElement("div");
shadow.append(layer);
document.documentElement.append(host);

type Out = { stay: boolean; targets: Omit<PickedTarget, "element">[]; ids: (string | null)[] };
const w = window as unknown as {
  __picks: Out[];
  __exits: number;
  __detached: number[];
  __rebound: { n: number; location: string | null; same: boolean }[];
  __paused: boolean;
  __picker: unknown;
};
w.__picks = [];
w.__exits = 0;
w.__detached = [];
w.__rebound = [];
w.__paused = false;
const all: PickedTarget[] = [];
const badges = createBadges(
  layer,
  (n) => w.__detached.push(n),
  (n, target) => w.__rebound.push({ n, location: target.label.location ?? null, same: all[n - 1] === target }),
);
let badgesShown = true;
const out = document.getElementById("out")!;

function record(targets: PickedTarget[], stay: boolean): void {
  w.__picks.push({
    stay,
    ids: targets.map((t) => (t.element ? t.element.id || t.element.localName : null)),
    targets: targets.map(({ element: _e, ...rest }) => rest),
  });
  all.push(...targets);
  badges.update(all.map((target, i) => ({ n: i + 1, target })));
  out.textContent = JSON.stringify(w.__picks.map((p) => p.ids));
}

const picker = createPicker({
  layer,
  onPick: (targets, { stay }) => record(targets, stay),
  onExit: () => void w.__exits++,
  t: (key) => key,
});
w.__picker = picker;
let paused: { resume(): void } | null = null;

window.addEventListener("keydown", (e) => {
  if (picker.active || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "p") picker.start();
  else if (e.key === "a") picker.start("area");
  else if (e.key === "k") {
    if (paused) {
      paused.resume();
      paused = null;
    } else paused = pauseAnimations();
    w.__paused = !!paused;
  } else if (e.key === "b") {
    badgesShown = !badgesShown;
    badges.setVisible(badgesShown);
  } else if (e.key === "s") {
    const target = targetFromSelection(getSelection());
    if (target) record([target], false);
  }
});
// Alt+click outside pick mode, as the loader does it.
window.addEventListener("click", (e) => {
  if (!e.altKey || picker.active) return;
  const target = picker.pickFromEvent(e);
  if (target) record([target], false);
}, true);
