/**
 * The browser surface on the dev server itself (never a second port), docs/design.md §15:
 *
 * - `POST /__spotpatch/rpc/<method>` — body: the method's params (JSON object); `200 {"result": …}`
 *   or `4xx/5xx {"error": {code, message, retryable}}`. Only `PAGE_METHODS` are forwarded, each
 *   validated against the schema first.
 * - `POST /__spotpatch/events` — body: `{jobId, afterSeq?}`; answers `text/event-stream`: every
 *   event after `afterSeq` (replayed with `job/events`), then live ones, as
 *   `id: <seq>` / `event: job-event` / `data: <JobEventNotification>` blocks, in `seq` order and none
 *   twice. A POST (not `EventSource`) so the token header and JSON body rules hold for it too.
 *
 * Every request passes `refusalOf` (guard.ts) first.
 */

import type { IncomingMessage, ServerResponse } from "node:http";

import { ResponseError } from "vscode-jsonrpc/node";

import type { PageMethod, ServerErrorCode, SpotPatchErrorBody } from "../protocol/client.js";
import { refusalOf, type AccessPolicy } from "./guard.js";
import type { JobEventNotification } from "../protocol/protocol.generated.js";
import { checkPageParams, isPageMethod } from "../protocol/schema.js";
import { EngineUnavailableError, type EngineSupervisor } from "./supervisor.js";

export const ENDPOINT_PREFIX = "/__spotpatch/";
const MAX_BODY_BYTES = 1024 * 1024;
const KEEPALIVE_MS = 15_000;
/** How long a watch whose replay failed on a dying engine waits for the supervisor to record the lost job. */
const LOST_WAIT_MS = 3_000;

export interface EndpointOptions {
  token: string;
  policy: AccessPolicy;
  supervisor: EngineSupervisor;
}

type Next = (error?: unknown) => void;

export interface Endpoints {
  middleware(req: IncomingMessage, res: ServerResponse, next: Next): void;
  /** End every open event stream (the dev server is closing). */
  close(): void;
}

export function createEndpoints(options: EndpointOptions): Endpoints {
  const streams = new Set<ServerResponse>();
  let closed = false;

  async function handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const refusal = refusalOf(req.method, req.headers, options.policy, options.token);
    if (refusal) return sendError(res, refusal.status, refusal.code, refusal.message);
    if (closed) return sendError(res, 503, "SERVER_CLOSING", "The dev server is closing; SpotPatch is stopped.");

    let method: PageMethod;
    if (path === "events") method = "job/events";
    else if (path.startsWith("rpc/") && isPageMethod(path.slice(4))) method = path.slice(4) as PageMethod;
    else if (path.startsWith("rpc/")) {
      return sendError(res, 404, "UNKNOWN_METHOD", `SpotPatch does not forward "${path.slice(4, 68)}" from the page.`);
    } else return sendError(res, 404, "NOT_FOUND", "No such SpotPatch endpoint.");

    const body = await readJson(req);
    if ("error" in body) return sendError(res, body.status, body.error, body.message);
    const problems = checkPageParams(method, body.value);
    if (problems.length > 0) {
      return sendError(res, 400, "INVALID_PARAMS", `SpotPatch refused the ${method} params: ${problems.join("; ")}.`);
    }
    if (path === "events") return streamEvents(res, body.value as { jobId: string; afterSeq?: number });
    try {
      const result = await options.supervisor.request(method, body.value as never);
      sendJson(res, 200, { result });
    } catch (error) {
      const [status, info] = errorBody(error);
      sendJson(res, status, { error: info });
    }
  }

  async function streamEvents(res: ServerResponse, params: { jobId: string; afterSeq?: number }): Promise<void> {
    const { supervisor } = options;
    const { jobId } = params;
    let lastSent = params.afterSeq ?? 0;
    const pending: JobEventNotification[] = [];
    let live = false;
    const write = (event: JobEventNotification): void => {
      if (event.seq <= lastSent) return;
      lastSent = event.seq;
      res.write(`id: ${event.seq}\nevent: job-event\ndata: ${JSON.stringify(event)}\n\n`);
      if (event.kind === "status" && event.status === "closed") res.end();
    };
    // Subscribe before replaying so nothing falls between the replay and the live events.
    const unsubscribe = supervisor.subscribe((event) => {
      if (event.jobId !== jobId) return;
      if (live) write(event);
      else pending.push(event);
    });
    let keepalive: NodeJS.Timeout | undefined;
    let gone = false;
    res.once("close", () => {
      gone = true; // the page went away (possibly during the replay) or the stream ended
      clearInterval(keepalive);
      unsubscribe();
      streams.delete(res);
    });
    let replay = supervisor.lostEvents(jobId);
    if (!replay) {
      try {
        replay = (await supervisor.request("job/events", { jobId, afterSeq: lastSent })).events;
      } catch (error) {
        // The engine died during the replay: its failure events. The connection can close before the supervisor
        // has seen the process exit and recorded them, so a transport failure (not an engine's answer) waits a
        // moment for them (a page watching a job while the engine dies; lifecycle.test.mjs).
        replay = supervisor.lostEvents(jobId);
        if (!replay && !(error instanceof ResponseError)) {
          for (let waited = 0; !replay && waited < LOST_WAIT_MS && !gone; waited += 25) {
            await new Promise((resolve) => setTimeout(resolve, 25));
            replay = supervisor.lostEvents(jobId);
          }
        }
        if (!replay) {
          unsubscribe();
          const [status, info] = errorBody(error);
          return sendJson(res, status, { error: info });
        }
      }
    }
    if (gone) return;
    for (const name of res.getHeaderNames()) if (name.startsWith("access-control-")) res.removeHeader(name);
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "Content-Type": "text/event-stream; charset=utf-8",
      Connection: "keep-alive",
      "X-Accel-Buffering": "no",
    });
    res.write(": spotpatch job events\n\n");
    streams.add(res);
    keepalive = setInterval(() => res.write(": keep-alive\n\n"), KEEPALIVE_MS);
    keepalive.unref();
    for (const event of [...replay].sort((a, b) => a.seq - b.seq)) write(event);
    for (const event of pending.sort((a, b) => a.seq - b.seq)) write(event);
    live = true;
    if (closed) res.end();
  }

  return {
    middleware(req, res, next) {
      const url = req.url ?? "";
      if (!url.startsWith(ENDPOINT_PREFIX)) return next();
      const path = url.slice(ENDPOINT_PREFIX.length).split("?")[0]!;
      handle(req, res, path).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, "ENGINE_ERROR", `SpotPatch failed: ${(error as Error).message}`);
        else res.end();
      });
    },
    close() {
      closed = true;
      for (const res of streams) res.end();
      streams.clear();
    },
  };
}

