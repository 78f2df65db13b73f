/**
 * Re-finding a picked element after Apply or Revert (issue 26 "Visual evidence"), by its source location:
 * the job's diff says where the element's line went (hunks above it shift it; a changed line maps to
 * the first added line of its block; a removed one maps nowhere), and the page's `data-spotpatch-loc`
 * attributes (written by the locator) say which element now renders from that line.
 */
import { nearestLocated } from "../picker/describe.js";
import { LOC_ATTRIBUTE, connected, localName, queryAll } from "../picker/dom.js";
import type { PickedTarget } from "../picker/types.js";

/**
 * The line in the changed file of `line` in the baseline of `file`, by the unified `diff`: unchanged
 * files and lines keep theirs (shifted by the hunks above); a line the diff replaced maps to the first
 * line that replaced it; a line the diff removed without replacement, or a removed file, maps to null.
 */
export function mapLine(diff: string, file: string, line: number): number | null {
  const lines = diff.split("\n");
  let inFile = false;
  let offset = 0;
  for (let i = 0; i < lines.length; i += 1) {
    const text = lines[i]!;
    if (text.startsWith("diff --git ")) {
      if (inFile) break; // past our file: the offset so far holds
      inFile = text.endsWith(` b/${file}`) || text.includes(` a/${file} `);
      continue;
    }
    if (!inFile) continue;
    if (text === "+++ /dev/null") return null;
    const hunk = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(text);
    if (!hunk) continue;
    let oldNo = Number(hunk[1]);
    let newNo = Number(hunk[3]);
    if (Number(hunk[2] ?? 1) === 0) oldNo += 1; // "-N,0": the hunk inserts after line N
    if (line < oldNo) return line + offset;
    let hit = false;
    let blockStart = -1;
    let added = 0;
    for (i += 1; i < lines.length; i += 1) {
      const body = lines[i]!;
      const mark = body[0];
      if (mark !== " " && mark !== "-" && mark !== "+" && mark !== "\\") {
        i -= 1;
        break;
      }
      if (mark === "\\") continue;
      if (mark === " ") {
        if (hit) return added > 0 ? blockStart : null;
        blockStart = -1;
        added = 0;
        if (oldNo === line) return newNo;
        oldNo += 1;
        newNo += 1;
        continue;
      }
      if (blockStart < 0) {
        blockStart = newNo;
        added = 0;
      }
      if (mark === "-") {
        if (oldNo === line) hit = true;
        oldNo += 1;
      } else {
        added += 1;
        newNo += 1;
      }
    }
    if (hit) return added > 0 ? blockStart : null;
    offset = newNo - oldNo;
  }
  return line + offset;
}

/**
 * The element rendering `target` now: its own element while still in the page (a framework that updated
 * it in place), else the element whose own `data-spotpatch-loc` is at the target's file and `line` (its
 * mapped line), with the same tag — the same column and text first. Null: nothing renders from there.
 */
export function refind(target: PickedTarget, line: number | null): Element | null {
  const el = target.element;
  if (el && connected(el)) return el;
  const source = target.source;
  if (!source || line === null) return null;
  const doc = el?.ownerDocument ?? document;
  const tag = target.info.tagName;
  const quoted = `"${`${source.file}:${line}:`.replace(/["\\]/g, "\\$&")}"`;
  if (target.sourceFrom === "ancestor") {
    // The picked element had no location of its own: the same tag inside an element located there.
    const inside = queryAll(doc, tag).find((c) => {
      const loc = nearestLocated(c)?.loc;
      return loc?.file === source.file && loc.line === line;
    });
    return inside ?? null;
  }
  const found = queryAll(doc, `[${LOC_ATTRIBUTE}^=${quoted}]`).filter((c) => localName(c) === tag);
  const sameColumn = found.filter((c) => c.getAttribute(LOC_ATTRIBUTE)?.endsWith(`:${source.column ?? 1}`));
  return sameColumn[0] ?? found[0] ?? null;
}
