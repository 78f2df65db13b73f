/**
 * A job on the page: live timeline (status, tool activity, bounded model messages, checks, elapsed time)
 * with Cancel; review (provider and model names, what the agent read per target, files with +/-, the full
 * diff, checks) with Apply and Back to edit (docs/node-shim.md "States"); Revert after Apply; failures with
 * their diagnostics (the error once) and Copy prompt, never shown as passed.
 */
import type { JSX } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

import type { AuditTargetSummary, CheckEvent, JobEventNotification, JobStatus } from "../../protocol/protocol.generated.js";
import { hasKey } from "../i18n.js";
import { NewEditConfirm, singleClick } from "./Confirm.js";
import type { Controller } from "./controller.js";
import { withCode } from "./Composer.js";
import { DiffView } from "./Diff.js";
import { Iso } from "./Iso.js";
import { CheckSandboxMarks, UnconfinedChecksNote } from "./Sandbox.js";
import { ACTIVE, AGENT_PROFILE_ID, RUNNING, canSuggest, formatElapsed, providerOfModel, timelineOf } from "./state.js";
import { SuggestionBox } from "./Suggestion.js";
import { BeforeAfter } from "./Visual.js";

const MESSAGE_SHOWN = 1200;

function tone(status: JobStatus): "ok" | "bad" | "warn" | undefined {
  if (status === "applied" || status === "awaiting-review" || status === "reverted") return "ok";
  if (status === "failed") return "bad";
  if (status === "cancelled" || status === "closed") return "warn";
  return undefined;
}

export function JobPanel({ ctl }: { ctl: Controller }) {
  const { t } = ctl;
  const job = ctl.state.job!;
  const { snapshot } = job;
  const status = snapshot.status;
  const active = ACTIVE.has(status);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [active]);
  const elapsed = (job.endedAt ?? (active ? now : Date.parse(snapshot.updatedAt) || now)) - job.startedAt;
  const names = providerOfModel(ctl.state.providers, snapshot.modelProfileId);
  // A job sent to the user's own agent (job/create agent: true) runs under the engine's "mcp" profile.
  const agentJob = snapshot.modelProfileId === AGENT_PROFILE_ID;
  const checks = job.events.filter((e): e is CheckEvent => e.kind === "check");
  const fellBack = status === "awaiting-review" && snapshot.applyMode !== "review";
  // A job that ends (review, failed, cancelled) opens at its top: the timeline had scrolled the body to its
  // newest row, which left the status and the summary above the view (newcomer finding).
  const top = useRef<HTMLHeadingElement>(null);
  const ended = status === "awaiting-review" || status === "failed" || status === "cancelled";
  useEffect(() => {
    if (ended) top.current?.scrollIntoView({ block: "start" });
  }, [ended]);

  return (
    <section class="sp-col" aria-labelledby="sp-job-h">
      <div class="sp-row">
        <h3 ref={top} id="sp-job-h" tabIndex={-1} style="margin:0">
          {t("job.heading")}
        </h3>
        <span class="sp-status" data-tone={tone(status)} role="status">
          {active && <span class="sp-spin" aria-hidden="true" />} {ctl.statusText(status)}
        </span>
        <span class="sp-muted">{t("job.elapsed", { time: formatElapsed(elapsed, (s) => t("job.seconds", { s })) })}</span>
      </div>
      {names && (
        <p class="sp-muted">
          {t("job.model", { provider: names.provider.displayName, model: names.model.displayName })}
        </p>
      )}
      {agentJob && <p class="sp-muted">{t("job.agent")}</p>}
      {agentJob && active && !job.events.some((e) => e.kind === "activity") && (
        <p class="sp-note" role="status">
          {t("job.agentWaiting")}
        </p>
      )}
      <p class="sp-muted">{t("job.mode", { mode: t(`submit.mode.${snapshot.applyMode}`) })}</p>

      {/* Closed once the job failed: its error is shown once, in the note below (issue 26). */}
      <Timeline ctl={ctl} events={job.events} open={active} />

      {job.actionError && <ActionError ctl={ctl} code={job.actionError.code} message={job.actionError.message} />}

      {status === "failed" && (
        <div class="sp-note sp-error" role="alert">
          <p>{t("job.failedNote")}</p>
          {snapshot.error && (
            <p class="sp-code">{t("job.error", { code: snapshot.error.code, message: snapshot.error.message })}</p>
          )}
          {!snapshot.error && snapshot.message && <p class="sp-code">{snapshot.message}</p>}
        </div>
      )}
      {canSuggest(ctl.state.session, job) && <SuggestionBox ctl={ctl} />}
      {status === "cancelled" && (
        <p class="sp-note" role="status">
          {t("job.cancelled")}
        </p>
      )}
      {status === "applied" && (
        <p class="sp-note sp-okbox" role="status">
          {t("job.applied")}
        </p>
      )}
      {status === "reverted" && (
        <p class="sp-note sp-okbox" role="status">
          {t("job.reverted")}
        </p>
      )}
      {job.visual && <BeforeAfter ctl={ctl} visual={job.visual} />}
      {fellBack && snapshot.message && <p class="sp-note sp-warn">{`${t("job.fellBack")} ${snapshot.message}`}</p>}

      {(status === "awaiting-review" ||
        status === "applied" ||
        status === "reverted" ||
        (status === "failed" && (checks.length > 0 || snapshot.files.length > 0 || !!job.diff?.diff))) && (
        <Review ctl={ctl} checks={checks} failed={status === "failed"} />
      )}
    </section>
  );
}

