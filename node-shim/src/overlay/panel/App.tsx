/**
 * The panel's shell: header (title, language, close), connection and crash-repair notices, then either
 * the composer or the current job, and the consent dialog. Esc closes the panel (pick mode and dialogs
 * handle their own Esc first).
 */
import { useEffect, useRef, useState } from "preact/hooks";

import { LANGS, type Lang } from "../i18n.js";
import { Composer, CopyOnly, SubmitArea, WaitingTargets } from "./Composer.js";
import type { Controller } from "./controller.js";
import { ConfigProblem } from "./ConfigProblem.js";
import { ConsentDialog } from "./Dialog.js";
import { PlacementLive, PlacementMenu, Pill, Separator, usePlacement } from "./Dock.js";
import { JobActions, JobPanel } from "./Job.js";
import { PlacementStore } from "./placement.js";
import { ACTIVE } from "./state.js";

export function App({ ctl }: { ctl: Controller }) {
  const [, setVersion] = useState(0);
  useEffect(() => ctl.subscribe(() => setVersion((n) => n + 1)), [ctl]);
  const { state, t } = ctl;
  const heading = useRef<HTMLHeadingElement>(null);
  const panel = useRef<HTMLElement>(null);
  const lastFocus = useRef<HTMLElement | null>(null);
  // Docked right / left / bottom, resized, or collapsed to the pill; off the picked elements (Dock.tsx).
  const [placement] = useState(() => new PlacementStore(ctl.options.projectKey));
  const wide = !!state.job && !ACTIVE.has(state.job.snapshot.status) && !!state.job.diff?.diff;
  const layout = usePlacement(ctl, placement, wide);
  useEffect(() => {
    if (state.open && ctl.focusRequest?.kind === "panel") {
      ctl.focusRequest = null;
      heading.current?.focus();
      return;
    }
    // The focused control went away (Submit → the job, Apply → Revert, the panel closed and reopened, the
    // composer replaced by a restored job): move the focus to a safe place, never to an action. Apply and
    // Revert above all: a keystroke meant for an instruction must never reach them (issue 26, invariant 8).
    const root = panel.current?.getRootNode() as ShadowRoot | undefined;
    if (!root || state.consent) return;
    if (!lastFocus.current || lastFocus.current.isConnected || root.activeElement) return;
    // The user has since moved on to the page (a field of theirs has the focus): leave it there.
    if (document.activeElement && document.activeElement !== document.body) return;
    lastFocus.current = null;
    const next = panel.current && safeFocusTarget(panel.current);
    (next ?? heading.current)?.focus();
    if (next instanceof HTMLTextAreaElement) next.setSelectionRange(next.value.length, next.value.length);
  });
  if (!state.open) return null;
  const live = <PlacementLive store={placement} lang={state.lang} />;
  if (layout.collapsed)
    return (
      <>
        <Pill ctl={ctl} store={placement} layout={layout} />
        {live}
        {state.consent && <ConsentDialog ctl={ctl} />}
      </>
    );
  return (
    <>
      <aside
        ref={panel}
        onFocusIn={(e) => {
          lastFocus.current = e.target as HTMLElement;
        }}
        class="sp-panel"
        role="complementary"
        aria-labelledby="sp-title"
        lang={state.lang}
        dir="ltr"
        data-wide={wide ? "" : undefined}
        data-dock={layout.dock}
        style={layout.dock === "bottom" ? { height: `${layout.size}px` } : { width: `${layout.size}px` }}
        onKeyDown={(e) => {
          // Esc closes (drafts are kept), except while an input method is composing: there it cancels the
          // composition only.
          if (e.key !== "Escape" || e.isComposing || e.keyCode === 229 || state.picking) return;
          e.preventDefault();
          // While the consent dialog is open, Esc anywhere in the panel means "no consent" (also in the
          // moment before focus has moved into the dialog).
          if (state.consent) ctl.answerConsent(false);
          else ctl.close();
        }}
      >
        <div class="sp-head">
          <h2 id="sp-title" ref={heading} tabIndex={-1}>
            {t("panel.title")}
          </h2>
          <label>
            <span class="sp-visually-hidden">{t("panel.language")}</span>
            <select
              value={state.lang}
              onChange={(e) => ctl.setLang(e.currentTarget.value as Lang)}
            >
              {LANGS.map((lang) => (
                <option key={lang.id} value={lang.id} lang={lang.id}>
                  {lang.name}
                </option>
              ))}
            </select>
          </label>
          <PlacementMenu ctl={ctl} store={placement} layout={layout} />
          <button
            type="button"
            class="sp-icon"
            aria-label={t("panel.close")}
            title={t("panel.close")}
            onClick={() => ctl.close()}
          >
            ×
          </button>
        </div>
        <div class="sp-body">
          {state.disconnected && (
            <p class="sp-note sp-error" role="alert">
              {t("panel.disconnected")}
            </p>
          )}
          {state.recovered.length > 0 && <Recovered ctl={ctl} />}
          {state.sessionError && (
            <p class="sp-note sp-error" role="alert">
              {t("panel.sessionError", { message: state.sessionError })}
            </p>
          )}
          {state.loading && !state.sessionError && <p class="sp-muted">{t("panel.loading")}</p>}
          {state.notice && (
            <div
              class={`sp-note sp-notice ${state.notice.tone === "error" ? "sp-error" : state.notice.tone === "ok" ? "sp-okbox" : ""}`}
              role={state.notice.tone === "error" ? "alert" : "status"}
            >
              <span>{state.notice.text}</span>{" "}
              {/* Named apart from a failed job's Dismiss, which may be in the footer at the same time. */}
              <button type="button" class="sp-link" aria-label={t("action.dismissMessage")} onClick={() => ctl.setNotice(null)}>
                {t("action.dismiss")}
              </button>
            </div>
          )}
          {ctl.options.configProblem ? (
            <ConfigProblem ctl={ctl} />
          ) : state.job ? (
            <>
              <JobPanel ctl={ctl} />
              {state.drafts.length > 0 && <WaitingTargets ctl={ctl} />}
            </>
          ) : (
            <Composer ctl={ctl} />
          )}
        </div>
        {ctl.options.configProblem ? null : state.job ? (
          <div class="sp-foot">
            <JobActions ctl={ctl} />
          </div>
        ) : (
          !state.loading && (
            <div class="sp-foot">
              {/* No engine at all: Copy prompt still takes the targets elsewhere (issue 26). */}
              {state.sessionError ? <CopyOnly ctl={ctl} /> : <SubmitArea ctl={ctl} />}
            </div>
          )
        )}
        <Separator ctl={ctl} store={placement} layout={layout} />
      </aside>
      {live}
      {state.consent && <ConsentDialog ctl={ctl} />}
    </>
  );
}

