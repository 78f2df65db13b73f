/**
 * The Vite version gate (docs/security.md §8, "Vite versions"). On Vite 6.0–6.4.1, 7.0–7.3.1 and
 * 8.0.0–8.0.4 the dev server answers `vite:invoke` → `fetchModule(id)` on its HMR websocket without the
 * checks of the HTTP path (GHSA-p9ff-h696-f583, CVE-2026-39363; fixed in 6.4.2, 7.3.2 and 8.0.5, which
 * disable `fetchModule` for the browser environment). Another localhost page can read `/@vite/client`
 * (Vite's default CORS admits it), take the websocket token from it, open the websocket and fetch
 * `virtual:spotpatch/client` — the session token included — past the client-module guard, which sees
 * HTTP requests only. Vite gives a plugin no reliable signal in `resolveId`/`load` that a load came
 * through that path, so SpotPatch refuses to run at all on those versions: no session token is made,
 * no engine is started, the client module only reports the error and `/__spotpatch/` answers
 * `503 VITE_UNSUPPORTED`. Fail closed: a version that cannot be read is refused too.
 */

import type { IncomingMessage, ServerResponse } from "node:http";

/** The first Vite release of each supported major that is not affected (from Vite's advisory). */
export const FIRST_PATCHED: Readonly<Record<number, string>> = { 6: "6.4.2", 7: "7.3.2", 8: "8.0.5" };

const ADVISORY = "GHSA-p9ff-h696-f583";

/**
 * Why SpotPatch must not run on Vite `version`, or undefined when it may. Refused: a version that does
 * not parse, anything below 6.4.2, and 7.x below 7.3.2, 8.x below 8.0.5 (a pre-release of a patched
 * version counts as below it, as in semver). Majors above 8 are accepted.
 */
export function viteVersionRefusal(version: string | undefined): string | undefined {
  const parsed = /^(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.exec(version ?? "");
  if (!parsed) {
    return `SpotPatch is off: it cannot tell which Vite version runs (${JSON.stringify(version ?? null)}). Update Vite to ≥ ${FIRST_PATCHED[8]}.`;
  }
  const [major, minor, patch] = [Number(parsed[1]), Number(parsed[2]), Number(parsed[3])];
  const prerelease = parsed[4] !== undefined;
  if (major > 8) return undefined;
  const floor = FIRST_PATCHED[Math.max(major, 6)]!;
  const [fMajor, fMinor, fPatch] = floor.split(".").map(Number) as [number, number, number];
  const below =
    major !== fMajor
      ? major < fMajor
      : minor !== fMinor
        ? minor < fMinor
        : patch !== fPatch
          ? patch < fPatch
          : prerelease;
  if (!below) return undefined;
  return (
    `SpotPatch is off: Vite ${version} lets another local page read modules, SpotPatch's session token ` +
    `included, over its HMR websocket (${ADVISORY}). Update Vite to ≥ ${floor}.`
  );
}

/** The running Vite's version: the hook context's `meta.viteVersion` when Vite sets it, else `fallback`. */
export function runningViteVersion(context: unknown, fallback: string | undefined): string | undefined {
  const meta = (context as { meta?: { viteVersion?: unknown } } | undefined)?.meta;
  return typeof meta?.viteVersion === "string" ? meta.viteVersion : fallback;
}

/** The client module served instead of SpotPatch's on a refused Vite: it reports `message` and nothing else. */
export function refusedClientSource(message: string): string {
  return `console.error(${JSON.stringify(`[spotpatch] ${message}`)});\nexport {};\n`;
}

type Next = (error?: unknown) => void;

/** Answers every `/__spotpatch/` request with `503 <code>` (default `VITE_UNSUPPORTED`) and `message`; passes the rest on. */
export function refusedEndpoints(message: string, code = "VITE_UNSUPPORTED") {
  return (req: IncomingMessage, res: ServerResponse, next: Next): void => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (!path.startsWith("/__spotpatch/") && path !== "/__spotpatch") return next();
    for (const name of res.getHeaderNames()) if (name.startsWith("access-control-")) res.removeHeader(name);
    res.writeHead(503, { "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Content-Type": "application/json; charset=utf-8" });
    res.end(JSON.stringify({ error: { code, message, retryable: false } }));
  };
}
