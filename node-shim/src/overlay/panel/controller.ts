/**
 * The panel's behaviour without its markup: opening and closing, the session (limits, AI on/off,
 * recovered reports shown once), picking (PICKER's API: pick mode, area, Alt+click, selection, pause,
 * badges), the composer's cards, model and mode with the trusted-auto consent, and the no-AI actions
 * (Copy prompt, Open in editor). The job itself is `JobFlow` (jobs.ts); the state holder `Store`
 * (store.ts). Components read `state` and call these methods; every change notifies the subscribers.
 *
 * Talks to the engine only through the page's client module (`ctx.client`); never logs or stores the
 * token.
 */
import type { ApplyMode, RecoveryReport } from "../../protocol/protocol.generated.js";
import { translator, type Lang } from "../i18n.js";
import { createBadges, createPicker, pauseAnimations, targetFromSelection } from "../picker/index.js";
import type { Badges, PickedTarget, Picker } from "../picker/types.js";
import { refind } from "../visual/locate.js";
import { JobFlow } from "./jobs.js";
import { DEFAULT_LIMITS, buildAnnotation, localPrompt, type Draft, type SessionInfo, type State } from "./state.js";
import { errorParts } from "./store.js";

/** How often the open panel asks whether a coding agent is attached (session/get `agents`). */
const AGENT_POLL_MS = 3000;

/** Error codes meaning no engine answers (not started, stopped, crashed, or the dev server is gone). */
const NO_ENGINE = new Set(["ENGINE_UNAVAILABLE", "ENGINE_STOPPED", "ENGINE_FAILED", "NETWORK"]);

export class Controller extends JobFlow {
  private picker: Picker | undefined;
  private badges: Badges | undefined;
  private pause: { resume(): void } | undefined;
  private initialized: Promise<void> | undefined;
  private selectionListener: (() => void) | undefined;
  /** The loader's top-layer keeper (OverlayContext.keepOnTop): on while the panel is open. */
  keepOnTop: ((on: boolean) => void) | undefined;

  // ---- open / close -----------------------------------------------------------------------------

  /** Open the panel; `focus` moves the keyboard focus into it (not when pick mode starts). */
  open(focus = true): void {
    if (!this.state.open) this.set({ open: true });
    this.launcher()?.toggleAttribute("hidden", true);
    if (focus) this.focusRequest = { kind: "panel" };
    this.listenSelection(true);
    this.keepOnTop?.(true);
    this.badges?.setVisible(true);
    const again = !!this.initialized;
    void this.init();
    window.addEventListener("focus", this.onPageFocus);
    // Whether a coding agent is attached changes when the user starts or stops it elsewhere: asked again every few
    // seconds while the panel is open (one small request; nothing while closed).
    this.agentPoll ??= setInterval(() => void this.refreshAgents(), AGENT_POLL_MS);
    if (again && this.initialized) {
      void this.refreshHealth();
      void this.refreshAgents();
      // A job started meanwhile in another tab (or left by a closed one) is shown on each open.
      if (!this.state.job) void this.initialized.then(() => (this.state.job ? undefined : this.restoreJob()));
    } else if (this.initialized) void this.refreshHealth();
  }

  // Back from a terminal: the agent may have started, and the working tree may have changed (a file created by a
  // client's set-up needs the consent, one removed no longer does).
  private readonly onPageFocus = (): void => {
    void this.refreshAgents();
    void this.refreshHealth();
  };
  private agentPoll: ReturnType<typeof setInterval> | undefined;

