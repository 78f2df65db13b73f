/**
 * A job on the page: Submit (the frozen input, the request with exactly the consents chosen), the live
 * watch from the last `seq` held (reconnecting after a cut, "disconnected" meanwhile), reload restore
 * (`job/list`, `job/events`, then the watch), Cancel, Apply, Revert, and closing the job (Back to edit
 * puts its input back in the composer).
 */
import type { SpotPatchClient } from "../../protocol/client.js";
import type { JobEventNotification, JobSnapshot, SuggestionResult } from "../../protocol/protocol.generated.js";
import { Evidence } from "../visual/evidence.js";
import { ACTIVE, RUNNING, buildAnnotation, storableTarget, type Draft, type JobInput, type JobView } from "./state.js";
import { Store, errorParts } from "./store.js";

/** What a reload keeps of the job (sessionStorage `job`): no live elements. */
interface StoredJob {
  jobId: string;
  input: JobInput | null;
  lastSeq: number;
  /** The suggestion lane's draft once asked (`job/suggest` asks the model once: a reload must not lose it). */
  suggestion?: SuggestionResult | null;
}

const RETRY_MS = 1000;

/** The last event seq the panel holds (0 before the first): the next watch's `afterSeq`. */
const lastSeen = (job: JobView): number => job.events.at(-1)?.seq ?? 0;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/** Statuses of a job another tab may have left: running, awaiting review, applied (still revertable). */
const OPEN_STATUSES = new Set([...ACTIVE, "awaiting-review", "applied"]);

/** The project's newest job still open (see OPEN_STATUSES), if any. */
function openJob(jobs: JobSnapshot[]): JobSnapshot | undefined {
  return jobs
    .filter((j) => OPEN_STATUSES.has(j.status))
    .sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt))[0];
}

export abstract class JobFlow extends Store {
  protected watchAbort: AbortController | undefined;
  protected nextKey = 1;
  private submitting = false;
  /** The targets' pictures: taken when picked, again after Apply and Revert (issue 26). */
  readonly evidence = new Evidence(() => this.set({}));

  abstract open(focus?: boolean): void;
  abstract stopPick(): void;
  protected abstract setDrafts(drafts: Draft[]): void;
  protected abstract syncBadges(): void;

  /** Why Submit (or, with `agent`, Send to my agent) cannot run now (a message), or null. */
  submitProblem(agent = false): string | null {
    const { drafts, health, modelId } = this.state;
    if (!drafts.length) return this.t("composer.empty");
    if (drafts.some((d) => !d.instruction.trim())) return this.t("composer.needInstruction");
    const long = drafts.findIndex((d) => d.instruction.length > this.limits.maxInstructionChars);
    if (long >= 0) return this.t("composer.tooLong", { n: long + 1, max: this.limits.maxInstructionChars });
    if (!modelId && !agent) return this.t("submit.noModel");
    if (health?.state === "consent-required" && !this.state.includeLocal && this.state.applyMode !== "trusted-auto") {
      return this.t("health.consent", { ...health.counts });
    }
    return null;
  }

  /** Start the job: with a model, or with `agent` for the user's own coding agent over MCP (docs/mcp.md). */
  async submit(agent = false): Promise<void> {
    if (this.submitting || this.state.job) return;
    this.submitting = true;
    try {
      await this.submitNow(agent);
    } finally {
      this.submitting = false;
    }
  }

  protected async submitNow(agent: boolean): Promise<void> {
    await this.refreshHealth();
    if (this.state.health?.state === "blocked") return;
    const problem = this.submitProblem(agent);
    const empty = this.state.drafts.find((d) => !d.instruction.trim());
    this.emptyInstructionsFlagged = !!problem && !!empty;
    if (problem && empty) {
      // Where the user's eyes are: the empty box takes the focus (scrolled into view) and says why, next to it.
      this.focusRequest = { kind: "instruction", key: empty.key };
    }
    if (problem) {
      this.set({ notice: { tone: "error", text: problem } });
      return;
    }
    const { modelId } = this.state;
    const applyMode = agent ? "review" : this.state.applyMode; // an agent's job is always reviewed
    if (applyMode === "trusted-auto" && !this.hasConsent()) {
      this.askConsent();
      return;
    }
    // The job's frozen snapshot: later edits, re-picks or a language switch never reach it.
    const input: JobInput = {
      targets: this.state.drafts.map((d) => ({ target: d.target, instruction: d.instruction })),
      modelProfileId: agent ? "" : modelId,
      applyMode,
      ...(agent ? { agent: true } : {}),
    };
    const annotation = buildAnnotation(
      input.targets,
      this.limits.maxInstructionChars,
      location.pathname + location.search,
    );
    await this.evidence.attach(annotation, input.targets.map((entry) => entry.target));
    const params: Parameters<SpotPatchClient["createJob"]>[0] = agent
      ? { annotation, agent: true }
      : { annotation, modelProfileId: modelId, applyMode };
    if (applyMode === "trusted-auto") params.trustedFastModeConsent = true;
    else if (this.state.health?.state === "consent-required" && this.state.includeLocal)
      params.localChangesConsent = true;
    this.stopPick();
    this.set({ notice: null });
    let snapshot: JobSnapshot;
    try {
      snapshot = await this.client.createJob(params);
    } catch (error) {
      const { code, message } = errorParts(error);
      this.set({ notice: { tone: "error", text: this.t("conflict.other", { code, message }) } });
      if (code === "REPO_BLOCKED" || code === "CONSENT_REQUIRED") void this.refreshHealth();
      if (code === "JOB_CONFLICT") {
        // Another job holds the project (maybe from a closed tab): show it, with its Cancel.
        const other = await this.client.listJobs().then((r) => openJob(r.jobs), () => undefined);
        if (other && !this.state.job) await this.adopt(other, null);
      }
      return;
    }
    this.set({ drafts: [] });
    this.startJob(snapshot, input, []);
    this.syncBadges();
  }

