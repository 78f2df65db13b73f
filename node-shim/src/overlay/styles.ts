/**
 * The panel's own stylesheet (adopted by the shadow root, so no page rule reaches it and none of it
 * reaches the page). Light and dark follow `prefers-color-scheme`; `prefers-reduced-motion` turns every
 * transition and animation off. Focus is always visible.
 */
export const PANEL_CSS = `
.sp-app { all: initial; display: contents; direction: ltr; unicode-bidi: isolate; }
[data-sp-iso] { unicode-bidi: isolate; }
.sp-app, .sp-app * { box-sizing: border-box; }
.sp-panel, .sp-dialog, .sp-pill {
  --sp-bg: #ffffff; --sp-fg: #111827; --sp-muted: #4b5563; --sp-border: #d1d5db; --sp-soft: #f3f4f6;
  --sp-accent: #4338ca; --sp-accent-fg: #ffffff; --sp-danger: #b91c1c; --sp-ok: #047857; --sp-warn: #92400e;
  --sp-warn-bg: #fef3c7; --sp-danger-bg: #fee2e2; --sp-ok-bg: #d1fae5; --sp-focus: #f59e0b;
  color-scheme: light;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "PingFang SC", "Microsoft YaHei", sans-serif;
  color: var(--sp-fg); text-align: left; letter-spacing: normal; text-transform: none; white-space: normal;
}
@media (prefers-color-scheme: dark) {
  .sp-panel, .sp-dialog, .sp-pill {
    --sp-bg: #111827; --sp-fg: #f3f4f6; --sp-muted: #d1d5db; --sp-border: #374151; --sp-soft: #1f2937;
    --sp-accent: #818cf8; --sp-accent-fg: #111827; --sp-danger: #fca5a5; --sp-ok: #6ee7b7; --sp-warn: #fcd34d;
    --sp-warn-bg: #3b2f0b; --sp-danger-bg: #3f1212; --sp-ok-bg: #063b2c; --sp-focus: #fbbf24;
    color-scheme: dark;
  }
}
.sp-panel {
  position: fixed; top: 12px; right: 12px; bottom: 12px; width: min(440px, calc(100vw - 24px));
  display: flex; flex-direction: column; background: var(--sp-bg); border: 1px solid var(--sp-border);
  border-radius: 12px; box-shadow: 0 12px 40px rgba(0,0,0,.3); overflow: hidden; z-index: 2;
  transition: opacity .15s ease, transform .15s ease;
}
.sp-panel[data-wide] { width: min(720px, calc(100vw - 24px)); }
/* Placement (panel/Dock.tsx): the width or height comes inline from the placement; the separator sits on the inner edge. */
.sp-panel[data-dock="left"] { right: auto; left: 12px; }
.sp-panel[data-dock="bottom"] { top: auto; left: 12px; right: 12px; width: auto !important; }
/* The hover look is an opacity change on the separator's own layer: no repaint of the page under it (a repaint
   on a 5,000-element page cost ~7 ms paint + layerize per crossing in pick mode; scripts/bench-overlay.mjs). */
.sp-sep { position: absolute; z-index: 3; touch-action: none; background: var(--sp-accent); opacity: 0; will-change: opacity; }
.sp-panel[data-dock="right"] .sp-sep { left: 0; top: 0; bottom: 0; width: 8px; cursor: ew-resize; }
.sp-panel[data-dock="left"] .sp-sep { right: 0; top: 0; bottom: 0; width: 8px; cursor: ew-resize; }
.sp-panel[data-dock="bottom"] .sp-sep { left: 0; right: 0; top: 0; height: 8px; cursor: ns-resize; }
.sp-sep:hover, .sp-sep:focus-visible { opacity: .6; }
.sp-sep:focus-visible { outline-offset: -3px; opacity: 1; }
.sp-menu-wrap { position: relative; }
.sp-menu-wrap > .sp-icon { display: inline-flex; align-items: center; min-height: 30px; }
.sp-dock-icon { display: block; }
.sp-menu { position: absolute; right: 0; top: calc(100% + 4px); z-index: 4; min-width: 220px; max-width: 300px; padding: 4px;
  background: var(--sp-bg); border: 1px solid var(--sp-border); border-radius: 8px; box-shadow: 0 8px 24px rgba(0,0,0,.25); }
.sp-panel:has(.sp-menu) { overflow: visible; } /* the open menu may reach past the panel (up from a bottom dock) */
.sp-menu[data-up] { top: auto; bottom: calc(100% + 4px); }
.sp-menu ul { list-style: none; margin: 0; padding: 0; }
.sp-menu [role^="menuitem"] { display: flex; width: 100%; gap: 6px; align-items: center; padding: 6px 8px; border: none; border-radius: 6px;
  background: none; cursor: pointer; text-align: start; min-height: 32px; }
.sp-menu [role^="menuitem"]:hover, .sp-menu [role^="menuitem"]:focus { background: var(--sp-soft); }
.sp-menu-check { display: inline-block; width: 1em; }
.sp-menu-help { padding: 6px 8px 4px; border-top: 1px solid var(--sp-border); margin-top: 4px !important; font-size: 12px; }
.sp-pill {
  position: fixed; z-index: 2; display: inline-flex; align-items: center; gap: 8px; max-width: 260px; min-height: 40px; padding: 6px 14px;
  border-radius: 999px; border: 1px solid var(--sp-border); background: var(--sp-bg); color: var(--sp-fg); cursor: pointer;
  box-shadow: 0 6px 20px rgba(0,0,0,.3); font-weight: 600;
}
.sp-pill[data-corner="bottom-right"] { right: 12px; bottom: 12px; }
.sp-pill[data-corner="bottom-left"] { left: 12px; bottom: 12px; }
.sp-pill[data-corner="top-right"] { right: 12px; top: 12px; }
.sp-pill[data-corner="top-left"] { left: 12px; top: 12px; }
.sp-pill-status { font-weight: 400; color: var(--sp-muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.sp-pill-dot { width: 10px; height: 10px; border-radius: 50%; background: var(--sp-muted); flex: none; }
.sp-pill[data-tone="ok"] .sp-pill-dot { background: var(--sp-ok); }
.sp-pill[data-tone="bad"] .sp-pill-dot { background: var(--sp-danger); }
.sp-pill[data-tone="warn"] .sp-pill-dot { background: var(--sp-warn); }
details > summary { cursor: pointer; font-weight: 600; font-size: 13px; }
.sp-head { display: flex; align-items: center; gap: 8px; padding: 10px 12px; border-bottom: 1px solid var(--sp-border); }
.sp-head h2 { font-size: 16px; margin: 0; flex: 1; font-weight: 700; }
.sp-body { flex: 1; overflow: auto; padding: 12px; display: flex; flex-direction: column; gap: 12px; }
.sp-foot { padding: 10px 12px; border-top: 1px solid var(--sp-border); display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.sp-panel h3 { font-size: 14px; margin: 0 0 6px; font-weight: 700; }
.sp-panel p { margin: 0; }
.sp-muted { color: var(--sp-muted); font-size: 13px; }
.sp-row { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.sp-row.sp-grow { flex: 1 1 auto; }
.sp-col { display: flex; flex-direction: column; gap: 6px; }
button, select, textarea, input { font: inherit; color: inherit; }
.sp-btn {
  display: inline-flex; align-items: center; gap: 4px; padding: 6px 12px; border-radius: 8px; cursor: pointer;
  border: 1px solid var(--sp-border); background: var(--sp-soft); color: var(--sp-fg); min-height: 32px;
}
.sp-btn:hover { filter: brightness(0.96); }
.sp-btn[disabled], .sp-btn[aria-disabled="true"] { opacity: .55; cursor: not-allowed; }
.sp-btn[aria-pressed="true"] { background: var(--sp-accent); color: var(--sp-accent-fg); border-color: var(--sp-accent); }
.sp-primary { background: var(--sp-accent); color: var(--sp-accent-fg); border-color: var(--sp-accent); font-weight: 600; }
.sp-danger { color: var(--sp-danger); }
.sp-link { background: none; border: none; padding: 0 2px; color: var(--sp-accent); text-decoration: underline; cursor: pointer; min-height: 0; }
.sp-icon { background: none; border: 1px solid transparent; border-radius: 6px; padding: 2px 8px; cursor: pointer; font-size: 18px; line-height: 1; }
:focus-visible { outline: 3px solid var(--sp-focus) !important; outline-offset: 2px; }
/* A heading that takes the focus (the panel opened from the keyboard) is underlined, not ringed like a field. */
.sp-panel h2[tabindex="-1"]:focus-visible, .sp-panel h3[tabindex="-1"]:focus-visible {
  outline: none !important; text-decoration: underline 3px var(--sp-focus); text-underline-offset: 4px;
}
.sp-newest { position: sticky; bottom: 0; align-self: center; box-shadow: 0 2px 8px rgba(0,0,0,.25); }
select, textarea, input[type="text"] {
  background: var(--sp-bg); border: 1px solid var(--sp-border); border-radius: 6px; padding: 6px 8px; max-width: 100%;
}
textarea { width: 100%; min-height: 64px; resize: vertical; }
label { cursor: pointer; }
.sp-field { display: flex; flex-direction: column; gap: 4px; }
.sp-field > span, .sp-label { font-weight: 600; font-size: 13px; }
.sp-cards { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 10px; }
.sp-card { border: 1px solid var(--sp-border); border-radius: 10px; padding: 10px; display: flex; flex-direction: column; gap: 6px; }
.sp-card-head { display: flex; align-items: center; gap: 8px; }
.sp-thumb { align-self: flex-start; max-width: 100%; max-height: 96px; object-fit: contain; border: 1px dashed var(--sp-border); border-radius: 6px; padding: 4px; background: #fff; }
.sp-visual-h { margin: 0; font-size: 14px; }
.sp-figure { margin: 0; display: flex; flex-direction: column; gap: 6px; }
.sp-ba { display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start; }
.sp-ba-cell { display: flex; flex-direction: column; gap: 4px; flex: 1 1 120px; min-width: 0; }
.sp-ba-cell img { max-width: 100%; max-height: 160px; object-fit: contain; align-self: flex-start; border: 1px solid var(--sp-border); border-radius: 6px; background: #fff; }
.sp-ba-label { font-size: 12px; font-weight: 600; color: var(--sp-muted); }
.sp-num { display: inline-flex; align-items: center; justify-content: center; min-width: 22px; height: 22px; border-radius: 11px;
  background: var(--sp-accent); color: var(--sp-accent-fg); font-weight: 700; font-size: 12px; padding: 0 6px; }
.sp-card-title { flex: 1; font-weight: 600; overflow-wrap: anywhere; }
.sp-area-list { margin: 2px 0 0; padding-left: 16px; }
.sp-code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.sp-note code, .sp-health-detail code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.sp-quote { border-left: 3px solid var(--sp-accent); padding-left: 8px; white-space: pre-wrap; overflow-wrap: anywhere; }
/* A config's 120-character provider or model name (or any long unbroken word) wraps inside the panel. */
.sp-panel p { overflow-wrap: anywhere; }
.sp-note { padding: 8px 10px; border-radius: 8px; background: var(--sp-soft); overflow-wrap: anywhere; }
.sp-warn { background: var(--sp-warn-bg); color: var(--sp-fg); }
/* A notice (Copy prompt / Open in editor confirmations, refusals) stays in view in a scrolled body (issue 26). */
.sp-notice { position: sticky; top: 0; z-index: 3; box-shadow: 0 2px 8px rgba(0,0,0,.25); }
.sp-error { background: var(--sp-danger-bg); color: var(--sp-fg); }
.sp-okbox { background: var(--sp-ok-bg); color: var(--sp-fg); }
.sp-flag { border-left: 4px solid var(--sp-warn); display: flex; flex-direction: column; gap: 4px; }
.sp-flag[data-tone="bad"] { border-left-color: var(--sp-danger); }
p.sp-flag { display: block; }
.sp-flag-icon { font-weight: 700; }
.sp-marks { display: inline-flex; flex-wrap: wrap; gap: 4px; align-items: center; vertical-align: baseline; font-weight: 400; }
.sp-field-error { color: var(--sp-danger); font-size: 13px; font-weight: 600; }
textarea[aria-invalid="true"] { border-color: var(--sp-danger); border-width: 2px; }
.sp-counter { font-size: 12px; color: var(--sp-muted); align-self: flex-end; }
.sp-counter[data-over] { color: var(--sp-danger); font-weight: 700; }
.sp-timeline { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 4px; }
.sp-timeline li { display: flex; gap: 8px; font-size: 13px; padding: 2px 0; overflow-wrap: anywhere; }
.sp-timeline .sp-kind { flex: none; width: 1.2em; text-align: center; }
.sp-nowrap { white-space: nowrap; }
.sp-msg { white-space: pre-wrap; max-height: 10em; overflow: auto; }
.sp-status { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; background: var(--sp-soft); }
.sp-status[data-tone="ok"] { background: var(--sp-ok-bg); color: var(--sp-ok); }
.sp-status[data-tone="bad"] { background: var(--sp-danger-bg); color: var(--sp-danger); }
.sp-status[data-tone="warn"] { background: var(--sp-warn-bg); color: var(--sp-warn); }
.sp-files { list-style: none; margin: 0; padding: 0; }
.sp-files li { display: flex; gap: 8px; justify-content: space-between; font-size: 13px; }
.sp-audit { list-style: none; margin: 0; padding: 0; gap: 2px; }
.sp-audit li { font-size: 13px; overflow-wrap: anywhere; min-width: 0; }
.sp-add { color: var(--sp-ok); } .sp-del { color: var(--sp-danger); }
.sp-output { margin: 4px 0 0; padding: 6px 8px; max-height: 12em; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere;
  background: var(--sp-soft); border-radius: 6px; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.sp-diff { position: relative; max-height: 50vh; overflow: auto; border: 1px solid var(--sp-border); border-radius: 8px; font-size: 12px; }
/* diff2html's dim and label colours measure 2.0–4.1:1; these reach ≥ 4.5:1 on every background of the diff,
   light and dark (node-shim/test/overlay/overlay-legibility.test.mjs, finding 1). */
.sp-diff {
  --d2h-dim-color: #4b5563; --d2h-change-label-color: #854d0e; --d2h-ins-label-color: #166534;
  --d2h-del-label-color: #b91c1c; --d2h-moved-label-color: #1d4ed8;
  --d2h-dark-dim-color: #9ca3af; --d2h-dark-change-label-color: #fcd34d; --d2h-dark-ins-label-color: #6ee7b7;
  --d2h-dark-del-label-color: #fca5a5; --d2h-dark-moved-label-color: #93c5fd;
}
.sp-diff .d2h-wrapper { text-align: left; }
.sp-diff .d2h-file-wrapper { margin-bottom: 0; border-radius: 0; }
.sp-diff .d2h-file-header { position: sticky; top: 0; left: 0; z-index: 2; }
.sp-diff .d2h-file-diff { overflow: visible; } /* one scroller (.sp-diff, focusable) for both directions */
.sp-overlay-bg { position: fixed; inset: 0; background: rgba(0,0,0,.45); z-index: 10; }
.sp-dialog {
  position: fixed; z-index: 11; top: 50%; left: 50%; transform: translate(-50%, -50%); width: min(480px, calc(100vw - 24px));
  max-height: calc(100vh - 24px); overflow: auto; background: var(--sp-bg); border: 1px solid var(--sp-border);
  border-radius: 12px; padding: 16px; box-shadow: 0 16px 48px rgba(0,0,0,.4); display: flex; flex-direction: column; gap: 10px;
}
.sp-dialog h2 { margin: 0; font-size: 17px; }
.sp-dialog ul { margin: 0; padding-left: 20px; display: flex; flex-direction: column; gap: 4px; }
.sp-check { display: flex; gap: 8px; align-items: flex-start; }
.sp-check input { margin-top: 3px; width: 16px; height: 16px; }
.sp-visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.sp-layer { position: fixed; inset: 0; pointer-events: none; z-index: 1; direction: ltr; }
.sp-spin { display: inline-block; width: 10px; height: 10px; border: 2px solid currentColor; border-right-color: transparent; border-radius: 50%; animation: sp-spin 0.8s linear infinite; }
@keyframes sp-spin { to { transform: rotate(360deg); } }
@media (prefers-reduced-motion: reduce) {
  .sp-app *, .sp-app *::before, .sp-app *::after { animation: none !important; transition: none !important; scroll-behavior: auto !important; }
}
`;