/**
 * Where the focus goes when the focused control went away: the newest target's instruction box (composer
 * or targets waiting under a job), else the job's heading; null for the panel's own heading. Never a
 * button of the footer: Apply and Revert are reached only by the user (issue 26).
 */
function safeFocusTarget(panel: HTMLElement): HTMLElement | null {
  const boxes = panel.querySelectorAll<HTMLTextAreaElement>(".sp-body textarea[id^='sp-instr-']");
  return boxes[boxes.length - 1] ?? panel.querySelector<HTMLElement>("#sp-job-h");
}

function Recovered({ ctl }: { ctl: Controller }) {
  const { t } = ctl;
  return (
    <div class="sp-note sp-warn" role="status">
      <p>
        <strong>{t("recovered.title")}</strong>
      </p>
      <ul>
        {ctl.state.recovered.map((report) => (
          <li key={`${report.jobId}:${report.operation}`}>
            {t(`recovered.${report.outcome}`, {
              paths: (report.outcome === "needs-attention" ? report.unresolvedPaths : report.paths).join(", ") || "—",
            })}
          </li>
        ))}
      </ul>
      <button type="button" class="sp-link" aria-label={t("action.dismissMessage")} onClick={() => ctl.dismissRecovered()}>
        {t("action.dismiss")}
      </button>
    </div>
  );
}
