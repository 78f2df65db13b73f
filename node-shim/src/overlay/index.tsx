/**
 * The overlay, loaded on first open (docs/node-shim.md "The overlay"): the Preact panel, the picker
 * layer and the diff view, rendered inside the loader's open shadow root with constructable stylesheets
 * (the panel's own and diff2html's), so the page's styles never reach it and it never touches the page's.
 */
import diffCss from "diff2html/bundles/css/diff2html.min.css?inline";
import { render } from "preact";

import { App } from "./panel/App.js";
import { Controller } from "./panel/controller.js";
import { PANEL_CSS } from "./styles.js";
import type { OverlayContext, OverlayHandle } from "../protocol/overlay.js";

export type { OverlayContext, OverlayHandle, OverlayOptions } from "../protocol/overlay.js";

export function mountOverlay(ctx: OverlayContext): OverlayHandle {
  const root = ctx.host.shadowRoot ?? ctx.host.attachShadow({ mode: "open" });
  const sheets = [diffCss, PANEL_CSS].map((css) => {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    return sheet;
  });
  root.adoptedStyleSheets = [...root.adoptedStyleSheets, ...sheets];
  const layer = document.createElement("div");
  layer.className = "sp-layer";
  const mount = document.createElement("div");
  mount.className = "sp-app";
  root.append(layer, mount);
  const ctl = new Controller(ctx.client, ctx.options, layer);
  ctl.keepOnTop = ctx.keepOnTop;
  render(<App ctl={ctl} />, mount);
  return {
    open: () => ctl.open(),
    toggle: () => ctl.toggle(),
    togglePick: () => ctl.togglePick(),
    altPick: (event) => ctl.altPick(event),
  };
}
