/**
 * The composer: pick controls, one card per target (summary, source → Open in editor, labelled
 * instruction box with its counter, remove), model and apply mode, repository health, Submit and
 * Copy prompt. Every page-derived string is rendered as text.
 */
import { useEffect, useRef } from "preact/hooks";

import type { ApplyMode, HealthDetail } from "../../protocol/protocol.generated.js";
import { hasKey } from "../i18n.js";
import type { Controller } from "./controller.js";
import { Iso } from "./Iso.js";
import { ChecksSandboxNote } from "./Sandbox.js";
import type { Draft } from "./state.js";
import { Thumb } from "./Visual.js";

export function Composer({ ctl }: { ctl: Controller }) {
  const { state, t } = ctl;
  const max = ctl.limits.maxTargets;
  return (
    <section aria-labelledby="sp-composer-h" class="sp-col">
      <PickBar ctl={ctl} />
      <h3 id="sp-composer-h">
        {t("composer.heading")}{" "}
        <span class="sp-muted">
          ({state.drafts.length}/{max})
        </span>
      </h3>
      {state.drafts.length === 0 ? (
        <p class="sp-muted">{t("composer.empty")}</p>
      ) : (
        <ol class="sp-cards">
          {state.drafts.map((draft, i) => (
            <Card key={draft.key} ctl={ctl} draft={draft} n={i + 1} />
          ))}
        </ol>
      )}
      {state.drafts.length >= max && <p class="sp-muted">{t("composer.max", { max })}</p>}
    </section>
  );
}

/**
 * Targets picked while a job is open (running or in review): their cards under the job, so a new target's
 * instruction box takes the focus and what the user types goes there — never into the job's Apply/Revert
 * (issue 26). They wait for the next job; Submit comes back with the composer.
 */
export function WaitingTargets({ ctl }: { ctl: Controller }) {
  const { state, t } = ctl;
  return (
    <section aria-labelledby="sp-waiting-h" class="sp-col" data-sp-waiting="">
      <h3 id="sp-waiting-h">
        {t("composer.waiting", { count: state.drafts.length })}
      </h3>
      <ol class="sp-cards">
        {state.drafts.map((draft, i) => (
          <Card key={draft.key} ctl={ctl} draft={draft} n={i + 1} />
        ))}
      </ol>
    </section>
  );
}

function PickBar({ ctl }: { ctl: Controller }) {
  const { state, t } = ctl;
  const full = state.drafts.length >= ctl.limits.maxTargets;
  const targetText = useRef<HTMLButtonElement>(null);
  const offered = state.hasSelection && !full;
  useEffect(() => {
    // Text just selected on the page: its button comes into view in a scrolled panel (issue 26).
    if (offered) targetText.current?.scrollIntoView({ block: "nearest" });
  }, [offered]);
  return (
    <div class="sp-col">
      <div class="sp-row" role="toolbar" aria-label={t("pick.toolbar")}>
        <button
          type="button"
          class="sp-btn"
          aria-pressed={state.picking === "element"}
          data-sp-pick-start=""
          disabled={full && state.picking !== "element"}
          onClick={() => (state.picking === "element" ? ctl.stopPick() : ctl.startPick("element"))}
        >
          {t("action.pick")}
        </button>
        <button
          type="button"
          class="sp-btn"
          aria-pressed={state.picking === "area"}
          disabled={full && state.picking !== "area"}
          onClick={() => (state.picking === "area" ? ctl.stopPick() : ctl.startPick("area"))}
        >
          {t("action.area")}
        </button>
        <button type="button" class="sp-btn" aria-pressed={state.paused} onClick={() => ctl.togglePause()}>
          {state.paused ? t("action.resume") : t("action.pause")}
        </button>
        {offered && (
          // mousedown would clear the page's selection before the click: keep it
          <button
            ref={targetText}
            type="button"
            class="sp-btn"
            onMouseDown={(e) => e.preventDefault()}
            onClick={() => ctl.targetSelection()}
          >
            {t("action.targetText")}
          </button>
        )}
      </div>
      <p class="sp-muted" aria-live="polite">
        {state.picking === "element"
          ? t("pick.hint")
          : state.picking === "area"
            ? t("pick.status.area")
            : t("pick.shortcut", { shortcut: ctl.options.shortcut })}
      </p>
    </div>
  );
}

