/**
 * The trusted-auto consent dialog (its contract is in docs/node-shim.md): every consequence in
 * plain words, a checkbox, focus trapped inside, Esc closes (= no consent, back to review).
 */
import { useEffect, useRef, useState } from "preact/hooks";

import type { Controller } from "./controller.js";

const FOCUSABLE =
  'button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/** Keep Tab and Shift+Tab inside `root`; Esc calls `onEscape`. Returns the keydown handler. */
export function trapFocus(root: HTMLElement | null, event: KeyboardEvent, onEscape: () => void): void {
  if (event.key === "Escape") {
    if (event.isComposing || event.keyCode === 229) return; // the input method's own Esc
    event.preventDefault();
    event.stopPropagation();
    onEscape();
    return;
  }
  if (event.key !== "Tab" || !root) return;
  const items = [...root.querySelectorAll<HTMLElement>(FOCUSABLE)];
  if (!items.length) return;
  const first = items[0]!;
  const last = items[items.length - 1]!;
  const active = (root.getRootNode() as ShadowRoot).activeElement;
  if (event.shiftKey && (active === first || !root.contains(active))) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && (active === last || !root.contains(active))) {
    event.preventDefault();
    first.focus();
  }
}

export function ConsentDialog({ ctl }: { ctl: Controller }) {
  const consent = ctl.state.consent;
  const t = ctl.t;
  const [agreed, setAgreed] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  const checkbox = useRef<HTMLInputElement>(null);
  useEffect(() => {
    checkbox.current?.focus();
  }, []);
  if (!consent) return null;
  const provider = consent.providerName;
  return (
    <>
      <div class="sp-overlay-bg" aria-hidden="true" onClick={() => ctl.answerConsent(false)} />
      <div
        ref={box}
        class="sp-dialog"
        dir="ltr"
        role="dialog"
        aria-modal="true"
        aria-labelledby="sp-consent-title"
        aria-describedby="sp-consent-intro"
        onKeyDown={(e) => trapFocus(box.current, e, () => ctl.answerConsent(false))}
      >
        <h2 id="sp-consent-title">{t("consent.title", { provider })}</h2>
        <p id="sp-consent-intro">{t("consent.intro")}</p>
        <ul>
          <li>{t("consent.context", { provider })}</li>
          <li>{t("consent.checks")}</li>
          <li>{t("consent.direct")}</li>
          <li>{t("consent.revert")}</li>
        </ul>
        <p class="sp-muted">{t("consent.note")}</p>
        <label class="sp-check">
          <input
            ref={checkbox}
            type="checkbox"
            checked={agreed}
            onChange={(e) => setAgreed(e.currentTarget.checked)}
          />
          <span>{t("consent.checkbox", { provider })}</span>
        </label>
        <div class="sp-row">
          <button type="button" class="sp-btn sp-primary" disabled={!agreed} onClick={() => ctl.answerConsent(true)}>
            {t("consent.confirm")}
          </button>
          <button type="button" class="sp-btn" onClick={() => ctl.answerConsent(false)}>
            {t("action.cancel")}
          </button>
        </div>
      </div>
    </>
  );
}
