/**
 * The overlay's interface with the plugin (docs/node-shim.md "The overlay"): the options the plugin
 * passes to the page, what the loader gets, and what the lazily loaded overlay module returns.
 */
import type { SpotPatchClient } from "./client.js";

export interface OverlayOptions {
  /** Toggles pick mode, e.g. "Alt+Shift+S" (default). Modifiers: Alt, Shift, Ctrl, Meta; then one key. */
  shortcut: string;
  /** The launcher button's initial corner; `false`: no button (the shortcut and Alt+click still work). */
  launcher: "bottom-right" | "bottom-left" | "top-right" | "top-left" | false;
  /** Short hash of the project root: the storage keys are per project (never the path). */
  projectKey: string;
  /**
   * Set when `spotpatch.config.json` cannot be used (docs/node-shim.md "One configuration"): SpotPatch is
   * off, and the panel lists these problems instead of the composer. `reason` completes the file's name,
   * `problems` are `location: what is wrong` lines (never a value), `fix` says what to do.
   */
  configProblem?: { reason: string; problems: string[]; fix: string };
}

export interface OverlayHandle {
  /** Open the panel. */
  open(): void;
  /** Enter pick mode, or leave it. */
  togglePick(): void;
  /** Pick the element under an Alt+click (outside pick mode). */
  altPick(event: MouseEvent): void;
  /** Open the panel, or close it when open (the launcher's click). Optional extension of the contract. */
  toggle?(): void;
}

export interface OverlayModule {
  mountOverlay(ctx: OverlayContext): OverlayHandle;
}

export interface LoaderArgs {
  client: SpotPatchClient;
  load: () => Promise<OverlayModule>;
  options: OverlayOptions;
}

export interface OverlayContext {
  client: SpotPatchClient;
  /** `<spotpatch-overlay>`, with its open shadow root. */
  host: HTMLElement;
  options: OverlayOptions;
  /** The loader's top-layer keeper: `true` while the panel is open (it then also watches `open` attributes). */
  keepOnTop?(on: boolean): void;
}

/** Storage keys (per project; `localStorage` only for the launcher place and language, never consent). */
export const storageKey = (projectKey: string, name: string): string => `spotpatch:${projectKey}:${name}`;
