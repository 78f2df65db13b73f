/**
 * The engine's lifetime for one dev-server instance (docs/design.md §15): started lazily on the first
 * request, restarted with back-off when it dies (at most `maxRestarts` a minute, then a visible
 * error), and stopped once when the dev server closes.
 *
 * It also keeps the little job state the page needs across a crash: the last status and `seq` of every
 * job seen, so that when the engine dies each unfinished job gets an `error` and a `status: failed`
 * event (continuing its `seq`), kept for replay.
 */

import { EngineProcess, type EngineCommand, type EngineLogger } from "./engine.js";
import type { EngineLocation } from "./engine-locate.js";
import type { PageMethod, PageParams, PageResult, ServerErrorCode } from "../protocol/client.js";
import type { ErrorInfo, JobEventNotification, JobSnapshot, JobStatus, TrustedConfig } from "../protocol/protocol.generated.js";

export interface SupervisorOptions {
  command: EngineCommand;
  /**
   * Finds the engine before each start (src/server/engine-locate.ts), so an engine installed while the dev
   * server runs is found by the next request; its `problem` fails the start with that message. Without
   * it `command` is run as it is.
   */
  locate?: () => EngineLocation;
  projectRoot: string;
  config: TrustedConfig;
  logger: EngineLogger;
  clientVersion: string;
  /** Restarts allowed within `restartWindowMs` (default 3 a minute). */
  maxRestarts?: number;
  restartWindowMs?: number;
  /** Delay before the n-th restart in the window (n from 0), in ms. */
  backoffMs?: (n: number) => number;
}

/** The engine cannot serve the request; `code` and `message` go to the page as they are. */
export class EngineUnavailableError extends Error {
  readonly code: Extract<ServerErrorCode, "ENGINE_UNAVAILABLE" | "ENGINE_STOPPED" | "ENGINE_FAILED" | "SERVER_CLOSING">;
  readonly retryable: boolean;

  constructor(code: EngineUnavailableError["code"], message: string, retryable = true) {
    super(message);
    this.name = "EngineUnavailableError";
    this.code = code;
    this.retryable = retryable;
  }
}

type Listener = (event: JobEventNotification) => void;

/** Statuses after which nothing is lost when the engine dies. */
const SETTLED: ReadonlySet<JobStatus> = new Set(["failed", "cancelled", "closed", "reverted"]);
/** Statuses in which the engine is working on a job (not waiting for the user, not settled). */
const WORKING: ReadonlySet<JobStatus> = new Set(["preparing", "running", "validating", "applying", "reverting"]);

export class EngineSupervisor {
  private readonly options: SupervisorOptions;
  private engine: EngineProcess | undefined;
  private starting: Promise<EngineProcess> | undefined;
  private attempts = 0;
  private restarts: number[] = [];
  private lastFailure = 0;
  private closed = false;
  private closing: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** The not-found message last logged (logged again only when it changes). */
  private reportedProblem: string | undefined;
  private readonly jobs = new Map<string, { status: JobStatus; lastSeq: number }>();
  private readonly lost = new Map<string, JobEventNotification[]>();
  private readonly listeners = new Set<Listener>();
  /** Resolved (and emptied) when no job is working and no request is being answered, or on close. */
  private idleWaiters: (() => void)[] = [];
  /** Resolved (and emptied) when no job is working or held and no request is being answered, or on close. */
  private settledWaiters: (() => void)[] = [];
  /** Page requests being forwarded now. */
  private inFlight = 0;

  constructor(options: SupervisorOptions) {
    this.options = options;
  }

  /** The running engine's pid, if there is one. */
  get pid(): number | undefined {
    return this.engine?.alive ? this.engine.pid : undefined;
  }

  /** Forward one page request (starting the engine if needed). Rejects with `EngineUnavailableError` or the engine's `ResponseError`. */
  async request<M extends PageMethod>(method: M, params: PageParams<M>): Promise<PageResult<M>> {
    this.inFlight += 1;
    try {
      return await this.forward(method, params);
    } finally {
      this.inFlight -= 1;
      // After the answer is written (the caller writes it when this resolves): a restart waiting in
      // `whenIdle` must not cut it off.
      setImmediate(() => this.wakeIdleWaiters());
    }
  }

