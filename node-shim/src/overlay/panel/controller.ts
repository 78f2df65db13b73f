/**
 * The panel's behaviour without its markup: session and repository state, the composer's targets, the
 * job (create, watch from `afterSeq`, cancel, apply, revert, close), consent, reload restore and
 * reconnect. Components read `state` and call these methods; every change notifies the subscribers.
 *
 * Talks to the engine only through the page's client module (`ctx.client`); never logs or stores the
 * token. Consent for trusted-auto lives in sessionStorage only (per provider and mode).
 */
import type { SpotPatchClient } from "../../client.js";
import type { ApplyMode, JobEventNotification, JobSnapshot, RecoveryReport } from "../../protocol.generated.js";
import { initialLang, translator, type Lang, type Translate } from "../i18n.js";
import { createBadges, createPicker, pauseAnimations, targetFromSelection } from "../picker/index.js";
import type { Badges, PickedTarget, Picker } from "../picker/types.js";
import { storageKey, type OverlayOptions } from "../types.js";
import {
  ACTIVE,
  DEFAULT_LIMITS,
  RUNNING,
  buildAnnotation,
  providerOfModel,
  storableTarget,
  type Draft,
  type JobInput,
  type JobView,
  type SessionInfo,
  type State,
} from "./state.js";

type ClientWithSession = SpotPatchClient & { session?: () => Promise<SessionInfo> };

interface StoredJob {
  jobId: string;
  input: JobInput | null;
  lastSeq: number;
}

const RETRY_MS = 1000;

function errorParts(error: unknown): { code: string; message: string } {
  const e = error as { code?: unknown; message?: unknown };
  return { code: typeof e?.code === "string" ? e.code : "ERROR", message: typeof e?.message === "string" ? e.message : String(error) };
}

/** The last event seq the panel holds (0 before the first): the next watch's `afterSeq`. */
const lastSeen = (job: JobView): number => job.events.at(-1)?.seq ?? 0;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

export class Controller {
  state: State;
  t: Translate;
  private listeners = new Set<() => void>();
  private picker: Picker | undefined;
  private badges: Badges | undefined;
  private pause: { resume(): void } | undefined;
  private watchAbort: AbortController | undefined;
  private nextKey = 1;
  private initialized: Promise<void> | undefined;
  private selectionListener: (() => void) | undefined;
  private submitting = false;
  /** Focus requests for the view (e.g. a new card's instruction box). */
  focusRequest: { kind: "instruction"; key: number } | { kind: "panel" } | null = null;

