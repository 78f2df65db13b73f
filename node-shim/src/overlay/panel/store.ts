/**
 * The panel's state holder: the state, its subscribers, per-project storage, the session's limits,
 * repository health and the trusted-auto consent lookup (sessionStorage only, per provider and mode).
 * `JobFlow` (jobs.ts) and `Controller` (controller.ts) build on it.
 */
import type { SpotPatchClient } from "../../protocol/client.js";
import { initialLang, translator, type Translate } from "../i18n.js";
import { storageKey, type OverlayOptions } from "../../protocol/overlay.js";
import type { PickedTarget } from "../picker/types.js";
import type { JobStatus } from "../../protocol/protocol.generated.js";
import {
  AGENT_PROFILE_ID,
  DEFAULT_LIMITS,
  providerOfModel,
  storableTarget,
  type JobView,
  type SessionInfo,
  type State,
} from "./state.js";

export type ClientWithSession = SpotPatchClient & { session?: () => Promise<SessionInfo> };

/** `{code, message}` of anything thrown (a `SpotPatchError` carries both). */
export function errorParts(error: unknown): { code: string; message: string } {
  const e = error as { code?: unknown; message?: unknown };
  return {
    code: typeof e?.code === "string" ? e.code : "ERROR",
    message: typeof e?.message === "string" ? e.message : String(error),
  };
}

type StorageArea = "session" | "local";

function storageOf(area: StorageArea): Storage {
  return area === "local" ? localStorage : sessionStorage;
}

export abstract class Store {
  state: State;
  t: Translate;
  private listeners = new Set<() => void>();
  /** Focus requests for the view (e.g. a new card's instruction box). */
  focusRequest: { kind: "instruction"; key: number } | { kind: "panel" } | null = null;
  /** Submit was refused for an empty instruction: each empty box is `aria-invalid` and says so (issue 26). */
  emptyInstructionsFlagged = false;

  constructor(
    readonly client: ClientWithSession,
    readonly options: OverlayOptions,
    readonly layer: HTMLElement,
  ) {
    const lang = initialLang(this.read("lang", "local"));
    this.t = translator(lang);
    this.state = {
      open: false,
      lang,
      loading: true,
      session: null,
      sessionError: null,
      providers: [],
      modelId: "",
      applyMode: "review",
      includeLocal: false,
      health: null,
      healthError: null,
      drafts: [],
      picking: null,
      paused: false,
      hasSelection: false,
      job: null,
      disconnected: false,
      consent: null,
      notice: null,
      recovered: [],
    };
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected set(patch: Partial<State>): void {
    this.state = { ...this.state, ...patch };
    if (patch.drafts) this.keepDrafts();
    for (const listener of this.listeners) listener();
  }

  /** The composer's cards survive a reload (sessionStorage `drafts`: each target without its live element, and
   *  its instruction; newcomer finding, issue 26), and the panel open with them reopens with them. */
  private keepDrafts(): void {
    const { drafts, open } = this.state;
    const kept = drafts.map((d) => ({ target: storableTarget(d.target), instruction: d.instruction }));
    this.write("drafts", kept.length ? JSON.stringify(kept) : null);
    if (kept.length && open) this.write("open", "1");
  }

  /** The cards a reload left (see keepDrafts); anything that does not look like one is dropped. */
  protected keptDrafts(): { target: PickedTarget; instruction: string }[] {
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.read("drafts") ?? "[]");
    } catch {
      return [];
    }
    if (!Array.isArray(parsed)) return [];
    return (parsed as unknown[])
      .filter((x): x is { target: PickedTarget; instruction: string } => {
        const card = x as { target?: unknown; instruction?: unknown } | null;
        return !!card && typeof card === "object" && typeof card.instruction === "string" &&
          !!card.target && typeof card.target === "object";
      })
      .slice(0, this.limits.maxTargets)
      .map((x) => ({ target: { ...x.target, element: null }, instruction: x.instruction }));
  }

  protected setJob(patch: Partial<JobView>): void {
    if (!this.state.job) return;
    this.set({ job: { ...this.state.job, ...patch } });
  }

  /* The storage is named, not passed: a page (or the browser's "block site data") may make the `localStorage` and
     `sessionStorage` getters themselves throw, and that must read as "nothing stored", never stop the overlay. */
  protected read(name: string, area: StorageArea = "session"): string | null {
    try {
      return storageOf(area).getItem(storageKey(this.options.projectKey, name));
    } catch {
      return null;
    }
  }

  protected write(name: string, value: string | null, area: StorageArea = "session"): void {
    try {
      const storage = storageOf(area);
      const key = storageKey(this.options.projectKey, name);
      if (value === null) storage.removeItem(key);
      else storage.setItem(key, value);
    } catch {
      /* storage disabled or full: this page only */
    }
  }

  get limits() {
    return this.state.session?.limits ?? DEFAULT_LIMITS;
  }

  get aiEnabled(): boolean {
    return !!this.state.session?.aiEnabled && this.state.providers.some((p) => p.available);
  }

  /** A job status in words; a job of the user's own agent says "Waiting for your agent" until its first tool call,
   *  then "Your agent is working", where a model's says "The model is working". */
  statusText(status: JobStatus): string {
    const job = this.state.job;
    if (status === "running" && job?.snapshot.modelProfileId === AGENT_PROFILE_ID)
      return this.t(job.events.some((e) => e.kind === "activity") ? "job.status.agentWorking" : "job.status.agentWaiting");
    return this.t(`job.status.${status}`);
  }

  /** The agent channel (session/get `agents`): jobs can be sent to an attached coding agent (docs/mcp.md). */
  get agentChannel(): boolean {
    return !!this.state.session?.agents?.available;
  }

  /** The names of the coding agents attached over MCP now (empty: none). */
  get agentClients(): string[] {
    return this.agentChannel ? (this.state.session?.agents?.clients ?? []) : [];
  }

  /** Ask again whether an agent is attached (on each open, and when the page gets the focus back: the user
   *  may just have started their agent in a terminal). Errors keep what is known. */
  async refreshAgents(): Promise<void> {
    const session = this.state.session;
    if (!session || !session.agents || typeof this.client.session !== "function") return; // no channel: no asking
    try {
      const fresh = await this.client.session();
      const now = this.state.session?.agents;
      if (now && fresh.agents && JSON.stringify(now) === JSON.stringify(fresh.agents)) return; // no re-render
      const { agents: _old, ...rest } = this.state.session ?? session;
      this.set({ session: fresh.agents ? { ...rest, agents: fresh.agents } : rest });
    } catch {
      /* the next open asks again */
    }
  }

  async refreshHealth(): Promise<void> {
    try {
      const health = await this.client.health();
      this.set({ health, healthError: null });
    } catch (error) {
      this.set({ healthError: errorParts(error).message });
    }
  }

  protected consentKey(): string | null {
    const found = providerOfModel(this.state.providers, this.state.modelId);
    return found ? `consent:${found.provider.id}:trusted-auto` : null;
  }

  hasConsent(): boolean {
    const key = this.consentKey();
    return !!key && this.read(key) === "1";
  }

  protected askConsent(): void {
    const found = providerOfModel(this.state.providers, this.state.modelId);
    if (found) this.set({ consent: { providerId: found.provider.id, providerName: found.provider.displayName } });
  }
}