  protected startJob(snapshot: JobSnapshot, input: JobInput | null, events: JobEventNotification[]): void {
    const view: JobView = {
      jobId: snapshot.jobId,
      snapshot,
      events,
      input,
      diff: null,
      audit: null,
      actionError: null,
      busy: false,
      startedAt: Date.parse(snapshot.createdAt) || Date.now(),
      endedAt: null,
    };
    this.set({ job: view });
    this.persistJob();
    this.write("open", "1");
    void this.follow(snapshot.jobId);
  }

  protected persistJob(): void {
    const job = this.state.job;
    if (!job) {
      this.write("job", null);
      return;
    }
    const input = job.input && {
      ...job.input,
      targets: job.input.targets.map((entry) => ({ ...entry, target: storableTarget(entry.target) })),
    };
    const stored: StoredJob = { jobId: job.jobId, input, lastSeq: job.snapshot.lastSeq };
    if (job.suggestion) stored.suggestion = job.suggestion;
    this.write("job", JSON.stringify(stored));
  }

  /**
   * After a reload: the job this tab was showing (job/list), its past events, then live ones from afterSeq.
   * Without one (a new tab, or the tab that started a job was closed): the project's newest job that is
   * still running, awaiting review or applied (revertable), shown the same way (the engine is the source
   * of truth), so it can be watched, cancelled, applied or reverted from here.
   */
  protected async restoreJob(): Promise<void> {
    let stored: StoredJob | null = null;
    try {
      stored = JSON.parse(this.read("job") ?? "null") as StoredJob | null;
    } catch {
      stored = null;
    }
    let jobs: JobSnapshot[];
    try {
      jobs = (await this.client.listJobs()).jobs;
    } catch {
      jobs = [];
    }
    if (this.state.job) return; // a Submit won the race meanwhile
    if (!stored?.jobId) {
      const other = openJob(jobs);
      if (other) await this.adopt(other, null);
      return;
    }
    const snapshot = jobs.find((j) => j.jobId === stored.jobId);
    if (snapshot && snapshot.status === "closed") {
      this.write("job", null);
      const other = openJob(jobs);
      if (other) await this.adopt(other, null);
      return;
    }
    if (snapshot) {
      await this.adopt(snapshot, stored.input, stored.suggestion ?? null);
      return;
    }
    // Unknown to this engine (it restarted): the dev server replays the lost job's failure events.
    if (!this.state.open) this.open(false);
    const now = new Date().toISOString();
    const placeholder: JobSnapshot = {
      jobId: stored.jobId,
      status: "running",
      annotationId: "",
      modelProfileId: stored.input?.modelProfileId ?? "",
      applyMode: stored.input?.applyMode ?? "review",
      createdAt: now,
      updatedAt: now,
      turns: 0,
      toolCalls: 0,
      lastSeq: stored.lastSeq,
      files: [],
    };
    this.startJob(placeholder, stored.input, []);
  }