/**
 * Apply and Revert act on a key pressed on them, never on a held key's auto-repeat: a key that went down
 * before they had the focus (Enter held on Submit, Space held in an instruction) must not reach them
 * (issue 26). The browser activates a button on Enter's keydown and on Space's keyup after its keydown.
 */
function ignoreRepeat(event: KeyboardEvent): void {
  if (event.repeat && (event.key === "Enter" || event.key === " ")) event.preventDefault();
}

/**
 * The job's action buttons (the panel's footer, always in view). Each has its own key: a status change
 * never turns the button under the focus into Apply or Revert, and the focus never moves onto them by
 * itself (App's fallback skips the footer).
 */
export function JobActions({ ctl }: { ctl: Controller }) {
  const { t } = ctl;
  const job = ctl.state.job!;
  const status = job.snapshot.status;
  const active = ACTIVE.has(status);
  const [confirming, setConfirming] = useState(false);
  const newEdit = useRef<HTMLButtonElement>(null);
  const keep = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  // A layout effect: the focus moves in the same task as the question renders, so no key pressed the moment it
  // appears reaches the body (an Esc meant to keep went nowhere).
  useLayoutEffect(() => {
    // Into the question: the safe choice (keep) has the focus; out of it: back on New edit, never on Revert.
    if (confirming) keep.current?.focus();
    else if (wasConfirming.current) newEdit.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);
  const closing = status === "failed" || status === "cancelled";
  // Closing the job drops its targets and instructions: asked first whenever the job had them.
  const asks = status === "applied" || status === "reverted" || closing;
  if (confirming && asks)
    return (
      <NewEditConfirm
        ctl={ctl}
        keep={keep}
        onKeep={() => setConfirming(false)}
        question={
          closing
            ? "job.dismissConfirm"
            : status === "reverted"
              ? "job.revertedConfirm"
              : job.input
                ? "job.newEditConfirm"
                : "job.closeAppliedConfirm"
        }
      />
    );
  const busy = job.busy ? "true" : undefined;
  return (
    <>
      {/* Grows to the footer's width, so "far end" below is the footer's far end in every dock. */}
      <div class="sp-row sp-grow" role="group" aria-label={t("job.heading")}>
        {RUNNING.has(status) && (
          // At the row's far end: Apply appears at its start when the review arrives, so a click aimed at Cancel
          // while the job ends never lands on Apply (invariant 8).
          <button
            key="cancel-run"
            type="button"
            class="sp-btn sp-danger"
            style="margin-inline-start:auto"
            aria-disabled={busy}
            onClick={() => void ctl.cancel()}
          >
            {t("action.cancel")}
          </button>
        )}
        {status === "awaiting-review" && (
          <button
            key="apply"
            type="button"
            class="sp-btn sp-primary"
            aria-disabled={busy}
            onKeyDown={ignoreRepeat}
            onClick={singleClick(() => void ctl.apply())}
          >
            {t("action.apply")}
          </button>
        )}
        {status === "awaiting-review" && !job.input && (
          // Another tab's job: nothing to edit back here, so the one way out is Cancel (nothing is applied).
          <button key="cancel-review" type="button" class="sp-btn" aria-disabled={busy} onClick={() => void ctl.cancel()}>
            {t("action.cancel")}
          </button>
        )}
        {status === "applied" && (
          <button
            key="revert"
            type="button"
            class="sp-btn sp-primary"
            aria-disabled={busy}
            onKeyDown={ignoreRepeat}
            onClick={singleClick(() => void ctl.revert())}
          >
            {t("action.revert")}
          </button>
        )}
        {(status === "awaiting-review" || status === "reverted" || closing) && job.input && (
          <button key="back" type="button" class="sp-btn" aria-disabled={busy} onClick={() => void ctl.closeJob(true)}>
            {t("action.backToEdit")}
          </button>
        )}
        {(status === "failed" || status === "cancelled") && job.input && (
          // A failed job still leaves the user a way to take the targets elsewhere (issue 26).
          <button key="copy" type="button" class="sp-btn" onClick={() => void ctl.copyPrompt()}>
            {t("action.copyPrompt")}
          </button>
        )}
        {!active && status !== "awaiting-review" && (
          <button
            key="close"
            ref={newEdit}
            type="button"
            class="sp-btn"
            aria-disabled={busy}
            onClick={singleClick(() =>
              // Asked when targets would be dropped, and always before an applied job closes: closing ends the
              // page's Revert (newcomer finding: another tab's applied job closed on one Enter).
              asks && (job.input || status === "applied") ? setConfirming(true) : void ctl.closeJob(false),
            )}
            title={status === "applied" ? t("job.closeWarning") : undefined}
          >
            {status === "failed" || status === "cancelled" ? t("action.dismiss") : t("action.newEdit")}
          </button>
        )}
      </div>
      {status === "applied" && <p class="sp-muted">{t("job.closeWarning")}</p>}
    </>
  );
}

function ActionError({ ctl, code, message }: { ctl: Controller; code: string; message: string }) {
  const { t } = ctl;
  const text =
    code === "APPLY_CONFLICT" || code === "REVERT_CONFLICT"
      ? t(`conflict.${code}`, { message: message.replace(/[.\s]+$/, "") })
      : code === "JOB_NOT_FOUND"
        ? message
        : t("conflict.other", { code, message });
  return (
    <p class="sp-note sp-error" role="alert">
      {text}
    </p>
  );
}

function Timeline({ ctl, events, open }: { ctl: Controller; events: JobEventNotification[]; open: boolean }) {
  const { t } = ctl;
  const items = timelineOf(events);
  const list = useRef<HTMLOListElement>(null);
  // The timeline flows in the panel's body (no box of its own): the newest row is kept in view while the
  // user has not scrolled up, and never while they type (a waiting target's box) (issue 26).
  const pinned = useRef(true);
  // Scrolled up while rows arrive: a "Newest ↓" button brings the newest row back (and follows again).
  const [away, setAway] = useState(false);
  const toNewest = () => {
    const last = list.current?.lastElementChild;
    const body = list.current?.closest<HTMLElement>(".sp-body");
    if (!last || !body) return;
    const below = last.getBoundingClientRect().bottom - body.getBoundingClientRect().bottom;
    if (below > 0) body.scrollTop += below + 4;
  };
  useEffect(() => {
    const body = list.current?.closest<HTMLElement>(".sp-body");
    if (!body) return;
    // The user's intent, not the position: a scroll event can land after rows were added (then the end
    // moved away without the user), so only a scroll up unpins and only reaching the end pins again.
    let lastTop = body.scrollTop;
    const onScroll = () => {
      if (body.scrollTop < lastTop - 2) pinned.current = false;
      if (body.scrollTop + body.clientHeight >= body.scrollHeight - 24) pinned.current = true;
      lastTop = body.scrollTop;
      if (pinned.current) setAway(false);
    };
    body.addEventListener("scroll", onScroll);
    return () => body.removeEventListener("scroll", onScroll);
  }, []);
  useEffect(() => {
    const typing = (list.current?.getRootNode() as ShadowRoot | undefined)?.activeElement?.matches("textarea, input, select");
    if (!open) return;
    if (!pinned.current || typing) {
      const last = list.current?.lastElementChild;
      const body = list.current?.closest<HTMLElement>(".sp-body");
      const below = !!last && !!body && last.getBoundingClientRect().top > body.getBoundingClientRect().bottom - 8;
      if (below !== away) setAway(below);
      return;
    }
    toNewest();
  }); // after every render: a row can also grow in place (a tool call's outcome replaces its start)
  return (
    <details class="sp-col" open={open}>
      <summary id="sp-timeline-h">
        {t("job.timeline")} ({items.length})
      </summary>
      <div role="log" aria-labelledby="sp-timeline-h">
        <ol ref={list} class="sp-timeline" tabIndex={0} aria-labelledby="sp-timeline-h">
          {items.map((event) => (
            <li key={event.seq}>{describe(ctl, event)}</li>
          ))}
        </ol>
      </div>
      {open && away && (
        <button
          type="button"
          class="sp-btn sp-newest"
          onClick={() => {
            pinned.current = true;
            setAway(false);
            toNewest();
          }}
        >
          {t("job.newest")}
        </button>
      )}
    </details>
  );
}

function describe(ctl: Controller, event: JobEventNotification) {
  const { t } = ctl;
  switch (event.kind) {
    case "status":
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            ●
          </span>
          <span>
            <strong>
              {event.status === "running" && ctl.state.job?.snapshot.modelProfileId === AGENT_PROFILE_ID
                ? t("job.status.agentWaiting")
                : t(`job.status.${event.status}`)}
            </strong>
            {event.message && event.status !== "awaiting-review" ? ` — ${event.message.slice(0, MESSAGE_SHOWN)}` : ""}
          </span>
        </>
      );
    case "activity": {
      const what = (
        <>
          <Iso>{event.tool}</Iso>
          {event.path && (
            <>
              {" "}
              <Iso>{event.path}</Iso>
            </>
          )}
        </>
      );
      if (event.phase === "started") {
        return (
          <>
            <span class="sp-kind" aria-hidden="true">
              …
            </span>
            <span class="sp-code">{withNode(t("job.activity.started", { tool: "\u0000" }), what)}</span>
          </>
        );
      }
      const outcome = event.ok
        ? t("job.activity.ok")
        : event.errorCode
          ? t("job.activity.error", { code: event.errorCode })
          : t("job.activity.failed");
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            {event.ok ? "✓" : "✗"}
          </span>
          <span class="sp-code">
            {what} · <span class="sp-nowrap">{t("job.ms", { ms: event.durationMs ?? 0 })}</span> ·{" "}
            <span class={`sp-nowrap ${event.ok ? "sp-add" : "sp-del"}`}>{outcome}</span>
          </span>
        </>
      );
    }
    case "message":
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            ✎
          </span>
          <span class="sp-msg">
            <span class="sp-visually-hidden">
              {t(ctl.state.job?.snapshot.modelProfileId === AGENT_PROFILE_ID ? "job.agentMessage" : "job.message")}:{" "}
            </span>
            {event.text.length > MESSAGE_SHOWN ? `${event.text.slice(0, MESSAGE_SHOWN)}…` : event.text}
          </span>
        </>
      );
    case "check":
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            {event.ok ? "✓" : "✗"}
          </span>
          <span>
            {withNode(t("job.check", { name: "\u0000", status: t(`review.check.${event.status}`) }), <Iso>{event.name}</Iso>)} ·{" "}
            {t("job.ms", { ms: event.durationMs })} <CheckSandboxMarks ctl={ctl} check={event} />
          </span>
        </>
      );
    case "diff":
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            ±
          </span>
          <span>
            {t("review.files")}: {event.files.length}
          </span>
        </>
      );
    case "error":
      return (
        <>
          <span class="sp-kind" aria-hidden="true">
            !
          </span>
          <span class="sp-del">{t("job.error", { code: event.error.code, message: event.error.message })}</span>
        </>
      );
  }
}

