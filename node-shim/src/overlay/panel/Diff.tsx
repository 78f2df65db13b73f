/**
 * The full diff, rendered by diff2html (line by line, light/dark following the system). diff2html escapes
 * every line and file name itself (its Hogan templates and `escapeForHtml`); its output is the ONLY HTML
 * the overlay inserts as markup, and node-shim/test/overlay-flow-hostile.test.mjs proves that diff lines
 * and file names carrying HTML or script stay text. Its stylesheet is adopted by the shadow root
 * (index.tsx), so it styles nothing on the page.
 */
import { html } from "diff2html";
import { useMemo } from "preact/hooks";

export function DiffView({ diff, label }: { diff: string; label: string }) {
  const markup = useMemo(
    () =>
      html(diff, {
        outputFormat: "line-by-line",
        drawFileList: false,
        matching: "lines",
        diffStyle: "word",
        colorScheme: "auto" as never,
      }),
    [diff],
  );
  return (
    <div class="sp-diff" role="region" aria-label={label} tabIndex={0} dangerouslySetInnerHTML={{ __html: markup }} />
  );
}