  close(): void {
    window.removeEventListener("focus", this.onPageFocus);
    clearInterval(this.agentPoll);
    this.agentPoll = undefined;
    this.stopPick();
    this.listenSelection(false);
    this.keepOnTop?.(false);
    this.badges?.setVisible(false); // closed costs nothing: no badge, no scroll/resize listener
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
    // The cards a reload interrupted come back first (their elements re-found by the badges where they still are).
    const kept = this.state.drafts.length ? [] : this.keptDrafts();
    if (kept.length) {
      this.setDrafts(kept.map((k): Draft => ({ key: this.nextKey++, target: k.target, instruction: k.instruction, detached: false })));
      setTimeout(() => this.reattachDrafts(), 300); // also when the load stops below (no engine, a config problem)
    }
    // spotpatch.config.json cannot be used: SpotPatch is off (every endpoint says so); the panel lists why.
    if (this.options.configProblem) return this.set({ loading: false });
    this.set({ loading: true });
    let session: SessionInfo;
    try {
      session = await this.fetchSession();
    } catch (error) {
      this.set({ loading: false, sessionError: errorParts(error).message });
      this.initialized = undefined;
      return;
    }
    const providers = await this.client.providers().then(
      (r) => r.providers,
      () => [],
    );
    const firstModel = providers.find((p) => p.available)?.models[0]?.id ?? providers[0]?.models[0]?.id ?? "";
    const storedModel = this.read("model", "local");
    const modelId = providers.some((p) => p.models.some((m) => m.id === storedModel)) ? storedModel! : firstModel;
    this.set({
      session,
      providers,
      modelId,
      loading: false,
      sessionError: null,
      recovered: this.unseenReports(session.recovered),
    });
    await this.refreshHealth();
    await this.restoreJob();
    // Restored cards and a restored job's targets: their elements, found again by source location once the app
    // rendered (its first render may still be running).
    for (const delay of [0, 300, 1500]) setTimeout(() => this.reattachDrafts(), delay);
  }

  private async fetchSession(): Promise<SessionInfo> {
    if (typeof this.client.session === "function") {
      const s = await this.client.session();
      return { ...s, limits: { ...DEFAULT_LIMITS, ...s.limits }, recovered: s.recovered ?? [] };
    }
    const { providers } = await this.client.providers();
    return {
      aiEnabled: providers.some((p) => p.available),
      applyModes: ["review"],
      limits: DEFAULT_LIMITS,
      recovered: [],
    };
  }

  /** Crash-repair reports not shown before on this browser (each is shown once). */
  private unseenReports(reports: RecoveryReport[]): RecoveryReport[] {
    const id = (r: RecoveryReport) => `${r.jobId}:${r.operation}:${r.outcome}`;
    let seen: string[] = [];
    try {
      seen = JSON.parse(this.read("recovered", "local") ?? "[]") as string[];
    } catch {
      seen = [];
    }
    const fresh = reports.filter((r) => !seen.includes(id(r)));
    if (fresh.length) this.write("recovered", JSON.stringify([...seen, ...fresh.map(id)].slice(-50)), "local");
    return fresh;
  }

  dismissRecovered(): void {
    this.set({ recovered: [] });
  }

  setLang(lang: Lang): void {
    this.t = translator(lang);
    this.write("lang", lang, "local");
    this.set({ lang, notice: null }); // a notice was written in the old language
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
      // The numbers are the drafts' only while no job of this tab is shown (syncBadges).
      const badgingDrafts = () => !this.state.job?.input;
      this.badges = createBadges(
        this.layer,
        (n) => badgingDrafts() && this.markDetached(n),
        // A target re-found after a re-render (HMR) was updated in place: redraw its card (new source line).
        (n) =>
          badgingDrafts() &&
          this.set({ drafts: this.state.drafts.map((d, i) => (i + 1 === n ? { ...d, detached: false } : d)) }),
      );
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
    if (targets.length > room)
      this.set({ notice: { tone: "error", text: this.t("composer.max", { max: this.limits.maxTargets }) } });
    if (!fresh.length) return;
    // A new target answers an earlier complaint ("no target yet", a failed copy…): drop it.
    if (this.state.notice?.tone === "error" && targets.length <= room) this.set({ notice: null });
    this.setDrafts([...this.state.drafts, ...fresh]);
    this.evidence.take(fresh.map((d) => d.target));
    if (focus) this.focusRequest = { kind: "instruction", key: fresh[0]!.key };
    this.set({});
  }

  protected setDrafts(drafts: Draft[]): void {
    this.set({ drafts });
    this.syncBadges();
  }

  /** Badges: the composer's targets, or while the composer is empty, those of the current job. */
  protected syncBadges(): void {
    this.ensurePicker();
    const { drafts, job } = this.state;
    // While a job of this tab is shown its targets keep their numbers (the review speaks of "Target 1"); targets
    // picked meanwhile wait in the composer unnumbered on the page ("1 new target waits…") until the job closes.
    const targets = job?.input ? job.input.targets.map((e) => e.target) : drafts.map((d) => d.target);
    this.badges?.update(targets.map((target, i) => ({ n: i + 1, target })));
  }

