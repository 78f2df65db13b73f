/**
 * The full diff, rendered by diff2html (line by line, light/dark following the system). diff2html escapes
 * every line and file name itself (its Hogan templates and `escapeForHtml`); its output is the ONLY HTML
 * the overlay inserts as markup, and node-shim/test/overlay/overlay-flow-hostile.test.mjs proves that diff lines
 * and file names carrying HTML or script stay text. Its stylesheet is adopted by the shadow root
 * (index.tsx), so it styles nothing on the page.
 */
import { html } from "diff2html";
import { useMemo } from "preact/hooks";

import type { Translate } from "../i18n.js";

/** diff2html's file tags (ADDED, CHANGED, …) in the panel's language: fixed markup, our own catalog's text. */
const TAGS = {
  "tag-file-added": ["d2h-added", "diff.tag.added"],
  "tag-file-changed": ["d2h-changed", "diff.tag.changed"],
  "tag-file-deleted": ["d2h-deleted", "diff.tag.deleted"],
  "tag-file-renamed": ["d2h-moved", "diff.tag.renamed"],
} as const;

/** Pre-built templates (no Hogan compile at run time: it needs `eval`, which a page's CSP may forbid). */
function tagTemplates(t: Translate) {
  const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return Object.fromEntries(
    Object.entries(TAGS).map(([name, [kind, key]]) => {
      const markup = `<span class="d2h-tag ${kind} ${kind}-tag">${escape(t(key))}</span>`;
      return [name, { render: () => markup, ri: () => markup }]; // ri: rendered as a partial
    }),
  );
}

export function DiffView({ diff, label, t }: { diff: string; label: string; t: Translate }) {
  const markup = useMemo(
    () =>
      html(diff, {
        outputFormat: "line-by-line",
        drawFileList: false,
        matching: "lines",
        diffStyle: "word",
        colorScheme: "auto" as never,
        compiledTemplates: tagTemplates(t),
      }),
    [diff, t],
  );
  return (
    <div class="sp-diff" role="region" aria-label={label} tabIndex={0} dangerouslySetInnerHTML={{ __html: markup }} />
  );
}
