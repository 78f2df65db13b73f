/**
 * The browser client of the SpotPatch endpoints (`/__spotpatch/` on the Vite dev server).
 *
 * This file is also the body of the virtual module `virtual:spotpatch/client` that the plugin injects
 * into the page: the plugin appends one line that creates the client with this dev-server start's
 * session token. It must therefore stay self-contained: no runtime imports (type imports only) and
 * nothing but `fetch`, `TextDecoderStream` and `AbortSignal` from the platform.
 *
 * Transport (README "Events transport"): every call is `POST <base>/rpc/<method>` with a JSON body
 * (the method's params) and the token header; job events come from `POST <base>/events` as a
 * Server-Sent-Events stream read with `fetch` and a stream reader, because `EventSource` cannot send
 * the token header.
 */

import type {
  DiffResult,
  EngineRequests,
  ErrorCode,
  JobAuditResult,
  JobCreateParams,
  JobEventNotification,
  JobEventsResult,
  JobListResult,
  JobSnapshot,
  PromptRenderResult,
  ProviderListResult,
  RepoHealth,
  SessionGetResult,
  SpotAnnotation,
  SuggestionResult,
} from "./protocol.generated.js";

export type * from "./protocol.generated.js";

/** The header that carries the per-start session token. */
export const TOKEN_HEADER = "X-SpotPatch-Token";

/** The engine methods a page may call; the dev server refuses every other one. */
export const PAGE_METHODS = [
  "health/get",
  "session/get",
  "prompt/render",
  "provider/list",
  "job/create",
  "job/get",
  "job/list",
  "job/events",
  "job/diff",
  "job/audit",
  "job/cancel",
  "job/apply",
  "job/revert",
  "job/close",
  "job/suggest",
] as const;

export type PageMethod = (typeof PAGE_METHODS)[number];
export type PageMethods = Pick<EngineRequests, PageMethod>;
export type PageParams<M extends PageMethod> = PageMethods[M]["params"];
export type PageResult<M extends PageMethod> = PageMethods[M]["result"];

/** Codes the dev server itself answers with (the engine's application codes are `ErrorCode`). */
export type ServerErrorCode =
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "UNKNOWN_METHOD"
  | "REMOTE_ACCESS_DISABLED"
  | "FORBIDDEN_HOST"
  | "FORBIDDEN_ORIGIN"
  | "BAD_TOKEN"
  | "UNSUPPORTED_MEDIA_TYPE"
  | "BODY_TOO_LARGE"
  | "INVALID_JSON"
  | "INVALID_PARAMS"
  | "ENGINE_UNAVAILABLE"
  | "ENGINE_STOPPED"
  | "ENGINE_FAILED"
  | "ENGINE_ERROR"
  | "SERVER_CLOSING"
  | "VITE_UNSUPPORTED"
  | "CONFIG_INVALID";

/** The JSON body of every refused or failed call: `{"error": SpotPatchErrorBody}`. */
export interface SpotPatchErrorBody {
  code: ServerErrorCode | ErrorCode;
  message: string;
  retryable: boolean;
}

/** A refused or failed call: `status` is the HTTP status (0 for a network failure). */
export class SpotPatchError extends Error {
  readonly code: ServerErrorCode | ErrorCode | "NETWORK";
  readonly status: number;
  readonly retryable: boolean;

  constructor(body: { code: SpotPatchError["code"]; message: string; retryable?: boolean }, status: number) {
    super(body.message);
    this.name = "SpotPatchError";
    this.code = body.code;
    this.status = status;
    this.retryable = body.retryable ?? false;
  }
}

export interface SpotPatchClientOptions {
  /** The session token of this dev-server start (only the injected module knows it). */
  token: string;
  /** Endpoint prefix, default `"/__spotpatch"`; may be absolute (`http://127.0.0.1:5173/__spotpatch`). */
  base?: string;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
}

export interface WatchOptions {
  /** Replay events after this `seq` first (default 0: the whole history). */
  afterSeq?: number;
  /** Abort to close the stream. */
  signal?: AbortSignal;
}

