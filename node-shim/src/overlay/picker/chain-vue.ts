/**
 * STUB so this branch builds: the Vue usage chain is written on the `vue` branch (issue 15), which
 * replaces this file. Same contract as chain-react.ts: raw sites, innermost first.
 */
import type { UsageSite } from "../../protocol.generated.js";

export function vueUsageChain(_el: Element): UsageSite[] {
  return [];
}