function summary(draft: Draft) {
  const { target } = draft;
  const tag = target.label.tag || target.info.tagName;
  const text = (target.info.text ?? "").replace(/\s+/g, " ").trim().slice(0, 120);
  const attrs = Object.entries(target.info.attributes ?? {})
    .filter(([, v]) => v !== undefined && v !== "")
    .slice(0, 4)
    .map(([k, v]) => [k, String(v).slice(0, 60)] as const);
  return { tag, component: target.label.component, text, attrs };
}

function Card({ ctl, draft, n }: { ctl: Controller; draft: Draft; n: number }) {
  const { t } = ctl;
  const max = ctl.limits.maxInstructionChars;
  const box = useRef<HTMLTextAreaElement>(null);
  const id = `sp-instr-${draft.key}`;
  const { tag, component, text, attrs } = summary(draft);
  const source = draft.target.source;
  const region = draft.target.region;
  const area = draft.target.area;
  useEffect(() => {
    const request = ctl.focusRequest;
    if (request?.kind === "instruction" && request.key === draft.key) {
      ctl.focusRequest = null;
      box.current?.focus();
    }
  });
  const count = draft.instruction.length;
  const invalid = ctl.emptyInstructionsFlagged && !draft.instruction.trim();
  return (
    <li>
      <div class="sp-card" role="group" aria-labelledby={`sp-card-h-${draft.key}`}>
        <div class="sp-card-head">
          <span class="sp-num" aria-hidden="true">
            {n}
          </span>
          <span id={`sp-card-h-${draft.key}`} class="sp-visually-hidden">
            {t("composer.target", { n })}
          </span>
          <span class="sp-card-title sp-code">
            {area || (region && !draft.target.element && !source)
              ? t("composer.region", {
                  width: Math.round((area?.rect ?? region)?.width ?? 0),
                  height: Math.round((area?.rect ?? region)?.height ?? 0),
                })
              : (
                <>
                  &lt;<Iso>{tag}</Iso>&gt;{component && <> · <Iso>{component}</Iso></>}
                </>
              )}
          </span>
          <button
            type="button"
            class="sp-icon"
            aria-label={t("action.remove", { n })}
            title={t("action.remove", { n })}
            onClick={() => ctl.remove(draft.key)}
          >
            ×
          </button>
        </div>
        <Thumb ctl={ctl} target={draft.target} n={n} />
        {text && (
          <p class="sp-muted">
            “<Iso>{text}</Iso>”
          </p>
        )}
        {attrs.length > 0 && (
          <p class="sp-code sp-muted">
            {attrs.map(([k, v], i) => (
              <span key={k}>
                {i > 0 && " "}
                <Iso>{k}</Iso>=&quot;<Iso>{v}</Iso>&quot;
              </span>
            ))}
          </p>
        )}
        {draft.target.quote && (
          <p class="sp-quote">
            <span class="sp-visually-hidden">{t("composer.quote")}: </span>
            <Iso>{draft.target.quote}</Iso>
          </p>
        )}
        {source ? (
          <div class="sp-row">
            <span class="sp-code">
              <Iso>{source.file}</Iso>:{source.line}
            </span>
            <button type="button" class="sp-btn" onClick={() => void ctl.openInEditor(source)}>
              {t("action.openInEditor")}
            </button>
          </div>
        ) : (
          <p class="sp-muted">{t("composer.sourceUnknown")}</p>
        )}
        {area && area.elements && area.elements.length > 0 && (
          <div class="sp-code sp-muted" data-area-elements="">
            {t("composer.areaInside")}
            <ul class="sp-area-list">
              {area.elements.map((e, i) => (
                <li key={i}>
                  &lt;<Iso>{e.tagName}</Iso>&gt; <Iso>{e.source.file}</Iso>:{e.source.line}
                </li>
              ))}
            </ul>
          </div>
        )}
        {draft.target.usageChain && draft.target.usageChain.length > 0 && (
          <p class="sp-code sp-muted" data-usage-chain="">
            {t("composer.usedAt")}{" "}
            {draft.target.usageChain.map((u, i) => (
              <span key={i}>
                {i > 0 && " ← "}
                {u.component && (
                  <>
                    &lt;<Iso>{u.component}</Iso>&gt;{" "}
                  </>
                )}
                <Iso>{u.file}</Iso>:{u.line}
              </span>
            ))}
          </p>
        )}
        {draft.detached && (
          <p class="sp-note sp-warn" role="status">
            {t("composer.detached")}
          </p>
        )}
        <label class="sp-field" for={id}>
          <span>{t("composer.instruction", { n })}</span>
        </label>
        <textarea
          id={id}
          ref={box}
          value={draft.instruction}
          aria-describedby={invalid ? `${id}-err ${id}-count` : `${id}-count`}
          aria-invalid={invalid ? "true" : undefined}
          onInput={(e) => ctl.setInstruction(draft.key, e.currentTarget.value)}
        />
        {invalid && (
          <p id={`${id}-err`} class="sp-field-error">
            {t("composer.needInstruction")}
          </p>
        )}
        <span id={`${id}-count`} class="sp-counter" data-over={count > max ? "" : undefined}>
          {t("composer.counter", { count, max })}
        </span>
      </div>
    </li>
  );
}

