/**
 * Visual evidence of a job (issue 26): each picked element's picture when it is picked (its card's
 * thumbnail, and the picture a vision model may receive), then after Apply — once HMR has updated the
 * page — the same element again, re-found by its source location, with the pixel difference; after
 * Revert, once more (the original again). Pictures live in this page's memory only: never in storage,
 * a log or an event; the engine receives them with job/create and keeps them for the job only.
 */
import type { SpotAnnotation } from "../../protocol/protocol.generated.js";
import { HOST_TAG } from "../picker/dom.js";
import type { PickedTarget } from "../picker/types.js";
import { mapLine, refind } from "./locate.js";
import { MAX_JOB_IMAGE_BYTES, capture, pixelDiff, type PixelDiff, type Shot } from "./shots.js";

export type { PixelDiff, Shot } from "./shots.js";

export interface TargetVisual {
  /** The target's number (1, 2, …). */
  n: number;
  before: Shot | null;
  /** The re-found element's picture after Apply or Revert; null while pending, or when it is missing. */
  after: Shot | null;
  /** Nothing renders from the target's source location any more. */
  missing: boolean;
  diff: PixelDiff | null;
}

export interface VisualResult {
  phase: "applied" | "reverted";
  /** Waiting for the page to update, or taking the pictures. */
  pending: boolean;
  targets: TargetVisual[];
}

/** The page is settled once this long passed without a DOM change after the first one. */
const QUIET_MS = 400;
/** With no DOM change at all after the status arrived, the page is taken as it is after this long. */
const FIRST_CHANGE_MS = 2500;
/** Never wait longer than this for a page that keeps changing (an animation). */
const MAX_WAIT_MS = 8000;
/** How long Submit waits for pictures still being taken. */
const ATTACH_WAIT_MS = 1000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** DOM changes of the page (not the overlay's own host): when the last one happened. */
class PageWatch {
  private observer: MutationObserver;
  last = 0;

  constructor() {
    this.observer = new MutationObserver((records) => {
      const own = (n: Node) => n instanceof Element && n.localName === HOST_TAG;
      if (records.every((r) => own(r.target) || [...r.addedNodes, ...r.removedNodes].some(own))) return;
      this.last = performance.now();
    });
    this.observer.observe(document.documentElement, {
      subtree: true,
      childList: true,
      attributes: true,
      characterData: true,
    });
  }

  stop(): void {
    this.observer.disconnect();
  }

  /** Resolves once the page is quiet after a change (see the constants above), counting from now. */
  async settled(): Promise<void> {
    const start = performance.now();
    for (;;) {
      const now = performance.now();
      if (now - start >= MAX_WAIT_MS) break;
      if (this.last ? now - this.last >= QUIET_MS : now - start >= FIRST_CHANGE_MS) break;
      await sleep(100);
    }
    this.observer.disconnect();
  }
}

export class Evidence {
  private shots = new WeakMap<PickedTarget, Shot>();
  private taking = new WeakMap<PickedTarget, Promise<Shot | null>>();
  private watch: PageWatch | null = null;

  /** `changed`: a picture arrived (the panel re-renders). */
  constructor(private readonly changed: () => void) {}

  /** The target's picture from when it was picked, once taken. */
  shotOf(target: PickedTarget): Shot | undefined {
    return this.shots.get(target);
  }

  /** Take the picture of each newly picked target (region targets have none). */
  take(targets: PickedTarget[]): void {
    for (const target of targets) {
      if (!target.element || this.taking.has(target)) continue;
      const el = target.element;
      // After the pick has been drawn: the clone work never delays the card or the highlight.
      const taking = new Promise((resolve) => setTimeout(resolve, 0)).then(() => capture(el)).then((shot) => {
        if (shot) {
          this.shots.set(target, shot);
          this.changed();
        }
        return shot;
      });
      this.taking.set(target, taking);
    }
  }

  /**
   * Give the annotation's targets (in the order of `targets`) their pictures for a vision model, while the
   * job's total stays within MAX_JOB_IMAGE_BYTES (later targets go without). The engine sends them only to
   * a model profile whose vision the probe proved.
   */
  async attach(annotation: SpotAnnotation, targets: PickedTarget[]): Promise<void> {
    const taking = targets.map((t) => this.taking.get(t) ?? Promise.resolve(null));
    await Promise.race([Promise.all(taking), sleep(ATTACH_WAIT_MS)]);
    let total = 0;
    targets.forEach((target, i) => {
      const image = this.shots.get(target)?.image;
      const entry = annotation.targets[i];
      if (!image || !entry || total + image.bytes > MAX_JOB_IMAGE_BYTES) return;
      total += image.bytes;
      entry.image = { mediaType: image.mediaType, data: image.data };
    });
  }

  /** Before Apply or Revert: start watching the page for the update HMR brings. */
  expectUpdate(): void {
    this.watch ??= new PageWatch();
  }

  /** Apply or Revert was refused: nothing will update the page. */
  stopWatch(): void {
    this.watch?.stop();
    this.watch = null;
  }

  /**
   * After Apply (`diff`: the job's diff, to follow each target's line) or Revert (`diff` null: the
   * baseline's lines again): wait for the page to settle, re-find each target, take its picture at the
   * before picture's scale and compare. `publish` receives the result as it fills in.
   */
  async compare(
    phase: VisualResult["phase"],
    targets: PickedTarget[],
    diff: string | null,
    publish: (result: VisualResult) => void,
  ): Promise<void> {
    const rows: TargetVisual[] = targets.map((target, i) => ({
      n: i + 1,
      before: this.shots.get(target) ?? null,
      after: null,
      missing: false,
      diff: null,
    }));
    if (!rows.some((r) => r.before)) {
      this.stopWatch(); // nothing to compare with (a reload lost the pictures)
      return;
    }
    publish({ phase, pending: true, targets: rows });
    const watch = this.watch ?? new PageWatch();
    this.watch = null;
    await watch.settled();
    for (const [i, target] of targets.entries()) {
      const row = rows[i]!;
      if (!row.before) continue;
      const line = target.source && diff ? mapLine(diff, target.source.file, target.source.line) : target.source?.line;
      const el = refind(target, line ?? null);
      const after = el ? await capture(el, row.before.scale) : null;
      rows[i] = after ? { ...row, after, diff: pixelDiff(row.before, after) } : { ...row, missing: true };
    }
    publish({ phase, pending: false, targets: rows });
  }
}
