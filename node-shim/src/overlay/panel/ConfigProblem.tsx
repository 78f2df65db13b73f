/**
 * What the panel shows instead of the composer while `spotpatch.config.json` cannot be used
 * (OverlayOptions.configProblem, docs/node-shim.md "One configuration"): SpotPatch is off, every problem
 * on its own line (the location in the file and what is wrong, as `spotpatch-agent doctor` lists them),
 * the fix, and how SpotPatch comes back. The problems come from the dev server in its words (English).
 */
import type { Controller } from "./controller.js";

export function ConfigProblem({ ctl }: { ctl: Controller }) {
  const problem = ctl.options.configProblem;
  if (!problem) return null;
  const { t } = ctl;
  return (
    <section class="sp-note sp-error" role="alert" aria-labelledby="sp-config-h">
      <h3 id="sp-config-h">{t("configProblem.title")}</h3>
      <p>{t("configProblem.reason", { reason: problem.reason })}</p>
      {problem.problems.length > 0 && (
        <ul class="sp-config-problems">
          {problem.problems.map((line) => (
            <li key={line}>
              <code>{line}</code>
            </li>
          ))}
        </ul>
      )}
      <p>{t("configProblem.fix", { fix: problem.fix })}</p>
      <p>{t("configProblem.after")}</p>
    </section>
  );
}