  /** Cards without a live element (restored after a reload) get the element now rendering from their source
   *  location, so their badges show again; a card whose element is not found stays as it is. */
  private reattachDrafts(): void {
    let found = false;
    const live = (target: PickedTarget): PickedTarget => {
      if (target.element || target.region || target.frame) return target; // areas and iframes: not re-found
      const element = refind(target, target.source?.line ?? null);
      if (!element) return target;
      found = true;
      return { ...target, element };
    };
    const drafts = this.state.drafts.map((d) => ({ ...d, target: live(d.target) }));
    // The shown job's targets too (a reload in review): the review's "Target 1" has its badge again.
    const input = this.state.job?.input;
    const targets = input?.targets.map((e) => ({ ...e, target: live(e.target) }));
    if (!found) return;
    if (input && targets) this.setJob({ input: { ...input, targets } });
    this.setDrafts(drafts);
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
    this.write("model", modelId, "local");
    this.set({ modelId });
    if (this.state.applyMode === "trusted-auto" && !this.hasConsent()) this.askConsent();
  }

  setIncludeLocal(includeLocal: boolean): void {
    this.set({ includeLocal });
  }

  setMode(mode: ApplyMode): void {
    this.set({ applyMode: mode });
    if (mode === "trusted-auto" && !this.hasConsent()) this.askConsent();
  }

  /** The dialog's answer: `true` stores the consent for this provider (sessionStorage), else back to review. */
  answerConsent(agree: boolean): void {
    const consent = this.state.consent;
    if (agree && consent) this.write(`consent:${consent.providerId}:trusted-auto`, "1");
    this.set({ consent: null, applyMode: agree ? "trusted-auto" : "review" });
  }

  // ---- without AI -------------------------------------------------------------------------------

  /**
   * The targets' prompt on the clipboard: the composer's cards, else the open job's (a failed job keeps a
   * way to take them elsewhere). Without an engine the page builds a plain prompt itself (issue 26).
   */
  async copyPrompt(): Promise<void> {
    const drafts = this.state.drafts.length ? this.state.drafts : (this.state.job?.input?.targets ?? []);
    if (!drafts.length) {
      this.set({ notice: { tone: "error", text: this.t("composer.empty") } });
      return;
    }
    const targets = drafts.map((d) => ({ target: d.target, instruction: d.instruction.trim() || "(no instruction)" }));
    const annotation = buildAnnotation(targets, this.limits.maxInstructionChars, location.pathname + location.search);
    try {
      const rendered = await this.client.renderPrompt(annotation).catch((error: unknown) => {
        if (NO_ENGINE.has(errorParts(error).code)) return null;
        throw error;
      });
      await writeClipboard(rendered?.text ?? localPrompt(annotation), this.layer);
      const warnings = rendered?.warnings ?? [];
      const copied = this.t(rendered ? "composer.copied" : "composer.copiedLocal", { count: drafts.length });
      // The engine's warnings (a source location it could not use) are the user's to see too (issue 26).
      // (Each message already names its target: "Target 1: …".)
      const list = warnings.map((w) => w.message.replace(/[.\s]+$/, "")).join("; ");
      this.set({
        notice: warnings.length
          ? { tone: "info", text: `${copied} ${this.t("composer.copyWarnings", { list })}` }
          : { tone: rendered ? "ok" : "info", text: copied },
      });
    } catch (error) {
      this.set({
        notice: { tone: "error", text: this.t("composer.copyFailed", { message: errorParts(error).message }) },
      });
    }
  }

  /** Copy the suggestion's text, with its draft label first (a pasted copy still says it changed nothing). */
  async copySuggestion(): Promise<void> {
    const suggestion = this.state.job?.suggestion;
    if (!suggestion) return;
    try {
      await writeClipboard(`${this.t("suggest.label")}\n\n${suggestion.text}`, this.layer);
      this.set({ notice: { tone: "ok", text: this.t("suggest.copied") } });
    } catch (error) {
      this.set({
        notice: { tone: "error", text: this.t("composer.copyFailed", { message: errorParts(error).message }) },
      });
    }
  }

  async openInEditor(source: { file: string; line: number; column?: number }): Promise<void> {
    const location = `${source.file}:${source.line}:${source.column ?? 1}`;
    try {
      const response = await fetch(`/__open-in-editor?file=${encodeURIComponent(location)}`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.set({ notice: { tone: "ok", text: this.t("composer.opened", { location }) } });
    } catch (error) {
      this.set({
        notice: { tone: "error", text: this.t("composer.openFailed", { message: errorParts(error).message }) },
      });
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