/** Model, apply mode, repository health, and the Submit / Copy prompt actions (or why AI is off). */
export function SubmitArea({ ctl }: { ctl: Controller }) {
  const { state, t } = ctl;
  const modeSelect = useRef<HTMLSelectElement>(null);
  const hadConsent = useRef(false);
  useEffect(() => {
    if (hadConsent.current && !state.consent) modeSelect.current?.focus();
    hadConsent.current = !!state.consent;
  });
  const session = state.session;
  const ai = ctl.aiEnabled;
  const health = state.health;
  const blocked = health?.state === "blocked";
  const modes = session?.applyModes ?? ["review"];
  const anyProvider = state.providers.length > 0;
  // Local changes need the user's consent before a job may start from them (issue 26): Submit says why it waits.
  const needsConsent =
    health?.state === "consent-required" && !state.includeLocal && state.applyMode !== "trusted-auto";
  // An agent's job is always reviewed: it needs the consent whatever mode the model's job would use.
  const needsConsentAgent = health?.state === "consent-required" && !state.includeLocal;
  const agents = ctl.agentClients;
  return (
    <section class="sp-col" aria-label={t("action.submit")}>
      {ai ? (
        <div class="sp-row">
          <label class="sp-field">
            <span>{t("submit.model")}</span>
            <select value={state.modelId} onChange={(e) => ctl.setModel(e.currentTarget.value)}>
              {state.providers.map((provider) => (
                <optgroup key={provider.id} label={provider.displayName}>
                  {provider.models.map((model) => (
                    <option key={model.id} value={model.id} disabled={!provider.available}>
                      {provider.available ? model.displayName : t("submit.unavailable", { name: model.displayName })}
                    </option>
                  ))}
                </optgroup>
              ))}
            </select>
          </label>
          {modes.length > 1 && (
            <label class="sp-field">
              <span>{t("submit.mode")}</span>
              <select
                ref={modeSelect}
                value={state.applyMode}
                onChange={(e) => ctl.setMode(e.currentTarget.value as ApplyMode)}
              >
                {modes.map((mode) => (
                  <option key={mode} value={mode}>
                    {t(`submit.mode.${mode}`)}
                  </option>
                ))}
              </select>
            </label>
          )}
        </div>
      ) : agents.length > 0 ? (
        // An agent is attached: no model is needed, so nothing here is a warning.
        <p class="sp-muted" role="status">
          {t("ai.offAgent")}
        </p>
      ) : (
        <div class="sp-note sp-warn" role="status">
          <p>{anyProvider ? t("ai.offKey") : t("ai.off")}</p>
          <p class="sp-muted">{withCode(anyProvider ? t("ai.howToKey") : t("ai.howTo"))}</p>
        </div>
      )}
      {(ai || agents.length > 0) && <Health ctl={ctl} />}
      {ai && <ChecksSandboxNote ctl={ctl} />}
      <div class="sp-row">
        {ai && !blocked && (
          <button
            type="button"
            class="sp-btn sp-primary"
            disabled={!!state.job || state.loading || needsConsent}
            aria-describedby={needsConsent ? "sp-submit-why" : undefined}
            onClick={() => void ctl.submit()}
          >
            {t("action.submit")}
          </button>
        )}
        {agents.length > 0 && !blocked && (
          <button
            type="button"
            class={ai ? "sp-btn" : "sp-btn sp-primary"}
            disabled={!!state.job || state.loading || needsConsentAgent}
            aria-describedby="sp-agent-note"
            onClick={() => void ctl.submit(true)}
          >
            {t("action.sendToAgent")}
          </button>
        )}
        <button type="button" class="sp-btn" disabled={!state.drafts.length} onClick={() => void ctl.copyPrompt()}>
          {t("action.copyPrompt")}
        </button>
      </div>
      <p id="sp-submit-why" class="sp-muted" role="status">
        {!blocked && ((ai && needsConsent) || (agents.length > 0 && needsConsentAgent)) ? t("submit.needConsent") : ""}
      </p>
      {ctl.agentChannel && (
        <p id="sp-agent-note" class="sp-muted">
          {agents.length > 0 ? t("agent.connected", { names: agents.join(", ") }) : withCode(t("agent.howTo"))}
        </p>
      )}
    </section>
  );
}

