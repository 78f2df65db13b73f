/**
 * The panel's state shapes and the pure helpers around them (no DOM, no client): the annotation built
 * from the composer's targets, what a reload keeps in sessionStorage, and how a job's events fold into
 * what the panel shows.
 */
import type {
  AgentChannelInfo,
  ApplyMode,
  AuditTargetSummary,
  ChecksSandbox,
  DiffResult,
  ElementInfo,
  JobEventNotification,
  JobSnapshot,
  ProviderInfo,
  RecoveryReport,
  RepoHealth,
  SourceLocation,
  SpotAnnotation,
  SuggestionResult,
  Target,
} from "../../protocol/protocol.generated.js";
import type { Lang } from "../i18n.js";
import type { PickedTarget } from "../picker/types.js";
import type { VisualResult } from "../visual/evidence.js";
import { cleanChain } from "../picker/chain.js";
import { isProjectPath } from "../picker/chain-site.js";

/** What `session/get` answers (INFRA's page method; a fallback fills it from `provider/list`). */
export interface SessionInfo {
  aiEnabled: boolean;
  applyModes: ApplyMode[];
  limits: { maxTargets: number; maxInstructionChars: number };
  recovered: RecoveryReport[];
  /** Whether checks run confined here (absent: the project has no checks, or an older engine). */
  checksSandbox?: ChecksSandbox;
  /** Whether the read-only suggestion lane (`job/suggest`) is on (absent: an older engine, off). */
  suggestions?: boolean;
  /** Sending jobs to the user's own agent over MCP (absent: no agent channel). */
  agents?: AgentChannelInfo;
}

/** The engine's defaults and model caps (docs/protocol.md: targets 1..8, instructions 1..2000 chars). */
export const DEFAULT_LIMITS = { maxTargets: 8, maxInstructionChars: 2000 };

/** One composer card. `key` is stable for the card's life; its number is its position + 1. */
export interface Draft {
  key: number;
  target: PickedTarget;
  instruction: string;
  detached: boolean;
}

/** The frozen input of a job (what Back to edit restores). */
export interface JobInput {
  targets: { target: PickedTarget; instruction: string }[];
  modelProfileId: string;
  applyMode: ApplyMode;
  /** Sent to the user's own agent over MCP (docs/mcp.md), not to a model. */
  agent?: boolean;
}

export interface JobView {
  jobId: string;
  snapshot: JobSnapshot;
  events: JobEventNotification[];
  input: JobInput | null;
  diff: DiffResult | null;
  /** Per target, what the agent read before its first write (the audit ledger's summary), once it ended. */
  audit: AuditTargetSummary[] | null;
  /** An Apply/Revert/Cancel refusal or failure to explain (the job itself may be fine). */
  actionError: { code: string; message: string } | null;
  busy: boolean;
  /** When the watch began (ms since epoch), for the elapsed time. */
  startedAt: number;
  endedAt: number | null;
  /** The read-only suggestion lane's draft for this failed job (`job/suggest`), once asked. */
  suggestion?: SuggestionResult | null;
  suggesting?: boolean;
  suggestionError?: { code: string; message: string } | null;
  /** Before | after pictures of the targets once Apply (or Revert) updated the page (visual/evidence.ts). */
  visual?: VisualResult | null;
}

/** Whether the page may offer a suggestion for `job`: the lane is on and the model failed the capability. */
export function canSuggest(session: SessionInfo | null, job: JobView): boolean {
  return (
    session?.suggestions === true &&
    job.snapshot.status === "failed" &&
    job.snapshot.error?.code === "MODEL_TOOL_CALL_UNSUPPORTED"
  );
}

export interface Notice {
  tone: "info" | "ok" | "error";
  text: string;
}

export interface State {
  open: boolean;
  lang: Lang;
  loading: boolean;
  session: SessionInfo | null;
  sessionError: string | null;
  providers: ProviderInfo[];
  modelId: string;
  applyMode: ApplyMode;
  includeLocal: boolean;
  health: RepoHealth | null;
  healthError: string | null;
  drafts: Draft[];
  picking: null | "element" | "area";
  paused: boolean;
  hasSelection: boolean;
  job: JobView | null;
  disconnected: boolean;
  consent: { providerId: string; providerName: string } | null;
  notice: Notice | null;
  recovered: RecoveryReport[];
}

export const ACTIVE = new Set(["preparing", "running", "validating", "applying", "reverting"]);
/** The model profile id of a job sent to the user's own agent over MCP (the engine's `agent_profile`). */
export const AGENT_PROFILE_ID = "mcp";
export const RUNNING = new Set(["preparing", "running", "validating"]);