const SECURITY_HEADERS = {
  "Cache-Control": "no-store",
  "X-Content-Type-Options": "nosniff",
};

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  // Same-origin only: drop any CORS header an earlier middleware (Vite's `cors`) put on the response.
  for (const name of res.getHeaderNames()) if (name.startsWith("access-control-")) res.removeHeader(name);
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, status: number, code: ServerErrorCode, message: string): void {
  sendJson(res, status, { error: { code, message, retryable: false } satisfies SpotPatchErrorBody });
}

/** HTTP status and error body for a failed forward: our own errors, then the engine's JSON-RPC errors. */
export function errorBody(error: unknown): [number, SpotPatchErrorBody] {
  if (error instanceof EngineUnavailableError) {
    return [503, { code: error.code, message: error.message, retryable: error.retryable }];
  }
  if (error instanceof ResponseError) {
    const data = error.data as Partial<SpotPatchErrorBody> | undefined;
    if (error.code === -32000 && data && typeof data.code === "string") {
      const status = data.code === "JOB_NOT_FOUND" ? 404 : data.code === "JOB_CONFLICT" ? 409 : 422;
      return [status, { code: data.code, message: data.message ?? error.message, retryable: data.retryable ?? false }];
    }
    if (error.code === -32602) return [400, { code: "INVALID_PARAMS", message: error.message, retryable: false }];
    return [502, { code: "ENGINE_ERROR", message: `The SpotPatch engine answered ${error.code}: ${error.message}`, retryable: false }];
  }
  return [500, { code: "ENGINE_ERROR", message: `SpotPatch failed: ${(error as Error).message}`, retryable: false }];
}

type JsonBody = { value: unknown } | { error: ServerErrorCode; status: number; message: string };

/** The request body as one JSON object, at most MAX_BODY_BYTES (a larger body is drained, not kept). */
function readJson(req: IncomingMessage): Promise<JsonBody> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.once("error", () => resolve({ error: "INVALID_JSON", status: 400, message: "SpotPatch could not read the request body." }));
    req.once("end", () => {
      if (size > MAX_BODY_BYTES) {
        resolve({ error: "BODY_TOO_LARGE", status: 413, message: `SpotPatch request bodies are limited to ${MAX_BODY_BYTES} bytes.` });
        return;
      }
      try {
        const value: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        if (typeof value === "object" && value !== null && !Array.isArray(value)) return resolve({ value });
      } catch {
        /* reported below */
      }
      resolve({ error: "INVALID_JSON", status: 400, message: "SpotPatch request bodies must be one JSON object (the method's params)." });
    });
  });
}