  private async forward<M extends PageMethod>(method: M, params: PageParams<M>): Promise<PageResult<M>> {
    const engine = await this.ensure();
    try {
      const result = await engine.request(method, params);
      this.noteResult(result);
      return result;
    } catch (error) {
      if (isConnectionError(error)) {
        // EPIPE or a closed connection: the engine is dying. Let its exit be processed (failure events of
        // lost jobs recorded) before answering, so callers can fall back to them.
        await Promise.race([engine.exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (!engine.alive) {
        throw new EngineUnavailableError(
          "ENGINE_STOPPED",
          "The SpotPatch engine stopped while handling this request; it is being restarted, try again.",
        );
      }
      throw error;
    }
  }

  /** Every job event (the engine's and the synthetic failures), in arrival order. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The failure events of a job that was lost with a dead engine (its earlier events are gone too). */
  lostEvents(jobId: string): readonly JobEventNotification[] | undefined {
    return this.lost.get(jobId);
  }

  /**
   * The jobs the engine holds, by what a restart would cost: `working` (preparing, running, validating,
   * applying, reverting: stopping the engine would fail them) and `held` (awaiting review or applied:
   * stopping the engine drops the diff or the Revert). Settled jobs are not listed.
   */
  jobsAtRisk(): { working: string[]; held: string[] } {
    const working: string[] = [];
    const held: string[] = [];
    for (const [jobId, job] of this.jobs) {
      if (WORKING.has(job.status)) working.push(jobId);
      else if (!SETTLED.has(job.status)) held.push(jobId);
    }
    return { working, held };
  }

  /**
   * Resolves once no job is working and no page request is being answered (at once when so), or when
   * the supervisor closes: the moment a restart costs nothing but the held jobs.
   */
  whenIdle(): Promise<void> {
    if (this.idle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Resolves once no job is working or held (awaiting review, applied) and no page request is being
   * answered, or when the supervisor closes: the moment a restart costs nothing at all. A held job ends
   * only by the user (Apply then Done, Revert, Cancel, New edit: `job/close`), so this can wait long.
   */
  whenSettled(): Promise<void> {
    if (this.settled()) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
  }

  private idle(): boolean {
    return this.closed || (this.inFlight === 0 && this.jobsAtRisk().working.length === 0);
  }

  private settled(): boolean {
    if (this.closed) return true;
    const { working, held } = this.jobsAtRisk();
    return this.inFlight === 0 && working.length === 0 && held.length === 0;
  }

  private wakeIdleWaiters(): void {
    if (this.settledWaiters.length && this.settled()) {
      const settled = this.settledWaiters;
      this.settledWaiters = [];
      for (const resolve of settled) resolve();
    }
    if (!this.idleWaiters.length || !this.idle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Start the engine now if it is not running (the first request does this anyway). */
  ensure(): Promise<EngineProcess> {
    if (this.closed) return Promise.reject(closingError());
    if (this.engine?.alive) return Promise.resolve(this.engine);
    this.starting ??= this.startEngine().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Stop the engine for good (idempotent; never rejects). */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    this.wake?.();
    this.wakeIdleWaiters();
    await this.starting?.catch(() => undefined);
    const engine = this.engine;
    this.engine = undefined;
    await engine?.stop();
    this.listeners.clear();
  }

  /**
   * Look the engine up (`locate`) without starting it; a problem is logged once (until it changes or
   * goes away) and returned. The plugin calls this at dev-server start; each engine start calls it too.
   */
  checkEngine(): { command: EngineCommand; problem: string | undefined } {
    const location = this.options.locate?.() ?? { command: this.options.command, problem: undefined };
    if (location.problem && location.problem !== this.reportedProblem) this.options.logger.error(`[spotpatch] ${location.problem}`);
    this.reportedProblem = location.problem;
    return location;
  }

  private async startEngine(): Promise<EngineProcess> {
    const { logger } = this.options;
    // A missing engine is a set-up problem, not a crash: no back-off, no restart counted, logged once.
    const { command, problem } = this.checkEngine();
    if (problem) throw new EngineUnavailableError("ENGINE_UNAVAILABLE", problem);
    if (this.attempts > 0) await this.backOff();
    this.attempts += 1;
    let engine: EngineProcess | undefined;
    let diedEarly = false;
    try {
      engine = await EngineProcess.start({
        command,
        projectRoot: this.options.projectRoot,
        config: this.options.config,
        logger,
        clientVersion: this.options.clientVersion,
        onEvent: (event) => this.emit(event),
        onUnexpectedExit: (reason) => {
          if (engine) this.onDeath(engine, reason);
          else diedEarly = true;
        },
      });
      if (diedEarly || !engine.alive) throw new Error("The SpotPatch engine exited right after start-up.");
    } catch (error) {
      this.lastFailure = Date.now();
      const message = (error as Error).message;
      logger.error(`[spotpatch] ${message}`);
      throw new EngineUnavailableError("ENGINE_UNAVAILABLE", message);
    }
    if (this.closed) {
      await engine.stop();
      throw closingError();
    }
    this.engine = engine;
    logger.info(`[spotpatch] engine started (pid ${engine.pid})`);
    return engine;
  }

  /** Wait the back-off delay before a restart, or refuse when the window's restarts are used up. */
  private async backOff(): Promise<void> {
    const windowMs = this.options.restartWindowMs ?? 60_000;
    const max = this.options.maxRestarts ?? 3;
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < windowMs);
    if (this.restarts.length >= max) {
      const seconds = Math.ceil((this.restarts[0]! + windowMs - now) / 1000);
      const message =
        `The SpotPatch engine stopped or failed to start ${max + 1} times within ${windowMs / 1000} s, so it is ` +
        `not restarted again for ${seconds} s. See the [spotpatch] lines in the Vite log, fix the cause, ` +
        "then retry or restart the dev server.";
      this.options.logger.error(`[spotpatch] ${message}`);
      throw new EngineUnavailableError("ENGINE_FAILED", message, false);
    }
    const delay = (this.options.backoffMs ?? ((n) => 250 * 4 ** n))(this.restarts.length);
    const wait = this.lastFailure + delay - now;
    if (wait > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    if (this.closed) throw closingError();
    this.restarts.push(Date.now());
  }

  private onDeath(engine: EngineProcess, reason: string): void {
    if (this.engine !== engine) return;
    this.engine = undefined;
    this.lastFailure = Date.now();
    const failed = this.failUnsettledJobs(reason);
    this.options.logger.error(
      `[spotpatch] the engine stopped unexpectedly (${reason}); ${failed} unfinished job(s) reported failed. Restarting it.`,
    );
    // Restart now (after the back-off) so the next request finds it ready; errors are logged by startEngine.
    if (!this.closed) this.ensure().catch(() => undefined);
  }

  /** Emit `error` + `status: failed` for every job the dead engine had not settled; returns their count. */
  private failUnsettledJobs(reason: string): number {
    let count = 0;
    const at = new Date().toISOString();
    for (const [jobId, job] of [...this.jobs]) {
      if (SETTLED.has(job.status)) continue;
      count += 1;
      const error: ErrorInfo = { code: "INTERNAL", ...lostJobMessage(job.status, reason) };
      const events: JobEventNotification[] = [
        { jobId, seq: job.lastSeq + 1, at, kind: "error", error },
        { jobId, seq: job.lastSeq + 2, at, kind: "status", status: "failed", message: error.message },
      ];
      this.lost.set(jobId, events);
      for (const event of events) this.emit(event);
    }
    this.jobs.clear();
    this.wakeIdleWaiters();
    return count;
  }

  private emit(event: JobEventNotification): void {
    const job = this.jobs.get(event.jobId);
    if (!job || event.seq > job.lastSeq) {
      const status = event.kind === "status" ? event.status : (job?.status ?? "preparing");
      this.jobs.set(event.jobId, { status, lastSeq: event.seq });
    }
    for (const listener of [...this.listeners]) listener(event);
    if (event.kind === "status") this.wakeIdleWaiters();
  }

  /** Keep the status and `lastSeq` of job snapshots in replies (job/create, job/get, job/list, …). */
  private noteResult(result: unknown): void {
    const snapshots = isSnapshot(result) ? [result] : ((result as { jobs?: unknown[] } | null)?.jobs ?? []);
    for (const snapshot of snapshots) {
      if (!isSnapshot(snapshot)) continue;
      const job = this.jobs.get(snapshot.jobId);
      if (!job || snapshot.lastSeq >= job.lastSeq) {
        this.jobs.set(snapshot.jobId, { status: snapshot.status, lastSeq: snapshot.lastSeq });
      }
    }
    this.wakeIdleWaiters();
  }
}

function isSnapshot(value: unknown): value is JobSnapshot {
  return typeof value === "object" && value !== null && "jobId" in value && "status" in value && "lastSeq" in value;
}

function closingError(): EngineUnavailableError {
  return new EngineUnavailableError("SERVER_CLOSING", "The dev server is closing; SpotPatch is stopped.", false);
}

/** What a job lost with the engine means for the working tree, by its last status (never claims success). */
function lostJobMessage(status: JobStatus, reason: string): { message: string; retryable: boolean } {
  const stopped = `The SpotPatch engine stopped (${reason})`;
  switch (status) {
    case "applying":
    case "reverting":
      return {
        message: `${stopped} while the change was being ${status === "applying" ? "applied" : "reverted"}; check the working tree by hand (git status, git diff).`,
        retryable: false,
      };
    case "applied":
      return {
        message: `${stopped}; the applied change stays in your working tree, but SpotPatch can no longer revert it (use git).`,
        retryable: false,
      };
    case "awaiting-review":
      return { message: `${stopped}; this job's diff is lost and nothing was applied. Start a new job.`, retryable: true };
    default:
      return { message: `${stopped} while this job ran; nothing was applied. Start a new job.`, retryable: true };
  }
}


/** vscode-jsonrpc's own transport failures (write error, read error, rejected pending, inactive
 * connection: codes -32099…-32096) or a non-JSON-RPC error — as opposed to an answer from the engine. */
function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code !== "number" || (code >= -32099 && code <= -32096);
}
