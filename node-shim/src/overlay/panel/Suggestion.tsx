/**
 * The read-only suggestion lane on the page (docs/protocol.md "The suggestion lane"): for a job that failed
 * because its model cannot call tools, while the trusted config turns the lane on, a button asks the model
 * once (`job/suggest`). The draft is shown labelled as having changed nothing, with its outcome (a breaker
 * says partial), the excerpts it was given (paths and lines only), its citation check (unverified ones
 * listed), its diff check, and Copy. Every string from the engine is rendered as text.
 */
import type { Controller } from "./controller.js";

const SHOWN_UNVERIFIED = 10;

export function SuggestionBox({ ctl }: { ctl: Controller }) {
  const { t } = ctl;
  const job = ctl.state.job!;
  const suggestion = job.suggestion;
  if (!suggestion) {
    return (
      <section class="sp-col sp-note" aria-labelledby="sp-suggest-h" data-sp-suggestion="offer">
        <h3 id="sp-suggest-h" style="margin:0">
          {t("suggest.heading")}
        </h3>
        <p>{t("suggest.offer")}</p>
        <div class="sp-row">
          <button
            type="button"
            class="sp-btn"
            aria-disabled={job.suggesting ? "true" : undefined}
            onClick={() => void ctl.suggest()}
          >
            {t("suggest.ask")}
          </button>
          {job.suggesting && (
            <span class="sp-muted" role="status">
              <span class="sp-spin" aria-hidden="true" /> {t("suggest.asking")}
            </span>
          )}
        </div>
        {job.suggestionError && (
          <p class="sp-note sp-error" role="alert">
            {t("suggest.failed", { code: job.suggestionError.code, message: job.suggestionError.message })}
          </p>
        )}
      </section>
    );
  }
  const outcome =
    suggestion.outcome === "complete"
      ? t("suggest.outcome.complete")
      : suggestion.outcome === "partial"
        ? t("suggest.outcome.partial", { message: suggestion.message })
        : t("suggest.outcome.failed", {
            message: suggestion.error ? `${suggestion.error.code}: ${suggestion.error.message}` : suggestion.message,
          });
  const unverified = suggestion.citations.filter((c) => !c.verified).map((c) => c.ref);
  const excerpts = suggestion.excerpts.map((e) => `${e.path}:${e.startLine}-${e.endLine}`).join(", ");
  return (
    <section
      class="sp-col"
      aria-labelledby="sp-suggest-h"
      data-sp-suggestion={suggestion.outcome}
      data-sp-breaker={suggestion.breaker}
    >
      <div class="sp-row">
        <h3 id="sp-suggest-h" style="margin:0">
          {t("suggest.heading")}
        </h3>
        <span
          class="sp-status"
          data-tone={suggestion.outcome === "complete" ? "ok" : suggestion.outcome === "partial" ? "warn" : "bad"}
        >
          {t(`suggest.status.${suggestion.outcome}`)}
        </span>
      </div>
      <p class="sp-note sp-warn" role="note">
        <strong>{t("suggest.label")}</strong>
      </p>
      <p class="sp-muted">{t("suggest.from", { provider: suggestion.provider, model: suggestion.model })}</p>
      <p class={suggestion.outcome === "failed" ? "sp-note sp-error" : "sp-muted"}>{outcome}</p>
      <p class="sp-muted">{excerpts ? t("suggest.excerpts", { list: excerpts }) : t("suggest.excerptsNone")}</p>
      {suggestion.text && (
        <pre class="sp-output" tabIndex={0} aria-label={t("suggest.textLabel")}>
          {suggestion.text}
        </pre>
      )}
      <p class="sp-muted">
        {t("suggest.citations", { verified: suggestion.verified, unverified: suggestion.unverified })}
      </p>
      {unverified.length > 0 && (
        <p class="sp-note sp-warn">
          {t("suggest.unverified", {
            list:
              unverified.slice(0, SHOWN_UNVERIFIED).join(", ") + (unverified.length > SHOWN_UNVERIFIED ? ", …" : ""),
          })}
        </p>
      )}
      {suggestion.diff && (
        <p class={suggestion.diff.applies ? "sp-muted" : "sp-note sp-warn"}>
          {t("suggest.diff", {
            summary: t(suggestion.diff.applies ? "suggest.diff.applies" : "suggest.diff.notApplies"),
          })}
          {suggestion.diff.reason ? ` ${suggestion.diff.reason}` : ""}
        </p>
      )}
      <div class="sp-row">
        {suggestion.text && (
          <button type="button" class="sp-btn" onClick={() => void ctl.copySuggestion()}>
            {t("suggest.copy")}
          </button>
        )}
        <button
          type="button"
          class="sp-btn"
          aria-disabled={job.suggesting ? "true" : undefined}
          onClick={() => void ctl.suggest()}
        >
          {t("suggest.again")}
        </button>
      </div>
    </section>
  );
}
