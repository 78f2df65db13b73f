/**
 * Visual evidence in the panel (issue 26): a picked target's thumbnail on its card, and the job's
 * before | after | pixel difference per target after Apply (and after Revert: the original again).
 * The pictures come from visual/evidence.ts and never leave the page's memory.
 */
import { useEffect, useRef } from "preact/hooks";

import type { PickedTarget } from "../picker/types.js";
import type { TargetVisual, VisualResult } from "../visual/evidence.js";
import type { Controller } from "./controller.js";

/** "12.3", "<0.1" for a change under a tenth of a percent, "0" for none. */
function percentText(v: TargetVisual): string {
  const d = v.diff;
  if (!d || d.changed === 0) return "0";
  return d.percent < 0.1 ? "<0.1" : d.percent.toFixed(1);
}

/** The picture taken when the target was picked (nothing while it is taken, or for a region). */
export function Thumb({ ctl, target, n }: { ctl: Controller; target: PickedTarget; n: number }) {
  const shot = ctl.evidence.shotOf(target);
  if (!shot) return null;
  return <img class="sp-thumb" src={shot.url} alt={ctl.t("visual.thumb", { n })} data-thumb={n} />;
}

/** Before | after | difference for each target of the job, once Apply (or Revert) updated the page. The block
 * is brought into view once per phase: it appears above where a user reading the diff has scrolled to. */
export function BeforeAfter({ ctl, visual }: { ctl: Controller; visual: VisualResult }) {
  const { t } = ctl;
  const applied = visual.phase === "applied";
  const section = useRef<HTMLElement>(null);
  useEffect(() => {
    section.current?.scrollIntoView({ block: "start" });
  }, [visual.phase]);
  return (
    <section ref={section} class="sp-col sp-visual" aria-labelledby="sp-visual-h" data-phase={visual.phase}>
      <h4 id="sp-visual-h" class="sp-visual-h">
        {t(applied ? "visual.heading" : "visual.headingReverted")}
      </h4>
      {visual.pending && (
        <p class="sp-muted" role="status">
          {t("visual.pending")}
        </p>
      )}
      {visual.targets.map((v) => (
        <figure key={v.n} class="sp-figure" data-visual={v.n}>
          <figcaption class="sp-muted">{t("visual.target", { n: v.n })}</figcaption>
          <div class="sp-ba">
            <div class="sp-ba-cell">
              <span class="sp-ba-label">{t("visual.before")}</span>
              {v.before ? (
                <img src={v.before.url} alt={t("visual.beforeAlt", { n: v.n })} data-shot="before" />
              ) : (
                <span class="sp-muted">{t("visual.noBefore")}</span>
              )}
            </div>
            <div class="sp-ba-cell">
              <span class="sp-ba-label">{t(applied ? "visual.after" : "visual.afterRevert")}</span>
              {v.after && <img src={v.after.url} alt={t("visual.afterAlt", { n: v.n })} data-shot="after" />}
              {v.missing && (
                <p class="sp-note sp-warn" role="status" data-missing="">
                  {t(applied ? "visual.missing" : "visual.missingReverted")}
                </p>
              )}
            </div>
            {v.diff && (
              <div class="sp-ba-cell">
                <span class="sp-ba-label">{t("visual.difference")}</span>
                <img src={v.diff.url} alt={t("visual.diffAlt", { n: v.n, percent: percentText(v) })} data-shot="diff" />
              </div>
            )}
          </div>
          {v.diff && (
            <p class="sp-muted" data-percent={percentText(v)}>
              {v.diff.changed
                ? t(applied ? "visual.changed" : "visual.changedReverted", { percent: percentText(v) })
                : t(applied ? "visual.unchanged" : "visual.original")}
            </p>
          )}
        </figure>
      ))}
    </section>
  );
}