/** A translated line with `node` where its one NUL placeholder was (a name shown isolated, never as markup). */
function withNode(text: string, node: JSX.Element) {
  const [before, ...after] = text.split("\u0000");
  return (
    <>
      {before}
      {after.length > 0 && node}
      {after.join("")}
    </>
  );
}

/** One line per target from the audit ledger: did the agent read the offered file, which lines, before it wrote. */
function AuditLines({ ctl, targets }: { ctl: Controller; targets: AuditTargetSummary[] }) {
  const { t } = ctl;
  const PATH = "\u0000"; // where the path goes in the translated line (shown as code)
  const line = (target: AuditTargetSummary): string => {
    const vars = { index: target.index, path: PATH };
    if (!target.path) return t("audit.noSource", vars);
    if (!target.read) return t("audit.notRead", vars);
    const lines = { ...vars, start: target.lines?.start ?? "?", end: target.lines?.end ?? "?" };
    const text = t(target.readBeforeFirstWrite ? "audit.readBefore" : "audit.readAfter", lines);
    const notes: string[] = [];
    if (target.line != null && !target.lineCovered) notes.push(t("audit.lineMissed", { line: target.line }));
    if (target.contentSha256Match === false) notes.push(t("audit.changed"));
    return notes.length ? `${text} (${notes.join("; ")})` : text;
  };
  return (
    <div class="sp-col" data-sp-audit>
      <h4 class="sp-label" style="margin:0">
        {t("audit.heading")}
      </h4>
      <ul class="sp-audit sp-col">
        {targets.map((target) => {
          const [before, ...after] = line(target).split(PATH);
          return (
            <li key={target.index}>
              <span>
                {before}
                {after.length > 0 && <Iso class="sp-code">{target.path}</Iso>}
                {after.join("")}
              </span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

function Review({ ctl, checks, failed }: { ctl: Controller; checks: CheckEvent[]; failed: boolean }) {
  const { t } = ctl;
  const job = ctl.state.job!;
  const files = job.diff?.files ?? job.snapshot.files;
  // The model's final text: the message of the first `awaiting-review` (later ones carry refusals).
  const finalMessage = job.events.find((e) => e.kind === "status" && e.status === "awaiting-review" && e.message);
  const finalText = finalMessage?.kind === "status" && job.snapshot.status !== "failed" ? finalMessage.message : undefined;
  return (
    <section class="sp-col" aria-labelledby="sp-review-h">
      <h3 id="sp-review-h">{t("review.heading")}</h3>
      {finalText && <p class="sp-msg sp-note">{finalText.slice(0, 4000)}</p>}
      {failed && files.length > 0 && <p class="sp-muted">{t("job.failedDiff")}</p>}
      {files.length > 0 && (
        <div>
          <h4 class="sp-label" style="margin:0 0 4px">
            {t("review.files")}
          </h4>
          <ul class="sp-files">
            {files.map((file) => (
              <li key={file.path}>
                <Iso class="sp-code">{file.path}</Iso>
                <span class="sp-code">
                  <span class="sp-add">+{file.added}</span> <span class="sp-del">−{file.removed}</span>
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
      {job.audit && job.audit.length > 0 && <AuditLines ctl={ctl} targets={job.audit} />}
      {job.diff &&
        (job.diff.diff ? (
          <DiffView diff={job.diff.diff} label={t("review.diff")} t={t} />
        ) : (
          !failed && <p class="sp-muted">{t("review.noDiff")}</p>
        ))}
      <div class="sp-col">
        <h4 class="sp-label" style="margin:0">
          {t("review.checks")}
        </h4>
        {checks.length === 0 ? (
          // Without configured checks the session has no `checksSandbox`: say so plainly, not as a failure.
          <p class="sp-muted" data-sp-no-checks="">
            {ctl.state.session && !ctl.state.session.checksSandbox
              ? withCode(t("review.noChecksConfigured"))
              : t("review.noChecks")}
          </p>
        ) : (
          <>
          <UnconfinedChecksNote ctl={ctl} checks={checks} />
          <ul class="sp-files sp-col">
            {checks.map((check) => (
              <li key={check.seq} class="sp-col" style="align-items:stretch">
                <div class="sp-row" style="justify-content:space-between">
                  <span>
                    <strong>
                      <Iso>{check.name}</Iso>
                    </strong>
                    {check.required ? ` (${t("review.required")})` : ""}{" "}
                    <CheckSandboxMarks ctl={ctl} check={check} />
                  </span>
                  <span
                    class="sp-status"
                    data-tone={check.status === "passed" ? "ok" : check.status === "skipped" ? "warn" : "bad"}
                  >
                    {hasKey(`review.check.${check.status}`) ? t(`review.check.${check.status}`) : check.status} ·{" "}
                    {t("job.ms", { ms: check.durationMs })}
                  </span>
                </div>
                {check.output && (
                  <pre class="sp-output" tabIndex={0} aria-label={t("review.output", { name: check.name })}>
                    {check.output}
                  </pre>
                )}
              </li>
            ))}
          </ul>
          </>
        )}
      </div>
    </section>
  );
}