/** The instruction sent for a draft: a text target quotes its selection first (the model sees what was selected). */
export function instructionText(draft: { target: PickedTarget; instruction: string }, max: number): string {
  const own = draft.instruction.trim();
  const quote = draft.target.quote?.trim();
  if (!quote) return own.slice(0, max);
  const room = Math.max(0, max - own.length - 24);
  const cut = quote.length > room ? `${quote.slice(0, Math.max(0, room - 1))}…` : quote;
  return room > 8 ? `Selected text: "${cut}"\n${own}`.slice(0, max) : own.slice(0, max);
}

/** The element info sent for a target (a region target has no element: a synthetic description). */
export function elementInfo(target: PickedTarget): ElementInfo {
  const info: ElementInfo = { ...target.info, tagName: (target.info.tagName || "region").slice(0, 64) };
  if (info.text !== undefined) info.text = info.text.slice(0, 500);
  return info;
}

/** The annotation of a job (indexes 1, 2, … in card order). */
export function buildAnnotation(
  targets: { target: PickedTarget; instruction: string }[],
  max: number,
  pageUrl: string,
): SpotAnnotation {
  const list: Target[] = targets.map((entry, i) => {
    const target: Target = {
      index: i + 1,
      instruction: instructionText(entry, max),
      element: elementInfo(entry.target),
    };
    // A restored job's targets come from sessionStorage, which page code can rewrite: the same rule as a
    // fresh pick (project-relative paths only) before anything is sent.
    if (entry.target.source && isProjectPath(entry.target.source.file)) target.source = cleanSource(entry.target.source);
    const chain = cleanChain(entry.target.usageChain ?? []);
    if (chain.length > 0) target.usageChain = chain as NonNullable<Target["usageChain"]>;
    const area = entry.target.area;
    if (area) {
      // The dragged rectangle and the located elements in it (issue 26); project-relative paths only, as above.
      const elements = (area.elements ?? [])
        .filter((e) => isProjectPath(e.source.file))
        .slice(0, 8)
        .map((e) => ({ source: cleanSource(e.source), tagName: e.tagName.slice(0, 64), rect: e.rect }));
      target.area = {
        rect: area.rect,
        viewportWidth: area.viewportWidth,
        viewportHeight: area.viewportHeight,
        elements: elements as NonNullable<NonNullable<Target["area"]>["elements"]>,
      };
    }
    return target;
  });
  return {
    annotationId: `ann-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
    pageUrl: pageUrl.startsWith("/") && !pageUrl.startsWith("//") ? pageUrl.slice(0, 2000) : "/",
    targets: list as SpotAnnotation["targets"],
  };
}

/**
 * The prompt the page builds itself when no engine answers `prompt/render` (issue 26): each target's
 * instruction, element, source location and usage chain as plain text; no source excerpts (only the engine
 * reads files).
 */
export function localPrompt(annotation: SpotAnnotation): string {
  const lines = [`Change the web page at ${annotation.pageUrl ?? "/"} as follows.`, ""];
  for (const target of annotation.targets) {
    const el = target.element;
    const where = target.source ? ` in ${target.source.file}:${target.source.line}` : "";
    lines.push(`## Target ${target.index}: <${el?.tagName ?? "element"}>${where}`);
    if (el?.text) lines.push(`Text: "${el.text.replace(/\s+/g, " ").trim().slice(0, 200)}"`);
    for (const site of target.usageChain ?? []) lines.push(`Used at ${site.file}:${site.line}`);
    lines.push(`Instruction: ${target.instruction}`, "");
  }
  return lines.join("\n");
}

function cleanSource(source: SourceLocation): SourceLocation {
  const out: SourceLocation = { file: source.file, line: source.line };
  if (source.column) out.column = source.column;
  if (source.component) out.component = source.component;
  return out;
}

/** A target without its live element, as kept across a reload (sessionStorage). */
export function storableTarget(target: PickedTarget): PickedTarget {
  const { element: _element, ...rest } = target;
  return { ...rest, element: null };
}

/** Events folded: the latest `started` activity is replaced by its `finished` one (same call, same turn). */
export function timelineOf(events: JobEventNotification[]): JobEventNotification[] {
  const out: JobEventNotification[] = [];
  const open = new Map<string, number>();
  for (const event of events) {
    if (event.kind === "activity") {
      const id = `${event.turn}:${event.toolCallId}`;
      if (event.phase === "started") {
        open.set(id, out.length);
        out.push(event);
        continue;
      }
      const at = open.get(id);
      if (at !== undefined) {
        out[at] = event;
        open.delete(id);
        continue;
      }
    }
    out.push(event);
  }
  return out;
}

/** "1:05" / "12 s" style elapsed time. */
export function formatElapsed(ms: number, seconds: (s: number) => string = (s) => `${s} s`): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  return s < 60 ? seconds(s) : `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

export function providerOfModel(
  providers: ProviderInfo[],
  modelId: string,
): { provider: ProviderInfo; model: { id: string; displayName: string } } | null {
  for (const provider of providers) {
    const model = provider.models.find((m) => m.id === modelId);
    if (model) return { provider, model };
  }
  return null;
}
