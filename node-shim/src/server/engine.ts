/**
 * One engine child process (`spotpatch-agent serve`) and its JSON-RPC connection (docs/design.md §3):
 * spawn, `initialize`, requests, `job/event` notifications, and an idempotent stop
 * (`shutdown` with a 2 s deadline → `exit` → kill the process tree → `connection.dispose()`).
 *
 * Restarts, job bookkeeping and the browser side live in `supervisor.ts` and `http.ts`.
 */

import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";

import treeKill from "tree-kill";
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from "vscode-jsonrpc/node";

import { frameGuard } from "./frame-guard.js";
import {
  PROTOCOL_VERSION,
  type EngineRequests,
  type InitializeResult,
  type JobEventNotification,
  type TrustedConfig,
} from "../protocol/protocol.generated.js";

export interface EngineCommand {
  /** Executable (no shell is involved). */
  file: string;
  args: readonly string[];
}

export interface EngineLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface EngineStartOptions {
  command: EngineCommand;
  /** Absolute project root (the git top level); also the child's working directory. */
  projectRoot: string;
  config: TrustedConfig;
  logger: EngineLogger;
  clientVersion: string;
  onEvent(event: JobEventNotification): void;
  /** Called once when the process ends without `stop()` having been called. */
  onUnexpectedExit(reason: string): void;
  /** Milliseconds for spawn + `initialize`. */
  startTimeoutMs?: number;
}

/** How the engine process ended: exit code or signal. */
export interface EngineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Shared between `start()`'s exit handler and the instance; `ended` flips in the first exit callback. */
interface Status {
  phase: "starting" | "running" | "stopping";
  ended: boolean;
}

const SHUTDOWN_TIMEOUT_MS = 2000;
const EXIT_GRACE_MS = 1000;

/** Children still running, killed synchronously if Node exits before they were stopped. */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export class EngineProcess {
  readonly pid: number;
  readonly initializeResult: InitializeResult;
  /** Resolves when the process has ended (never rejects). */
  readonly exited: Promise<EngineExit>;
  private readonly child: ChildProcess;
  private readonly connection: MessageConnection;
  private readonly status: Status;
  private stopping: Promise<void> | undefined;

  private constructor(
    child: ChildProcess,
    connection: MessageConnection,
    exited: Promise<EngineExit>,
    init: InitializeResult,
    status: Status,
  ) {
    this.child = child;
    this.pid = child.pid ?? -1;
    this.connection = connection;
    this.exited = exited;
    this.initializeResult = init;
    this.status = status;
  }

  /** True until the process has ended. */
  get alive(): boolean {
    return !this.status.ended;
  }

  /**
   * Spawn the engine and `initialize` it. Rejects (after killing the child) with an `Error` whose
   * message says what to fix: command not found, early exit, timeout or an `initialize` error.
   */
  static async start(options: EngineStartOptions): Promise<EngineProcess> {
    const { command, logger } = options;
    const child = spawn(command.file, [...command.args], {
      cwd: options.projectRoot,
      stdio: ["pipe", "pipe", "pipe"],
      env: process.env,
      windowsHide: true,
    });
    live.add(child);
    const status: Status = { phase: "starting", ended: false };
    let spawnFailure: NodeJS.ErrnoException | undefined;
    const exited = new Promise<EngineExit>((resolve) => {
      child.once("exit", (code, signal) => resolve({ code, signal }));
      child.on("error", (error) => {
        if (child.pid !== undefined) return; // e.g. a failed kill of a running process
        spawnFailure = error;
        resolve({ code: null, signal: null });
      });
    });
    void exited.then(() => live.delete(child));
    child.stdin?.on("error", () => undefined); // EPIPE after the child died: reported through "exit"
    pipeStderr(child, logger);

    // stdout passes the frame guard first: vscode-jsonrpc would buffer any declared body whole.
    const frames = child.stdout.pipe(frameGuard());
    frames.on("error", (error) => {
      logger.error(`[spotpatch] ${error.message}; stopping the engine (its stdout must carry only protocol frames).`);
      child.kill("SIGKILL");
    });
    const connection = createMessageConnection(new StreamMessageReader(frames), new StreamMessageWriter(child.stdin));
    connection.onNotification("job/event", (event: JobEventNotification) => options.onEvent(event));
    connection.onError(([error]) => logger.warn(`[spotpatch] engine connection: ${error.message}`));
    connection.listen();
    void exited.then(({ code, signal }) => {
      status.ended = true;
      connection.dispose(); // rejects every pending request
      if (status.phase === "running") options.onUnexpectedExit(describeExit({ code, signal }));
    });

    const timeoutMs = options.startTimeoutMs ?? 20_000;
    try {
      const init = await withDeadline(
        connection.sendRequest<InitializeResult>("initialize", {
          protocolVersion: PROTOCOL_VERSION,
          processId: process.pid,
          clientInfo: { name: "vite-plugin-spotpatch", version: options.clientVersion },
          projectRoot: options.projectRoot,
          config: options.config,
        } satisfies EngineRequests["initialize"]["params"]),
        timeoutMs,
      );
      await connection.sendNotification("initialized", {});
      if (status.ended) throw new Error("exited right after start-up");
      status.phase = "running"; // from now on an exit is reported through onUnexpectedExit
      return new EngineProcess(child, connection, exited, init, status);
    } catch (error) {
      status.phase = "stopping";
      const exit = await withTimeout(exited, 250);
      await terminate(child, exited);
      connection.dispose();
      throw new Error(startFailure(command, error, spawnFailure, exit, timeoutMs));
    }
  }

  /** Send one request; rejects with vscode-jsonrpc's `ResponseError` or a disposed-connection error. */
  async request<M extends keyof EngineRequests>(method: M, params: EngineRequests[M]["params"]): Promise<EngineRequests[M]["result"]> {
    return await this.connection.sendRequest<EngineRequests[M]["result"]>(method, params);
  }

  /**
   * Stop the engine (idempotent; every caller gets the same promise, which never rejects):
   * `shutdown` (at most 2 s) → `exit` → kill the process tree if it is still running → dispose.
   */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.status.phase = "stopping";
    if (this.alive) {
      await withTimeout(this.connection.sendRequest("shutdown").catch(() => undefined), SHUTDOWN_TIMEOUT_MS);
      try {
        await this.connection.sendNotification("exit");
      } catch {
        /* the process is gone already */
      }
    }
    await terminate(this.child, this.exited);
    this.connection.dispose();
  }
}

