/** What every usage-chain gatherer shares (chain.ts, chain-react.ts, chain-preact.ts, …). */
import type { UsageSite } from "../../protocol/protocol.generated.js";

/** The prop the locator gives each component usage (src/locate/locate.ts USE_ATTRIBUTE): `file:line:col`. */
export const USE_ATTRIBUTE = "data-spotpatch-use";
export const MAX_FILE = 1024;

/** A relative POSIX path inside the project: no leading "/", "\\" or drive, no "..", no node_modules. */
export function isProjectPath(file: string): boolean {
  // eslint-disable-next-line no-control-regex -- a path with control characters is refused on purpose
  if (!file || file.length > MAX_FILE || /[\u0000-\u001f]/.test(file)) return false;
  if (file.startsWith("/") || file.startsWith("\\") || /^[A-Za-z]:/.test(file) || file.includes("://")) return false;
  const parts = file.split(/[\\/]/);
  return !parts.includes("..") && !parts.includes("node_modules") && !parts.includes(".");
}

/** `file:line:col` (the file may contain ':') → a UsageSite, or null. */
export function parseUse(value: unknown, component?: string): UsageSite | null {
  if (typeof value !== "string" || value.length > MAX_FILE + 30) return null;
  const m = /^(.+):(\d+):(\d+)$/.exec(value);
  if (!m) return null;
  const site: UsageSite = { file: m[1]!, line: Number(m[2]), column: Number(m[3]) };
  if (component) site.component = component;
  return site;
}