export interface SpotPatchClient {
  /** Any page method by name. Throws `SpotPatchError`. */
  call<M extends PageMethod>(method: M, params: PageParams<M>): Promise<PageResult<M>>;
  health(): Promise<RepoHealth>;
  /** AI on/off, the offered apply modes, `maxTargets`/`maxInstructionChars`, and this engine start's repairs. */
  session(): Promise<SessionGetResult>;
  renderPrompt(annotation: SpotAnnotation): Promise<PromptRenderResult>;
  providers(): Promise<ProviderListResult>;
  createJob(params: JobCreateParams): Promise<JobSnapshot>;
  getJob(jobId: string): Promise<JobSnapshot>;
  listJobs(): Promise<JobListResult>;
  /** Events after `afterSeq` in one reply (`job/events`). */
  jobEvents(jobId: string, afterSeq?: number): Promise<JobEventsResult>;
  diff(jobId: string): Promise<DiffResult>;
  /** The job's audit ledger (`job/audit`): what the agent read of each target before it wrote. */
  audit(jobId: string): Promise<JobAuditResult>;
  cancel(jobId: string): Promise<JobSnapshot>;
  apply(jobId: string): Promise<JobSnapshot>;
  revert(jobId: string): Promise<JobSnapshot>;
  close(jobId: string): Promise<JobSnapshot>;
  /**
   * The read-only suggestion lane (`job/suggest`): for a job that failed because its model cannot call
   * tools, when `session().suggestions` is true. A draft that changed nothing (`kind: "suggestion"`).
   */
  suggest(jobId: string): Promise<SuggestionResult>;
  /**
   * The job's events as they happen (SSE): first every event after `afterSeq`, then live ones, in `seq`
   * order and none twice. The stream stays open until `signal` aborts, the loop breaks, the job is
   * closed or the dev server stops. A cut connection throws `SpotPatchError` (`NETWORK`); to resume,
   * call again with the last `seq` seen as `afterSeq`.
   */
  watch(jobId: string, options?: WatchOptions): AsyncGenerator<JobEventNotification, void, undefined>;
}

export function createSpotPatchClient(options: SpotPatchClientOptions): SpotPatchClient {
  const base = (options.base ?? "/__spotpatch").replace(/\/+$/, "");
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));

  async function post(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    let response: Response;
    try {
      response = await doFetch(base + path, {
        method: "POST",
        headers: { "Content-Type": "application/json", [TOKEN_HEADER]: options.token },
        body: JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const message = `SpotPatch: the dev server did not answer (${(error as Error).message}).`;
      throw new SpotPatchError({ code: "NETWORK", message, retryable: true }, 0);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async function call<M extends PageMethod>(method: M, params: PageParams<M>): Promise<PageResult<M>> {
    const response = await post(`/rpc/${method}`, params ?? {});
    const body = (await response.json()) as { result: PageResult<M> };
    return body.result;
  }

  async function* watch(jobId: string, opts: WatchOptions = {}): AsyncGenerator<JobEventNotification, void, undefined> {
    const response = await post("/events", { jobId, afterSeq: opts.afterSeq ?? 0 }, opts.signal);
    if (!response.body) return;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        let chunk: ReadableStreamReadResult<string>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (opts.signal?.aborted) throw error;
          const message = `SpotPatch: the event stream was cut (${(error as Error).message}); resume with afterSeq.`;
          throw new SpotPatchError({ code: "NETWORK", message, retryable: true }, 0);
        }
        const { value, done } = chunk;
        if (done) return;
        buffer += value;
        let end: number;
        while ((end = blockEnd(buffer)) >= 0) {
          const event = parseSseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end).replace(/^(\r\n|\r|\n){1,2}/, "");
          if (event?.event === "job-event") yield JSON.parse(event.data) as JobEventNotification;
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }

  return {
    call,
    health: () => call("health/get", {}),
    session: () => call("session/get", {}),
    renderPrompt: (annotation) => call("prompt/render", { annotation }),
    providers: () => call("provider/list", {}),
    createJob: (params) => call("job/create", params),
    getJob: (jobId) => call("job/get", { jobId }),
    listJobs: () => call("job/list", {}),
    jobEvents: (jobId, afterSeq = 0) => call("job/events", { jobId, afterSeq }),
    diff: (jobId) => call("job/diff", { jobId }),
    audit: (jobId) => call("job/audit", { jobId }),
    cancel: (jobId) => call("job/cancel", { jobId }),
    apply: (jobId) => call("job/apply", { jobId }),
    revert: (jobId) => call("job/revert", { jobId }),
    close: (jobId) => call("job/close", { jobId }),
    suggest: (jobId) => call("job/suggest", { jobId }),
    watch,
  };
}

async function errorOf(response: Response): Promise<SpotPatchError> {
  try {
    const body = (await response.json()) as { error?: SpotPatchErrorBody };
    if (body.error && typeof body.error.message === "string") return new SpotPatchError(body.error, response.status);
  } catch {
    /* not our JSON: fall through */
  }
  const message = `SpotPatch: the dev server answered HTTP ${response.status} ${response.statusText}.`;
  return new SpotPatchError({ code: "ENGINE_ERROR", message }, response.status);
}

/** Index just past the end of the first complete SSE block in `buffer` (before its blank line), or -1. */
function blockEnd(buffer: string): number {
  const match = /\r\n\r\n|\n\n|\r\r/.exec(buffer);
  return match ? match.index : -1;
}

/** One SSE block (`event:` / `data:` / `id:` lines; `:` comments ignored), or null when it has no data. */
export function parseSseBlock(block: string): { event: string; data: string; id?: string } | null {
  let event = "message";
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return data.length ? { event, data: data.join("\n"), ...(id !== undefined ? { id } : {}) } : null;
}
