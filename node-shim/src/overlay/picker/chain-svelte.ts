/**
 * STUB so this branch builds: the Svelte usage chain is written on the `svelte` branch (issue 15), which
 * replaces this file. Same contract as chain-react.ts: raw sites, innermost first.
 */
import type { UsageSite } from "../../protocol.generated.js";

export function svelteUsageChain(_el: Element): UsageSite[] {
  return [];
}
