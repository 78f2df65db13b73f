/**
 * The panel's own confirmations (never `window.confirm`): a question in the footer, the focus on the safe
 * choice, Esc = the safe choice (issue 26, invariant 8: nothing here applies or reverts).
 */
import type { Ref } from "preact";

import { withCode } from "./Composer.js";
import type { Controller } from "./controller.js";

/**
 * "New edit" (after Apply or Revert; "Dismiss" of a failed job) drops the job's targets and instructions: asked inside the panel (not window.confirm), with
 * the focus on Keep and Esc = keep. Nothing here applies or reverts (issue 26, invariant 8).
 */
export function NewEditConfirm({
  ctl,
  keep,
  onKeep,
  question = "job.newEditConfirm",
}: {
  ctl: Controller;
  keep: Ref<HTMLButtonElement>;
  onKeep: () => void;
  /** The question's i18n key: New edit after Apply or after Revert, Dismiss of a failed or cancelled job, or New
   *  edit of an applied job this tab has no targets of (another tab's: only the page's Revert is at stake). */
  question?: "job.newEditConfirm" | "job.revertedConfirm" | "job.dismissConfirm" | "job.closeAppliedConfirm";
}) {
  const { t } = ctl;
  const count = ctl.state.job?.input?.targets.length ?? 0;
  const jobOnly = question === "job.closeAppliedConfirm";
  return (
    <div
      class="sp-col"
      role="group"
      aria-labelledby="sp-confirm-q"
      data-sp-confirm=""
      onKeyDown={(e) => {
        if (e.key !== "Escape" || e.isComposing || e.keyCode === 229) return;
        e.preventDefault();
        e.stopPropagation(); // Esc keeps: the panel stays open
        onKeep();
      }}
    >
      <p id="sp-confirm-q" role="status">
        {withCode(t(question, { count, jobId: ctl.state.job?.jobId ?? "" }))}
      </p>
      <div class="sp-row">
        <button ref={keep} type="button" class="sp-btn sp-primary" onClick={onKeep}>
          {t(jobOnly ? "action.keepJob" : "action.keepTargets")}
        </button>
        <button type="button" class="sp-btn sp-danger" onClick={singleClick(() => void ctl.closeJob(false))}>
          {t(jobOnly ? "action.closeAppliedJob" : "action.dropTargets")}
        </button>
      </div>
    </div>
  );
}

/**
 * Apply, Revert and "Drop them" act on a single click only: the second click of a double-click (the system's
 * click count, `detail` 2 and up) is the user's habit, not a choice — and it lands on whatever replaced the
 * button just clicked (Revert where Apply was, "Drop them" where New edit was). Keyboard activation has
 * `detail` 0. Invariant 8: nothing the user did not ask for applies, reverts or drops.
 */
export function singleClick(act: () => void): (event: MouseEvent) => void {
  return (event) => {
    if (event.detail > 1) return;
    act();
  };
}
