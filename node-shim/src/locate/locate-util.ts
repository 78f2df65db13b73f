/** Shared by the locators (src/locate/locate.ts, src/locate/locate-html.ts, src/locate/locate-script.ts): positions in the
 * engine's line/column unit, the project roots, and a non-recursive walk over a Babel AST. */

import { realpathSync } from "node:fs";

/** Offsets (UTF-16, as Babel gives them) → engine line/column (see the module comment for the unit). */
export class LinePositions {
  private readonly starts: number[] = [0];
  private readonly bom: boolean;

  constructor(private readonly code: string) {
    for (let i = code.indexOf("\n"); i >= 0; i = code.indexOf("\n", i + 1)) this.starts.push(i + 1);
    this.bom = code.charCodeAt(0) === 0xfeff;
  }

  at(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.starts[mid] as number) <= offset) lo = mid;
      else hi = mid - 1;
    }
    let from = this.starts[lo] as number;
    if (lo === 0 && this.bom) from = Math.min(1, offset);
    let column = 1;
    for (let i = from; i < offset; i++) {
      const c = this.code.charCodeAt(i);
      // the low half of a surrogate pair is the same code point as its high half
      if (c >= 0xdc00 && c <= 0xdfff && i > from && isHigh(this.code.charCodeAt(i - 1))) continue;
      column++;
    }
    return { line: lo + 1, column };
  }
}

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

/** `root` and, when it differs, its real path: Vite hands transforms real paths, and a symlinked root (macOS
 * /tmp, pnpm/monorepo links) would otherwise make every file look "outside the root" or give a doubled path. */
export function rootsOf(root: string): string[] {
  try {
    const real = realpathSync.native(root);
    return real === root ? [root] : [root, real];
  } catch {
    return [root]; // root does not exist (yet): keep the lexical one
  }
}

export type AstNode = { type: string; start?: number | null; end?: number | null; [key: string]: unknown };

const SKIP_KEYS = new Set(["loc", "range", "extra", "leadingComments", "trailingComments", "innerComments", "comments", "tokens"]);

/** Every AST node under `root`, in source order, without recursion (deep JSX cannot overflow the stack). */
export function* walk(root: unknown): Generator<AstNode> {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== "object") continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
      continue;
    }
    const node = value as AstNode;
    if (typeof node.type !== "string") continue;
    yield node;
    const children: unknown[] = [];
    for (const key of Object.keys(node)) {
      if (SKIP_KEYS.has(key)) continue;
      const child = node[key];
      if (child !== null && typeof child === "object") children.push(child);
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
}
