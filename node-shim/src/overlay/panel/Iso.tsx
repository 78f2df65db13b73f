/**
 * A page- or repository-derived string (a path, an element's text or attribute, a component or check name)
 * in its own bidi isolate: a right-to-left override inside it (U+202E, a classic for disguising file names)
 * reorders only itself, never the rest of its line (issue 26; CSS `[data-sp-iso]` in styles.ts).
 */
import type { ComponentChildren } from "preact";

export function Iso({ children, class: cls }: { children: ComponentChildren; class?: string }) {
  return (
    <bdi data-sp-iso="" class={cls}>
      {children}
    </bdi>
  );
}