/** Wait up to EXIT_GRACE_MS for the child to exit, then kill its whole tree; resolves once it is gone. */
async function terminate(child: ChildProcess, exited: Promise<EngineExit>): Promise<void> {
  if (child.pid === undefined) return;
  const done = await withTimeout(exited.then(() => true), EXIT_GRACE_MS);
  if (done) return;
  await new Promise<void>((resolve) => treeKill(child.pid!, "SIGKILL", () => resolve()));
  if (!(await withTimeout(exited.then(() => true), 5000))) child.kill("SIGKILL");
  await exited;
}

/** `promise`'s value, or undefined when it takes longer than `ms`. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Engine stderr → Vite's logger, one line at a time, with the `[spotpatch]` prefix. */
function pipeStderr(child: ChildProcess, logger: EngineLogger): void {
  if (!child.stderr) return;
  const lines = createInterface({ input: child.stderr, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (!line.trim()) return;
    const text = line.startsWith("[spotpatch]") ? line : `[spotpatch] ${line}`;
    if (/\] (ERROR|CRITICAL) /.test(text) || /^\[spotpatch\] Traceback/.test(text)) logger.error(text);
    else if (/\] WARNING /.test(text)) logger.warn(text);
    else logger.info(text);
  });
}

class StartTimeout extends Error {}

/** `promise`, or a `StartTimeout` rejection after `ms`. */
async function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartTimeout()), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export function describeExit({ code, signal }: EngineExit): string {
  return signal ? `killed by ${signal}` : `exit code ${String(code)}`;
}

/**
 * One sentence saying why the engine did not start and, where it helps, what to configure. It goes to
 * the page too, so it names the executable by its base name only (no absolute path, invariant 3).
 */
function startFailure(
  command: EngineCommand,
  error: unknown,
  spawnFailure: NodeJS.ErrnoException | undefined,
  exit: EngineExit | undefined,
  timeoutMs: number,
): string {
  const name = `"${path.basename(command.file)}"`;
  if (spawnFailure?.code === "ENOENT") {
    return (
      `Could not start the SpotPatch engine: ${name} was not found. Install the engine (spotpatch-agent) ` +
      `or point the plugin at it: spotpatch({ command: [".venv/bin/spotpatch-agent", "serve"] }).`
    );
  }
  if (spawnFailure) return `Could not start the SpotPatch engine ${name}: ${spawnFailure.code ?? "spawn error"}.`;
  if (exit) {
    return `The SpotPatch engine ${name} exited during start-up (${describeExit(exit)}); see the [spotpatch] lines in the Vite terminal.`;
  }
  if (error instanceof StartTimeout) return `The SpotPatch engine ${name} did not initialize within ${timeoutMs} ms.`;
  const data = (error as { data?: { message?: unknown } }).data;
  const message = typeof data?.message === "string" ? data.message : (error as Error).message;
  return `The SpotPatch engine ${name} refused to initialize: ${message}`;
}