/** The footer when no engine answers: Copy prompt only (the page builds the prompt itself). */
export function CopyOnly({ ctl }: { ctl: Controller }) {
  return (
    <div class="sp-row">
      <button type="button" class="sp-btn" disabled={!ctl.state.drafts.length} onClick={() => void ctl.copyPrompt()}>
        {ctl.t("action.copyPrompt")}
      </button>
    </div>
  );
}

function Health({ ctl }: { ctl: Controller }) {
  const { state, t } = ctl;
  const health = state.health;
  if (state.healthError)
    return (
      <p class="sp-note sp-warn" role="status">
        {t("health.unknown", { message: state.healthError })}
      </p>
    );
  if (!health) return null;
  if (health.state === "clean") {
    return (
      <p class="sp-muted" role="status">
        <span class="sp-label">{t("health.heading")} </span>
        {t("health.clean")}
      </p>
    );
  }
  if (health.state === "consent-required") {
    return (
      <div class="sp-note sp-warn" role="status">
        <p>{t("health.consent", { ...health.counts })}</p>
        {(health.details ?? []).map((detail) => (
          <HealthDetailView key={detail.reason} ctl={ctl} detail={detail} />
        ))}
        {state.applyMode === "trusted-auto" ? (
          <p class="sp-muted">{t("health.coveredByTrusted")}</p>
        ) : (
          <label class="sp-check">
            <input
              type="checkbox"
              checked={state.includeLocal}
              onChange={(e) => ctl.setIncludeLocal(e.currentTarget.checked)}
            />
            <span>{t("health.include")}</span>
          </label>
        )}
      </div>
    );
  }
  return (
    <div class="sp-note sp-error" role="alert">
      <p>{t("health.blocked")}</p>
      <ul>
        {health.reasons.map((reason) => {
          const key = `reason.${reason}`;
          const detail = health.details?.find((d) => d.reason === reason);
          return (
            <li key={reason}>
              {hasKey(key) ? t(key) : reason}
              {detail && <HealthDetailView ctl={ctl} detail={detail} />}
            </li>
          );
        })}
      </ul>
    </div>
  );
}

/** What one health reason is about: its project-relative paths (at most 20 from the engine, the rest
 * counted) and the engine's fix, as text with its `code` spans as <code> elements (docs/configuration.md
 * "Repository health"). */
function HealthDetailView({ ctl, detail }: { ctl: Controller; detail: HealthDetail }) {
  const { t } = ctl;
  return (
    <div class="sp-health-detail">
      {detail.paths.length > 0 && (
        <p>
          <span class="sp-label">{t("health.paths")} </span>
          {detail.paths.map((p, i) => (
            <span key={p}>
              {i > 0 && ", "}
              <Iso class="sp-code">{p}</Iso>
            </span>
          ))}
          {detail.morePaths > 0 && <span>{t("health.morePaths", { n: detail.morePaths })}</span>}
        </p>
      )}
      <p>
        <span class="sp-label">{t("health.fix")} </span>
        {withCode(detail.fix)}
      </p>
    </div>
  );
}

/** `text` with its Markdown code spans (`` `.venv/` ``) as <code> elements; text nodes only, never markup. */
export function withCode(text: string) {
  return text.split(/`([^`\n]+)`/).map((part, i) => (i % 2 ? <code key={i}>{part}</code> : part));
}
