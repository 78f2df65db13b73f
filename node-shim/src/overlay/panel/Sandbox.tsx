/**
 * Whether checks run in the sandbox (issue 14), in the panel's words: the health area's line from
 * `session/get`'s `checksSandbox` (confined quietly; unavailable with `warn` as a warning, with `required`
 * as an alert that checks cannot run), and each check's own mark in the review and the timeline
 * (`CheckEvent.sandbox` / `network`). The engine's `reason` is plain text (path-free) and rendered as text.
 */
import type { CheckEvent, ChecksSandbox } from "../../protocol/protocol.generated.js";
import type { Controller } from "./controller.js";

/** The health area's line; nothing when the session has no `checksSandbox` (no checks configured). */
export function ChecksSandboxNote({ ctl }: { ctl: Controller }) {
  const { t } = ctl;
  const sandbox: ChecksSandbox | undefined = ctl.state.session?.checksSandbox;
  if (!sandbox) return null;
  if (sandbox.state === "confined") {
    return (
      <p class="sp-muted" role="status">
        <span class="sp-label">{t("sandbox.heading")} </span>
        {sandbox.mechanism ? t("sandbox.confined", { mechanism: sandbox.mechanism }) : t("sandbox.confinedPlain")}
      </p>
    );
  }
  const required = sandbox.policy === "required";
  return (
    <div
      class={`sp-note sp-flag ${required ? "sp-error" : "sp-warn"}`}
      data-tone={required ? "bad" : "warn"}
      role={required ? "alert" : "status"}
    >
      <p>
        <span class="sp-flag-icon" aria-hidden="true">
          ⚠
        </span>{" "}
        <strong>{t(required ? "sandbox.requiredTitle" : "sandbox.warnTitle")}</strong>
      </p>
      <p>{t(required ? "sandbox.requiredBody" : "sandbox.warnBody")}</p>
      {sandbox.reason && <p class="sp-msg">{t("sandbox.reason", { reason: sandbox.reason })}</p>}
    </div>
  );
}

/**
 * A check's sandbox marks: "sandboxed" quietly, "ran without the sandbox" and "ran with network access"
 * as warning pills. Nothing for a skipped check or an event without `sandbox` (older engine).
 */
export function CheckSandboxMarks({ ctl, check }: { ctl: Controller; check: CheckEvent }) {
  const { t } = ctl;
  if (check.status === "skipped" || (!check.sandbox && !check.network)) return null;
  return (
    <span class="sp-marks">
      {check.sandbox === "confined" && <span class="sp-muted">{t("check.sandboxed")}</span>}
      {check.sandbox === "unconfined" && (
        <span class="sp-status" data-tone="warn">
          <span aria-hidden="true">⚠ </span>
          {t("check.unconfined")}
        </span>
      )}
      {check.network && (
        <span class="sp-status" data-tone="warn">
          {t("check.network")}
        </span>
      )}
    </span>
  );
}

/** The review's warning above the checks when any of them ran without the sandbox. */
export function UnconfinedChecksNote({ ctl, checks }: { ctl: Controller; checks: CheckEvent[] }) {
  const { t } = ctl;
  const count = checks.filter((c) => c.sandbox === "unconfined" && c.status !== "skipped").length;
  if (!count) return null;
  return (
    <p class="sp-note sp-warn sp-flag" data-tone="warn" role="note">
      <span class="sp-flag-icon" aria-hidden="true">
        ⚠
      </span>{" "}
      {t("review.unconfined", { count })}
    </p>
  );
}