  constructor(
    readonly client: ClientWithSession,
    readonly options: OverlayOptions,
    readonly layer: HTMLElement,
  ) {
    const lang = initialLang(this.read("lang", localStorage));
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

  // ---- plumbing ---------------------------------------------------------------------------------

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(patch: Partial<State>): void {
    this.state = { ...this.state, ...patch };
    for (const listener of this.listeners) listener();
  }

  private setJob(patch: Partial<JobView>): void {
    if (!this.state.job) return;
    this.set({ job: { ...this.state.job, ...patch } });
  }

  private read(name: string, storage: Storage = sessionStorage): string | null {
    try {
      return storage.getItem(storageKey(this.options.projectKey, name));
    } catch {
      return null;
    }
  }

  private write(name: string, value: string | null, storage: Storage = sessionStorage): void {
    try {
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

  // ---- open / close -----------------------------------------------------------------------------

  /** Open the panel; `focus` moves the keyboard focus into it (not when pick mode starts). */
  open(focus = true): void {
    if (!this.state.open) this.set({ open: true });
    this.launcher()?.toggleAttribute("hidden", true);
    if (focus) this.focusRequest = { kind: "panel" };
    this.listenSelection(true);
    this.init();
    if (this.initialized) this.refreshHealth();
  }

  close(): void {
    this.stopPick();
    this.listenSelection(false);
    this.set({ open: false });
    if (!this.state.job) this.write("open", null);
    const launcher = this.launcher();
    if (launcher) {
      launcher.removeAttribute("hidden");
      launcher.focus({ preventScroll: true });
    }
  }

  /** The loader's launcher button (hidden while the panel is open: the panel has its own close button). */
  private launcher(): HTMLElement | null {
    return (this.layer.getRootNode() as ShadowRoot).querySelector?.(".sp-launcher") ?? null;
  }

  toggle(): void {
    if (this.state.open) this.close();
    else this.open();
  }

  /** First open: session, providers, health, recovered reports, and the job a reload left. */
  init(): Promise<void> {
    return (this.initialized ??= this.load());
  }

  private async load(): Promise<void> {
    this.set({ loading: true });
    let session: SessionInfo;
    try {
      session = await this.fetchSession();
    } catch (error) {
      this.set({ loading: false, sessionError: errorParts(error).message });
      this.initialized = undefined;
      return;
    }
    const providers = await this.client.providers().then((r) => r.providers, () => []);
    const firstModel = providers.find((p) => p.available)?.models[0]?.id ?? providers[0]?.models[0]?.id ?? "";
    const storedModel = this.read("model", localStorage);
    const modelId = providers.some((p) => p.models.some((m) => m.id === storedModel)) ? storedModel! : firstModel;
    this.set({ session, providers, modelId, loading: false, sessionError: null, recovered: this.unseenReports(session.recovered) });
    await this.refreshHealth();
    await this.restoreJob();
  }

  private async fetchSession(): Promise<SessionInfo> {
    if (typeof this.client.session === "function") {
      const s = await this.client.session();
      return { ...s, limits: { ...DEFAULT_LIMITS, ...s.limits }, recovered: s.recovered ?? [] };
    }
    const { providers } = await this.client.providers();
    return { aiEnabled: providers.some((p) => p.available), applyModes: ["review"], limits: DEFAULT_LIMITS, recovered: [] };
  }

  /** Crash-repair reports not shown before on this browser (each is shown once). */
  private unseenReports(reports: RecoveryReport[]): RecoveryReport[] {
    const id = (r: RecoveryReport) => `${r.jobId}:${r.operation}:${r.outcome}`;
    let seen: string[] = [];
    try {
      seen = JSON.parse(this.read("recovered", localStorage) ?? "[]") as string[];
    } catch {
      seen = [];
    }
    const fresh = reports.filter((r) => !seen.includes(id(r)));
    if (fresh.length) this.write("recovered", JSON.stringify([...seen, ...fresh.map(id)].slice(-50)), localStorage);
    return fresh;
  }

  dismissRecovered(): void {
    this.set({ recovered: [] });
  }

  async refreshHealth(): Promise<void> {
    try {
      const health = await this.client.health();
      this.set({ health, healthError: null });
    } catch (error) {
      this.set({ healthError: errorParts(error).message });
    }
  }

  setLang(lang: Lang): void {
    this.t = translator(lang);
    this.write("lang", lang, localStorage);
    this.set({ lang });
  }

  setNotice(notice: State["notice"]): void {
    this.set({ notice });
  }

  // ---- picking ----------------------------------------------------------------------------------

  private ensurePicker(): Picker {
    if (!this.picker) {
      this.picker = createPicker({
        layer: this.layer,
        onPick: (targets, { stay }) => {
          this.addTargets(targets, !stay);
          if (!stay) this.stopPick();
        },
        onExit: () => this.set({ picking: null }),
        t: (key, vars) => (this.t as (k: string, v?: Record<string, string | number>) => string)(key, vars),
      });
      this.badges = createBadges(this.layer, (n) => this.markDetached(n));
    }
    return this.picker;
  }

  startPick(mode: "element" | "area" = "element"): void {
    const picker = this.ensurePicker();
    if (picker.active) picker.stop();
    picker.start(mode);
    this.set({ picking: mode });
  }

  stopPick(): void {
    if (this.picker?.active) this.picker.stop();
    if (this.state.picking) this.set({ picking: null });
  }

  togglePick(): void {
    if (!this.state.open) this.open(false);
    if (this.picker?.active) this.stopPick();
    else this.startPick("element");
  }

  altPick(event: MouseEvent): void {
    const target = this.ensurePicker().pickFromEvent(event);
    if (!this.state.open) this.open(false);
    if (target) this.addTargets([target]);
  }

  togglePause(): void {
    if (this.pause) {
      this.pause.resume();
      this.pause = undefined;
      this.set({ paused: false });
    } else {
      this.pause = pauseAnimations(document);
      this.set({ paused: true });
    }
  }

  private listenSelection(on: boolean): void {
    if (on && !this.selectionListener) {
      this.selectionListener = () => {
        const selection = document.getSelection();
        const has = !!selection && !selection.isCollapsed && selection.toString().trim() !== "";
        if (has !== this.state.hasSelection) this.set({ hasSelection: has });
      };
      document.addEventListener("selectionchange", this.selectionListener);
      this.selectionListener();
    } else if (!on && this.selectionListener) {
      document.removeEventListener("selectionchange", this.selectionListener);
      this.selectionListener = undefined;
    }
  }

  targetSelection(): void {
    const target = targetFromSelection(document.getSelection());
    if (target) this.addTargets([target]);
  }

  /** Add picked targets as cards (up to maxTargets); `focus` moves the focus to the first new card's box. */
  addTargets(targets: PickedTarget[], focus = true): void {
    const room = this.limits.maxTargets - this.state.drafts.length;
    if (room <= 0) {
      this.set({ notice: { tone: "error", text: this.t("composer.max", { max: this.limits.maxTargets }) } });
      return;
    }
    const fresh = targets
      .filter((t) => !t.element || !this.state.drafts.some((d) => d.target.element === t.element))
      .slice(0, room)
      .map((target): Draft => ({ key: this.nextKey++, target, instruction: "", detached: false }));
    if (targets.length > room) this.set({ notice: { tone: "error", text: this.t("composer.max", { max: this.limits.maxTargets }) } });
    if (!fresh.length) return;
    this.setDrafts([...this.state.drafts, ...fresh]);
    if (focus) this.focusRequest = { kind: "instruction", key: fresh[0]!.key };
    this.set({});
  }

  private setDrafts(drafts: Draft[]): void {
    this.set({ drafts });
    this.syncBadges();
  }

  /** Badges: the composer's targets, or while the composer is empty, those of the current job. */
  private syncBadges(): void {
    this.ensurePicker();
    const { drafts, job } = this.state;
    const targets = drafts.length || !job?.input ? drafts.map((d) => d.target) : job.input.targets.map((e) => e.target);
    this.badges?.update(targets.map((target, i) => ({ n: i + 1, target })));
  }

  private markDetached(n: number): void {
    const drafts = this.state.drafts.map((d, i) => (i + 1 === n ? { ...d, detached: true } : d));
    this.set({ drafts });
  }

  setInstruction(key: number, instruction: string): void {
    this.set({ drafts: this.state.drafts.map((d) => (d.key === key ? { ...d, instruction } : d)) });
  }

  remove(key: number): void {
    this.setDrafts(this.state.drafts.filter((d) => d.key !== key));
  }

  clearDrafts(): void {
    this.setDrafts([]);
  }

  // ---- submit options ---------------------------------------------------------------------------

  setModel(modelId: string): void {
    this.write("model", modelId, localStorage);
    this.set({ modelId });
    if (this.state.applyMode === "trusted-auto" && !this.hasConsent()) this.askConsent();
  }

  setIncludeLocal(includeLocal: boolean): void {
    this.set({ includeLocal });
  }

  private consentKey(): string | null {
    const found = providerOfModel(this.state.providers, this.state.modelId);
    return found ? `consent:${found.provider.id}:trusted-auto` : null;
  }

  hasConsent(): boolean {
    const key = this.consentKey();
    return !!key && this.read(key) === "1";
  }

  setMode(mode: ApplyMode): void {
    this.set({ applyMode: mode });
    if (mode === "trusted-auto" && !this.hasConsent()) this.askConsent();
  }

  private askConsent(): void {
    const found = providerOfModel(this.state.providers, this.state.modelId);
    if (found) this.set({ consent: { providerId: found.provider.id, providerName: found.provider.displayName } });
  }

  /** The dialog's answer: `true` stores the consent for this provider (sessionStorage), else back to review. */
  answerConsent(agree: boolean): void {
    const consent = this.state.consent;
    if (agree && consent) this.write(`consent:${consent.providerId}:trusted-auto`, "1");
    this.set({ consent: null, applyMode: agree ? "trusted-auto" : "review" });
  }

  // ---- jobs -------------------------------------------------------------------------------------

  /** Why Submit cannot run now (a message), or null. */
  submitProblem(): string | null {
    const { drafts, health, modelId } = this.state;
    if (!drafts.length) return this.t("composer.empty");
    if (drafts.some((d) => !d.instruction.trim())) return this.t("composer.needInstruction");
    const long = drafts.findIndex((d) => d.instruction.length > this.limits.maxInstructionChars);
    if (long >= 0) return this.t("composer.tooLong", { n: long + 1, max: this.limits.maxInstructionChars });
    if (!modelId) return this.t("submit.noModel");
    if (health?.state === "consent-required" && !this.state.includeLocal && this.state.applyMode !== "trusted-auto") {
      return this.t("health.consent", { ...health.counts });
    }
    return null;
  }

  async submit(): Promise<void> {
    if (this.submitting || this.state.job) return;
    this.submitting = true;
    try {
      await this.submitNow();
    } finally {
      this.submitting = false;
    }
  }

  private async submitNow(): Promise<void> {
    await this.refreshHealth();
    if (this.state.health?.state === "blocked") return;
    const problem = this.submitProblem();
    if (problem) {
      this.set({ notice: { tone: "error", text: problem } });
      return;
    }
    const { applyMode, modelId } = this.state;
    if (applyMode === "trusted-auto" && !this.hasConsent()) {
      this.askConsent();
      return;
    }
    // The job's frozen snapshot: later edits, re-picks or a language switch never reach it.
    const input: JobInput = {
      targets: this.state.drafts.map((d) => ({ target: d.target, instruction: d.instruction })),
      modelProfileId: modelId,
      applyMode,
    };
    const annotation = buildAnnotation(input.targets, this.limits.maxInstructionChars, location.pathname + location.search);
    const params: Parameters<SpotPatchClient["createJob"]>[0] = { annotation, modelProfileId: modelId, applyMode };
    if (applyMode === "trusted-auto") params.trustedFastModeConsent = true;
    else if (this.state.health?.state === "consent-required" && this.state.includeLocal) params.localChangesConsent = true;
    this.stopPick();
    this.set({ notice: null });
    let snapshot: JobSnapshot;
    try {
      snapshot = await this.client.createJob(params);
    } catch (error) {
      const { code, message } = errorParts(error);
      this.set({ notice: { tone: "error", text: this.t("conflict.other", { code, message }) } });
      if (code === "REPO_BLOCKED" || code === "CONSENT_REQUIRED") void this.refreshHealth();
      return;
    }
    this.set({ drafts: [] });
    this.startJob(snapshot, input, []);
    this.syncBadges();
  }

  private startJob(snapshot: JobSnapshot, input: JobInput | null, events: JobEventNotification[]): void {
    const view: JobView = {
      jobId: snapshot.jobId,
      snapshot,
      events,
      input,
      diff: null,
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

  private persistJob(): void {
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
    this.write("job", JSON.stringify(stored));
  }

  /** After a reload: the job this tab was showing (job/list), its past events, then live ones from afterSeq. */
  private async restoreJob(): Promise<void> {
    let stored: StoredJob | null = null;
    try {
      stored = JSON.parse(this.read("job") ?? "null") as StoredJob | null;
    } catch {
      stored = null;
    }
    if (!stored?.jobId) return;
    let jobs: JobSnapshot[] = [];
    try {
      jobs = (await this.client.listJobs()).jobs;
    } catch {
      jobs = [];
    }
    const snapshot = jobs.find((j) => j.jobId === stored!.jobId);
    if (snapshot && snapshot.status === "closed") {
      this.write("job", null);
      return;
    }
    if (!this.state.open) this.open(false);
    if (snapshot) {
      const past = await this.client.jobEvents(snapshot.jobId, 0).then((r) => r.events, () => []);
      const view: JobView = {
        jobId: snapshot.jobId,
        snapshot: { ...snapshot, lastSeq: Math.max(snapshot.lastSeq, past.at(-1)?.seq ?? 0) },
        events: past,
        input: stored.input,
        diff: null,
        actionError: null,
        busy: false,
        startedAt: Date.parse(snapshot.createdAt) || Date.now(),
        endedAt: ACTIVE.has(snapshot.status) ? null : Date.parse(snapshot.updatedAt) || Date.now(),
      };
      this.set({ job: view });
      this.write("open", "1");
      await this.loadDiffIfReady();
      void this.follow(snapshot.jobId);
      return;
    }
    // Unknown to this engine (it restarted): the dev server replays the lost job's failure events.
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

  /** Live events of the job (SSE) from the last seq seen; reconnects after a cut, stops when closed. */
  private async follow(jobId: string): Promise<void> {
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
        if (code === "NETWORK" || code === "SERVER_CLOSING" || code === "ENGINE_UNAVAILABLE") await this.waitForServer(signal);
        else await sleep(RETRY_MS, signal);
      }
    }
  }

  private jobLost(message: string): void {
    const job = this.state.job;
    if (!job) return;
    const snapshot: JobSnapshot = { ...job.snapshot, status: "failed", error: { code: "INTERNAL", message, retryable: false } };
    this.setJob({ snapshot, endedAt: Date.now(), actionError: { code: "JOB_NOT_FOUND", message: this.t("job.lost", { message }) } });
    this.persistJob();
  }

  /** Show "disconnected" until the dev server answers again, then refresh what may have changed. */
  private async waitForServer(signal: AbortSignal): Promise<void> {
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

  private onEvent(event: JobEventNotification): void {
    const job = this.state.job;
    if (!job || event.jobId !== job.jobId || event.seq <= lastSeen(job)) return;
    const snapshot: JobSnapshot = { ...job.snapshot, lastSeq: Math.max(job.snapshot.lastSeq, event.seq), updatedAt: event.at };
    if (event.kind === "status") {
      snapshot.status = event.status;
      if (event.message !== undefined) snapshot.message = event.message;
    } else if (event.kind === "diff") snapshot.files = event.files;
    else if (event.kind === "error") snapshot.error = event.error;
    const ended = event.kind === "status" && !ACTIVE.has(event.status);
    this.setJob({ snapshot, events: [...job.events, event], endedAt: ended ? Date.now() : job.endedAt });
    this.persistJob();
    if (event.kind === "status" && (event.status === "awaiting-review" || event.status === "failed" || event.status === "applied")) {
      void this.loadDiffIfReady();
    }
  }

  private async loadDiffIfReady(): Promise<void> {
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
  }

  /** Run one job action; a refusal is explained on the job, the job's own state comes from its events. */
  private async act(action: (jobId: string) => Promise<JobSnapshot>): Promise<JobSnapshot | null> {
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

  apply(): Promise<unknown> {
    return this.act((id) => this.client.apply(id));
  }

  revert(): Promise<unknown> {
    return this.act((id) => this.client.revert(id));
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
    const drafts = restore && job.input
      ? job.input.targets.map((entry): Draft => ({ key: this.nextKey++, target: entry.target, instruction: entry.instruction, detached: false }))
      : this.state.drafts;
    if (restore && job.input) this.set({ modelId: job.input.modelProfileId, applyMode: job.input.applyMode });
    this.set({ job: null });
    this.persistJob();
    this.setDrafts(drafts);
    if (restore && drafts[0]) this.focusRequest = { kind: "instruction", key: drafts[0].key };
    void this.refreshHealth();
  }

  // ---- without AI -------------------------------------------------------------------------------

  async copyPrompt(): Promise<void> {
    const drafts = this.state.drafts;
    if (!drafts.length) {
      this.set({ notice: { tone: "error", text: this.t("composer.empty") } });
      return;
    }
    const targets = drafts.map((d) => ({ target: d.target, instruction: d.instruction.trim() || "(no instruction)" }));
    try {
      const { text } = await this.client.renderPrompt(buildAnnotation(targets, this.limits.maxInstructionChars, location.pathname + location.search));
      await writeClipboard(text, this.layer);
      this.set({ notice: { tone: "ok", text: this.t("composer.copied", { count: drafts.length }) } });
    } catch (error) {
      this.set({ notice: { tone: "error", text: this.t("composer.copyFailed", { message: errorParts(error).message }) } });
    }
  }

  async openInEditor(source: { file: string; line: number; column?: number }): Promise<void> {
    const location = `${source.file}:${source.line}:${source.column ?? 1}`;
    try {
      const response = await fetch(`/__open-in-editor?file=${encodeURIComponent(location)}`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.set({ notice: { tone: "ok", text: this.t("composer.opened", { location }) } });
    } catch (error) {
      this.set({ notice: { tone: "error", text: this.t("composer.openFailed", { message: errorParts(error).message }) } });
    }
  }

  destroy(): void {
    this.watchAbort?.abort();
    this.picker?.destroy();
    this.badges?.destroy();
    this.pause?.resume();
    this.listenSelection(false);
  }
}

/** The Clipboard API, or a hidden textarea + execCommand where it is not available. */
async function writeClipboard(text: string, layer: HTMLElement): Promise<void> {
  if (navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      /* permission refused: the old way */
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("aria-hidden", "true");
  area.style.cssText = "position:fixed;opacity:0;pointer-events:none;";
  layer.appendChild(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  if (!ok) throw new Error("the browser refused to copy");
}