  /** Show `snapshot` (a job of this project) with its past events, then follow it. */
  protected async adopt(snapshot: JobSnapshot, input: JobInput | null, suggestion: SuggestionResult | null = null): Promise<void> {
    if (!this.state.open) this.open(false);
    const past = await this.client.jobEvents(snapshot.jobId, 0).then(
      (r) => r.events,
      () => [],
    );
    if (this.state.job) return;
    const view: JobView = {
      jobId: snapshot.jobId,
      snapshot: { ...snapshot, lastSeq: Math.max(snapshot.lastSeq, past.at(-1)?.seq ?? 0) },
      events: past,
      input,
      diff: null,
      audit: null,
      actionError: null,
      busy: false,
      startedAt: Date.parse(snapshot.createdAt) || Date.now(),
      endedAt: ACTIVE.has(snapshot.status) ? null : Date.parse(snapshot.updatedAt) || Date.now(),
      ...(suggestion ? { suggestion } : {}),
    };
    this.set({ job: view });
    this.persistJob();
    this.write("open", "1");
    await this.loadDiffIfReady();
    void this.follow(snapshot.jobId);
  }

  /** Live events of the job (SSE) from the last seq seen; reconnects after a cut, stops when closed. */
  protected async follow(jobId: string): Promise<void> {
    this.watchAbort?.abort();
    const abort = new AbortController();
    this.watchAbort = abort;
    const { signal } = abort;
    while (!signal.aborted && this.state.job?.jobId === jobId) {
      try {
        for await (const event of this.client.watch(jobId, { afterSeq: lastSeen(this.state.job), signal })) {
          if (signal.aborted) return;
          this.onEvent(event);
        }
        if (signal.aborted || this.state.job?.snapshot.status === "closed") return;
        await this.waitForServer(signal); // the stream ended without the job closing: the server went away
      } catch (error) {
        if (signal.aborted) return;
        const { code, message } = errorParts(error);
        if (code === "JOB_NOT_FOUND") {
          this.jobLost(message);
          return;
        }
        if (code === "NETWORK" || code === "SERVER_CLOSING" || code === "ENGINE_UNAVAILABLE")
          await this.waitForServer(signal);
        else await sleep(RETRY_MS, signal);
      }
    }
  }

  protected jobLost(message: string): void {
    const job = this.state.job;
    if (!job) return;
    const snapshot: JobSnapshot = {
      ...job.snapshot,
      status: "failed",
      error: { code: "INTERNAL", message, retryable: false },
    };
    this.setJob({
      snapshot,
      endedAt: Date.now(),
      actionError: { code: "JOB_NOT_FOUND", message: this.t("job.lost", { message }) },
    });
    this.persistJob();
  }

  /** Show "disconnected" until the dev server answers again, then refresh what may have changed. */
  protected async waitForServer(signal: AbortSignal): Promise<void> {
    for (;;) {
      try {
        await this.client.health();
        break;
      } catch (error) {
        if (signal.aborted) return;
        if (errorParts(error).code !== "NETWORK") break; // it answers (maybe with an error): it is back
        if (!this.state.disconnected) this.set({ disconnected: true });
        await sleep(RETRY_MS, signal);
        if (signal.aborted) return;
      }
    }
    if (this.state.disconnected) {
      this.set({ disconnected: false, notice: { tone: "ok", text: this.t("panel.reconnected") } });
      void this.refreshHealth();
    }
  }

  protected onEvent(event: JobEventNotification): void {
    const job = this.state.job;
    if (!job || event.jobId !== job.jobId || event.seq <= lastSeen(job)) return;
    const snapshot: JobSnapshot = {
      ...job.snapshot,
      lastSeq: Math.max(job.snapshot.lastSeq, event.seq),
      updatedAt: event.at,
    };
    if (event.kind === "status") {
      snapshot.status = event.status;
      if (event.message !== undefined) snapshot.message = event.message;
    } else if (event.kind === "diff") snapshot.files = event.files;
    else if (event.kind === "error") snapshot.error = event.error;
    const ended = event.kind === "status" && !ACTIVE.has(event.status);
    this.setJob({ snapshot, events: [...job.events, event], endedAt: job.endedAt ?? (ended ? Date.now() : null) });  // frozen at review or the end
    this.persistJob();
    if (
      event.kind === "status" &&
      (event.status === "awaiting-review" || event.status === "failed" || event.status === "applied")
    ) {
      void this.loadDiffIfReady();
    }
    if (event.kind === "status" && (event.status === "applied" || event.status === "reverted"))
      void this.showVisual(event.status);
  }

  protected async loadDiffIfReady(): Promise<void> {
    const job = this.state.job;
    if (!job || job.diff || job.snapshot.status === "closed") return;
    const hasDiff = job.snapshot.files.length > 0 || job.events.some((e) => e.kind === "diff");
    if (!hasDiff && job.snapshot.status !== "awaiting-review") return;
    try {
      const diff = await this.client.diff(job.jobId);
      if (this.state.job?.jobId === job.jobId) this.setJob({ diff });
    } catch {
      /* no diff (closed or lost): the files list still shows */
    }
    await this.loadAudit(job.jobId);
  }

  /** The audit ledger's per-target lines for the review (docs/design.md §13); without it the review shows none. */
  protected async loadAudit(jobId: string): Promise<void> {
    try {
      const audit = await this.client.audit(jobId);
      if (this.state.job?.jobId === jobId) this.setJob({ audit: audit.summary.targets.slice(0, 8) });
    } catch {
      /* an engine without the ledger, or the job is gone: the review goes without these lines */
    }
  }

  /** Run one job action; a refusal is explained on the job, the job's own state comes from its events. */
  protected async act(action: (jobId: string) => Promise<JobSnapshot>): Promise<JobSnapshot | null> {
    const job = this.state.job;
    if (!job || job.busy) return null;
    this.setJob({ busy: true, actionError: null });
    try {
      const snapshot = await action(job.jobId);
      if (this.state.job?.jobId === job.jobId) {
        const merged = snapshot.lastSeq >= this.state.job.snapshot.lastSeq ? { ...snapshot } : this.state.job.snapshot;
        this.setJob({ busy: false, snapshot: merged });
      }
      return snapshot;
    } catch (error) {
      this.setJob({ busy: false, actionError: errorParts(error) });
      return null;
    }
  }

  async cancel(): Promise<void> {
    const job = this.state.job;
    if (!job) return;
    if (RUNNING.has(job.snapshot.status)) {
      await this.act((id) => this.client.cancel(id));
      return;
    }
    // In review, Cancel closes the job: nothing was applied.
    if (job.snapshot.status === "awaiting-review") await this.act((id) => this.client.cancel(id));
    await this.closeJob(false);
  }

  async apply(): Promise<unknown> {
    this.evidence.expectUpdate();
    const done = await this.act((id) => this.client.apply(id));
    if (!done) this.evidence.stopWatch();
    return done;
  }

  async revert(): Promise<unknown> {
    this.evidence.expectUpdate();
    const done = await this.act((id) => this.client.revert(id));
    if (!done) this.evidence.stopWatch();
    return done;
  }

  /** Before | after pictures once Apply (the diff says where each target's line went) or Revert updated the page. */
  private async showVisual(phase: "applied" | "reverted"): Promise<void> {
    const job = this.state.job;
    if (!job?.input) return;
    const diff = phase === "reverted" ? null : (job.diff ?? (await this.client.diff(job.jobId).catch(() => null)));
    await this.evidence.compare(phase, job.input.targets.map((entry) => entry.target), diff?.diff ?? null, (visual) => {
      if (this.state.job?.jobId === job.jobId) this.setJob({ visual });
    });
  }

  /** Ask the read-only suggestion lane once for this failed job (`job/suggest`); it changes nothing. */
  async suggest(): Promise<void> {
    const job = this.state.job;
    if (!job || job.suggesting) return;
    this.setJob({ suggesting: true, suggestionError: null });
    try {
      const suggestion = await this.client.suggest(job.jobId);
      if (this.state.job?.jobId === job.jobId) {
        this.setJob({ suggesting: false, suggestion });
        this.persistJob(); // kept across a reload of this tab
      }
    } catch (error) {
      if (this.state.job?.jobId === job.jobId) this.setJob({ suggesting: false, suggestionError: errorParts(error) });
    }
  }

  /** Close the job and return to the composer; `restore` puts the job's targets and instructions back. */
  async closeJob(restore: boolean): Promise<void> {
    const job = this.state.job;
    if (!job) return;
    if (ACTIVE.has(job.snapshot.status)) return;
    if (job.snapshot.status !== "closed") {
      const closed = await this.act((id) => this.client.close(id));
      // A job the engine no longer knows (it restarted) is closed from the page's point of view.
      if (!closed && this.state.job?.actionError?.code !== "JOB_NOT_FOUND") return;
    }
    this.watchAbort?.abort();
    // Back to edit: the job's targets and instructions first, then any picked while it ran.
    const restored: Draft[] =
      restore && job.input
        ? job.input.targets.map((entry) => ({
            key: this.nextKey++,
            target: entry.target,
            instruction: entry.instruction,
            detached: false,
          }))
        : [];
    const drafts = [...restored, ...this.state.drafts].slice(0, this.limits.maxTargets);
    // Back to edit after an agent's job keeps the model chosen before it.
    if (restore && job.input && !job.input.agent)
      this.set({ modelId: job.input.modelProfileId, applyMode: job.input.applyMode });
    this.set({ job: null });
    this.persistJob();
    this.setDrafts(drafts);
    if (restore && drafts[0]) this.focusRequest = { kind: "instruction", key: drafts[0].key };
    void this.refreshHealth();
  }
}
