/**
 * Every string the overlay shows, in one catalog: English and Simplified Chinese (the specification's own
 * language). The first language follows `navigator.language`; the panel's Language select switches it
 * (remembered in localStorage). The action buttons' names are a contract (docs/node-shim.md): Submit,
 * Cancel, Apply, Back to edit, Revert, Copy prompt, Open in editor.
 */

export type Lang = "en" | "zh-CN";
export const LANGS: { id: Lang; name: string }[] = [
  { id: "en", name: "English" },
  { id: "zh-CN", name: "简体中文" },
];

const en = {
  "panel.title": "SpotPatch",
  "panel.close": "Close panel",
  "panel.language": "Language",
  "panel.disconnected": "Disconnected: the dev server does not answer. SpotPatch reconnects when it is back.",
  "panel.reconnected": "Reconnected to the dev server.",
  "panel.loading": "Loading…",
  "panel.sessionError": "SpotPatch could not reach the engine: {message}",

  "action.submit": "Submit",
  "action.cancel": "Cancel",
  "action.apply": "Apply",
  "action.backToEdit": "Back to edit",
  "action.revert": "Revert",
  "action.copyPrompt": "Copy prompt",
  "action.openInEditor": "Open in editor",
  "action.pick": "Pick elements",
  "action.stopPick": "Stop picking",
  "action.area": "Select an area",
  "action.pause": "Pause animations",
  "action.resume": "Resume animations",
  "action.targetText": "Target this text",
  "action.remove": "Remove target {n}",
  "action.newEdit": "New edit",
  "action.dismiss": "Dismiss",
  "action.clearAll": "Remove all targets",

  "pick.hint":
    "Hover to highlight, click to pick, Shift+click to add more, arrows for parent/child, F to freeze, Esc to leave.",
  "pick.shortcut": "Shortcut {shortcut} picks; Alt+click picks one element directly.",
  "pick.label.unknown": "source unknown",
  "pick.frozen": "frozen",
  "pick.start.located": "Nothing at the centre of the page: started on the first element with a source location.",
  "pick.start.focusable": "Nothing at the centre of the page: started on the first focusable element.",
  "pick.toolbar": "Picking tools",
  "pick.status.picking": "Pick mode is on.",
  "pick.status.area": "Drag over an area of the page.",

  "composer.heading": "Targets",
  "composer.empty": "No target yet. Pick an element on the page (or select text and choose “Target this text”).",
  "composer.target": "Target {n}",
  "composer.instruction": "Instruction for target {n}",
  "composer.counter": "{count} / {max} characters",
  "composer.source": "Source",
  "composer.usedAt": "Used at",
  "composer.sourceUnknown": "Source location unknown (SpotPatch could not locate this element in your code).",
  "composer.quote": "Selected text",
  "composer.region": "Area {width} × {height} px",
  "composer.detached": "This element left the page; the target keeps what was picked.",
  "composer.max": "At most {max} targets per job.",
  "composer.needInstruction": "Write an instruction for every target.",
  "composer.tooLong": "The instruction for target {n} is longer than {max} characters.",
  "composer.waiting": "{count} new target(s) wait in the composer for the next job.",
  "composer.opened": "Asked the dev server to open {location} in your editor.",
  "composer.openFailed": "The editor could not be opened: {message}",
  "composer.copied": "The prompt for {count} target(s) is on the clipboard.",
  "composer.copyFailed": "Copying failed: {message}",

  "submit.model": "Model",
  "submit.mode": "Apply mode",
  "submit.mode.review": "Review (you Apply)",
  "submit.mode.auto": "Auto (applies when every gate passes)",
  "submit.mode.trusted-auto": "Trusted-auto (applies directly)",
  "submit.unavailable": "{name} (key not set)",
  "submit.noModel": "Choose a model.",

  "health.heading": "Repository:",
  "health.clean": "Clean: no local changes.",
  "health.consent": "Your working tree has local changes: {staged} staged, {unstaged} unstaged, {untracked} untracked.",
  "health.include": "Include my local changes (the job starts from them and sends the changed parts to the provider)",
  "health.coveredByTrusted": "Trusted-auto's consent covers your local changes.",
  "health.blocked": "SpotPatch cannot start a job in this repository:",
  "health.unknown": "Repository state unknown: {message}",

  "sandbox.heading": "Checks:",
  "sandbox.confined": "run in a sandbox ({mechanism}): no network, writes only in the job's own copy.",
  "sandbox.confinedPlain": "run in a sandbox: no network, writes only in the job's own copy.",
  "sandbox.warnTitle": "Checks will run without the sandbox",
  "sandbox.warnBody":
    "The sandbox is not available here and your config allows that (sandbox: \"warn\"): checks run code the model can change, as you, with your network, home directory and files, before you review the change.",
  "sandbox.requiredTitle": "Checks cannot run here",
  "sandbox.requiredBody":
    "The sandbox is not available here and your config requires it (sandbox: \"required\"), so no check runs: a job with a required check fails.",
  "sandbox.reason": "Why: {reason}",

  "reason.not-a-git-repository": "the project is not a git repository",
  "reason.not-top-level": "the project is not the top level of its git repository",
  "reason.head-unresolvable": "git HEAD cannot be resolved (no commit yet?)",
  "reason.merge-in-progress": "a merge is in progress",
  "reason.rebase-in-progress": "a rebase is in progress",
  "reason.am-in-progress": "git am is in progress",
  "reason.cherry-pick-in-progress": "a cherry-pick is in progress",
  "reason.revert-in-progress": "a git revert is in progress",
  "reason.bisect-in-progress": "a bisect is in progress",
  "reason.conflicts": "there are unresolved conflicts",
  "reason.index-locked": "git's index is locked (.git/index.lock exists)",
  "reason.untracked-symlink": "an untracked symbolic link",
  "reason.untracked-not-regular": "an untracked item that is not a regular file",
  "reason.local-symlink": "a local change leaves a symbolic link",
  "reason.local-changes-over-limit": "the local changes are over SpotPatch's limits",

  "ai.off": "AI is off: no provider is configured.",
  "ai.offKey": "AI is off: the API key variable of the configured provider is not set.",
  "ai.howTo":
    "To enable it, add a provider to spotpatch({ providers: [...] }) in your Vite config (or spotpatch.config.json), set its API key environment variable, and restart the dev server. Meanwhile: Open in editor, or Copy prompt for your own assistant.",

  "consent.title": "Use trusted-auto with {provider}?",
  "consent.intro": "Trusted-auto is the fast mode. With it, for this browser session:",
  "consent.context":
    "Project context, including bounded parts of your local uncommitted changes, is sent to {provider}.",
  "consent.checks": "Your project checks are skipped: nothing is type-checked or tested before the change lands.",
  "consent.direct": "The change is applied to your files directly, without a review step.",
  "consent.revert": "Revert stays available after the change is applied.",
  "consent.checkbox": "I understand and want trusted-auto for {provider} in this browser session",
  "consent.confirm": "Use trusted-auto",
  "consent.note":
    "This consent lasts until you close the browser session and is not used for other providers or modes.",

  "job.heading": "Job",
  "job.model": "{provider} · {model}",
  "job.mode": "Mode: {mode}",
  "job.elapsed": "Elapsed: {time}",
  "job.timeline": "Progress",
  "job.status.preparing": "Preparing an isolated copy",
  "job.status.running": "The model is working",
  "job.status.validating": "Validating the change",
  "job.status.awaiting-review": "Ready for review",
  "job.status.applying": "Applying",
  "job.status.applied": "Applied",
  "job.status.reverting": "Reverting",
  "job.status.reverted": "Reverted",
  "job.status.failed": "Failed",
  "job.status.cancelled": "Cancelled",
  "job.status.closed": "Closed",
  "job.activity.started": "{tool} started",
  "job.activity.ok": "ok",
  "job.activity.error": "error {code}",
  "job.activity.failed": "failed",
  "job.message": "Model",
  "job.check": "Check {name}: {status}",
  "job.ms": "{ms} ms",
  "job.error": "{code}: {message}",
  "job.cancelled": "Cancelled. Nothing was applied.",
  "job.failedNote": "The job failed. What the engine reported:",
  "job.failedDiff": "The change made before the failure (it cannot be applied):",
  "job.applied": "Applied to your files. Vite shows the change; Revert undoes exactly this change.",
  "job.reverted": "Reverted: your files hold what they held before Apply.",
  "job.closeWarning": "New edit closes this job: it can then no longer be reverted from the page.",
  "job.fellBack": "Not applied automatically; review it:",
  "job.lost": "The job is no longer known to the engine: {message}",
  "job.engineMessage": "Engine: {message}",

  "review.heading": "Review",
  "review.files": "Changed files",
  "review.fileStat": "+{added} −{removed}",
  "review.diff": "Diff",
  "review.checks": "Checks",
  "review.noChecks": "No check result was reported.",
  "review.check.passed": "passed",
  "review.check.failed": "failed",
  "review.check.timed-out": "timed out",
  "review.check.skipped": "skipped",
  "review.required": "required",
  "review.output": "Output of {name}",
  "review.noDiff": "The diff is empty.",
  "audit.heading": "What the agent read",
  "audit.readBefore": "Target {index}: read {path} lines {start}–{end} before the first write",
  "audit.readAfter": "Target {index}: read {path} lines {start}–{end} only after the first write",
  "audit.notRead": "Target {index}: did not read {path}",
  "audit.noSource": "Target {index}: no source file was offered",
  "audit.lineMissed": "not the offered line {line}",
  "audit.changed": "not the bytes it was offered",
  "review.unconfined":
    "{count} check(s) ran without the sandbox: as you, with your network, home directory and files, on code the model could change.",
  "check.sandboxed": "sandboxed",
  "check.unconfined": "ran without the sandbox",
  "check.network": "ran with network access",

  "conflict.APPLY_CONFLICT":
    "Apply refused: {message}. Your files changed since the job started (or git is busy), so nothing was written. Resolve it by hand (commit or undo your edits to these files), then Apply again or start a new job.",
  "conflict.REVERT_CONFLICT":
    "Revert refused: {message}. A file the change touched was edited after Apply, so nothing was written. Undo those edits by hand (or revert the change yourself), then try Revert again.",
  "conflict.other": "{code}: {message}",

  "recovered.title": "SpotPatch repaired an interrupted operation after a crash",
  "recovered.rolled-back": "An Apply was rolled back: {paths} hold their earlier content.",
  "recovered.completed": "A Revert was completed: {paths}.",
  "recovered.needs-attention": "Check by hand: {paths} (SpotPatch left them untouched).",
};

export type MessageKey = keyof typeof en;

const zh: Record<MessageKey, string> = {
  "panel.title": "SpotPatch",
  "panel.close": "关闭面板",
  "panel.language": "语言",
  "panel.disconnected": "已断开：开发服务器没有响应。恢复后 SpotPatch 会自动重新连接。",
  "panel.reconnected": "已重新连接到开发服务器。",
  "panel.loading": "加载中…",
  "panel.sessionError": "SpotPatch 无法连接引擎：{message}",

  "action.submit": "提交",
  "action.cancel": "取消",
  "action.apply": "应用",
  "action.backToEdit": "返回编辑",
  "action.revert": "撤销",
  "action.copyPrompt": "复制提示词",
  "action.openInEditor": "在编辑器中打开",
  "action.pick": "选取元素",
  "action.stopPick": "停止选取",
  "action.area": "框选区域",
  "action.pause": "暂停动画",
  "action.resume": "恢复动画",
  "action.targetText": "以选中文字为目标",
  "action.remove": "移除目标 {n}",
  "action.newEdit": "新的修改",
  "action.dismiss": "关闭",
  "action.clearAll": "移除全部目标",

  "pick.hint": "悬停高亮，单击选取，Shift+单击继续添加，方向键选父/子元素，F 冻结，Esc 退出。",
  "pick.shortcut": "快捷键 {shortcut} 进入选取；Alt+单击直接选取一个元素。",
  "pick.label.unknown": "源码位置未知",
  "pick.frozen": "已冻结",
  "pick.start.located": "页面中央没有元素：已从第一个带源码位置的元素开始。",
  "pick.start.focusable": "页面中央没有元素：已从第一个可聚焦的元素开始。",
  "pick.toolbar": "选取工具",
  "pick.status.picking": "选取模式已开启。",
  "pick.status.area": "在页面上拖出一个区域。",

  "composer.heading": "目标",
  "composer.empty": "还没有目标。在页面上选取一个元素（或选中文字后点击“以选中文字为目标”）。",
  "composer.target": "目标 {n}",
  "composer.instruction": "目标 {n} 的修改说明",
  "composer.counter": "{count} / {max} 字符",
  "composer.source": "源码",
  "composer.usedAt": "使用位置",
  "composer.sourceUnknown": "源码位置未知（SpotPatch 无法在你的代码中定位这个元素）。",
  "composer.quote": "选中的文字",
  "composer.region": "区域 {width} × {height} px",
  "composer.detached": "该元素已离开页面；目标保留选取时的信息。",
  "composer.max": "每个任务最多 {max} 个目标。",
  "composer.needInstruction": "请为每个目标写一条修改说明。",
  "composer.tooLong": "目标 {n} 的修改说明超过了 {max} 个字符。",
  "composer.waiting": "有 {count} 个新目标在编辑区等待下一个任务。",
  "composer.opened": "已请求开发服务器在编辑器中打开 {location}。",
  "composer.openFailed": "无法打开编辑器：{message}",
  "composer.copied": "{count} 个目标的提示词已复制到剪贴板。",
  "composer.copyFailed": "复制失败：{message}",

  "submit.model": "模型",
  "submit.mode": "应用方式",
  "submit.mode.review": "审阅（由你应用）",
  "submit.mode.auto": "自动（所有检查通过时应用）",
  "submit.mode.trusted-auto": "信任自动（直接应用）",
  "submit.unavailable": "{name}（未设置密钥）",
  "submit.noModel": "请选择一个模型。",

  "health.heading": "仓库：",
  "health.clean": "干净：没有本地改动。",
  "health.consent": "工作区有本地改动：已暂存 {staged}，未暂存 {unstaged}，未跟踪 {untracked}。",
  "health.include": "包含我的本地改动（任务以它们为基础，并把改动的相关部分发送给模型提供方）",
  "health.coveredByTrusted": "信任自动模式的同意已包含你的本地改动。",
  "health.blocked": "SpotPatch 无法在此仓库中启动任务：",
  "health.unknown": "仓库状态未知：{message}",

  "sandbox.heading": "检查：",
  "sandbox.confined": "在沙箱中运行（{mechanism}）：无网络，只能写入任务自己的副本。",
  "sandbox.confinedPlain": "在沙箱中运行：无网络，只能写入任务自己的副本。",
  "sandbox.warnTitle": "检查将在沙箱之外运行",
  "sandbox.warnBody":
    "此处无法使用沙箱，而你的配置允许这样做（sandbox: \"warn\"）：检查会以你的身份运行模型可以修改的代码，可以访问你的网络、主目录和文件，并且发生在你审阅改动之前。",
  "sandbox.requiredTitle": "检查无法在此运行",
  "sandbox.requiredBody":
    "此处无法使用沙箱，而你的配置要求使用沙箱（sandbox: \"required\"），因此不会运行任何检查：带有必需检查的任务会失败。",
  "sandbox.reason": "原因：{reason}",

  "reason.not-a-git-repository": "项目不是 git 仓库",
  "reason.not-top-level": "项目不是其 git 仓库的顶层目录",
  "reason.head-unresolvable": "无法解析 git HEAD（还没有提交？）",
  "reason.merge-in-progress": "正在进行合并",
  "reason.rebase-in-progress": "正在进行变基",
  "reason.am-in-progress": "正在进行 git am",
  "reason.cherry-pick-in-progress": "正在进行 cherry-pick",
  "reason.revert-in-progress": "正在进行 git revert",
  "reason.bisect-in-progress": "正在进行 bisect",
  "reason.conflicts": "存在未解决的冲突",
  "reason.index-locked": "git 索引被锁定（存在 .git/index.lock）",
  "reason.untracked-symlink": "存在未跟踪的符号链接",
  "reason.untracked-not-regular": "存在不是普通文件的未跟踪项",
  "reason.local-symlink": "本地改动留下了符号链接",
  "reason.local-changes-over-limit": "本地改动超出 SpotPatch 的限制",

  "ai.off": "AI 未启用：没有配置模型提供方。",
  "ai.offKey": "AI 未启用：已配置的提供方的 API 密钥环境变量未设置。",
  "ai.howTo":
    "要启用，请在 Vite 配置（或 spotpatch.config.json）的 spotpatch({ providers: [...] }) 中添加提供方，设置它的 API 密钥环境变量，然后重启开发服务器。在此之前：可以在编辑器中打开，或复制提示词给你自己的助手。",

  "consent.title": "对 {provider} 使用信任自动模式？",
  "consent.intro": "信任自动是快速模式。在本次浏览器会话中：",
  "consent.context": "项目上下文（包括你本地未提交改动的有限部分）会发送给 {provider}。",
  "consent.checks": "跳过项目检查：改动落地前不会进行类型检查或测试。",
  "consent.direct": "改动直接应用到你的文件，没有审阅步骤。",
  "consent.revert": "应用后仍可撤销。",
  "consent.checkbox": "我已了解，并希望在本次浏览器会话中对 {provider} 使用信任自动模式",
  "consent.confirm": "使用信任自动",
  "consent.note": "此同意在浏览器会话结束时失效，不会用于其他提供方或模式。",

  "job.heading": "任务",
  "job.model": "{provider} · {model}",
  "job.mode": "方式：{mode}",
  "job.elapsed": "已用时间：{time}",
  "job.timeline": "进度",
  "job.status.preparing": "正在准备隔离副本",
  "job.status.running": "模型正在工作",
  "job.status.validating": "正在验证改动",
  "job.status.awaiting-review": "等待审阅",
  "job.status.applying": "正在应用",
  "job.status.applied": "已应用",
  "job.status.reverting": "正在撤销",
  "job.status.reverted": "已撤销",
  "job.status.failed": "失败",
  "job.status.cancelled": "已取消",
  "job.status.closed": "已关闭",
  "job.activity.started": "{tool} 开始",
  "job.activity.ok": "成功",
  "job.activity.error": "错误 {code}",
  "job.activity.failed": "失败",
  "job.message": "模型",
  "job.check": "检查 {name}：{status}",
  "job.ms": "{ms} 毫秒",
  "job.error": "{code}：{message}",
  "job.cancelled": "已取消。没有应用任何改动。",
  "job.failedNote": "任务失败。引擎报告：",
  "job.failedDiff": "失败前做出的改动（不能应用）：",
  "job.applied": "已应用到你的文件。Vite 会显示改动；撤销会精确撤回这次改动。",
  "job.reverted": "已撤销：文件恢复为应用之前的内容。",
  "job.closeWarning": "“新的修改”会关闭此任务：之后无法再从页面撤销它。",
  "job.fellBack": "没有自动应用；请审阅：",
  "job.lost": "引擎已不认识这个任务：{message}",
  "job.engineMessage": "引擎：{message}",

  "review.heading": "审阅",
  "review.files": "改动的文件",
  "review.fileStat": "+{added} −{removed}",
  "review.diff": "差异",
  "review.checks": "检查",
  "review.noChecks": "没有报告检查结果。",
  "review.check.passed": "通过",
  "review.check.failed": "失败",
  "review.check.timed-out": "超时",
  "review.check.skipped": "已跳过",
  "review.required": "必需",
  "review.output": "{name} 的输出",
  "review.noDiff": "差异为空。",
  "audit.heading": "智能体读了什么",
  "audit.readBefore": "目标 {index}：在首次写入前读取了 {path} 第 {start}–{end} 行",
  "audit.readAfter": "目标 {index}：在首次写入后才读取 {path} 第 {start}–{end} 行",
  "audit.notRead": "目标 {index}：没有读取 {path}",
  "audit.noSource": "目标 {index}：没有提供源文件",
  "audit.lineMissed": "未包含给定的第 {line} 行",
  "audit.changed": "与提供时的文件内容不同",
  "review.unconfined": "有 {count} 个检查在沙箱之外运行：以你的身份运行模型可以修改的代码，可以访问你的网络、主目录和文件。",
  "check.sandboxed": "已在沙箱中运行",
  "check.unconfined": "在沙箱之外运行",
  "check.network": "运行时可访问网络",

  "conflict.APPLY_CONFLICT":
    "应用被拒绝：{message}。任务开始后你的文件发生了变化（或 git 正忙），因此没有写入任何内容。请手动解决（提交或撤回你对这些文件的修改），然后再次应用或开始新任务。",
  "conflict.REVERT_CONFLICT":
    "撤销被拒绝：{message}。改动涉及的文件在应用后又被编辑过，因此没有写入任何内容。请手动撤回这些编辑（或自行还原改动），然后再试一次撤销。",
  "conflict.other": "{code}：{message}",

  "recovered.title": "SpotPatch 在崩溃后修复了一个中断的操作",
  "recovered.rolled-back": "一次应用已回滚：{paths} 恢复为之前的内容。",
  "recovered.completed": "一次撤销已完成：{paths}。",
  "recovered.needs-attention": "请手动检查：{paths}（SpotPatch 没有改动它们）。",
};

const CATALOG: Record<Lang, Record<MessageKey, string>> = { en, "zh-CN": zh };

export type Translate = (key: MessageKey, vars?: Record<string, string | number>) => string;

/** The first language: the stored choice, else `navigator.language` (any `zh*` → zh-CN), else English. */
export function initialLang(
  stored: string | null,
  language = typeof navigator === "undefined" ? "en" : navigator.language,
): Lang {
  if (stored === "en" || stored === "zh-CN") return stored;
  return /^zh\b/i.test(language ?? "") ? "zh-CN" : "en";
}

export function translator(lang: Lang): Translate {
  const table = CATALOG[lang];
  return (key, vars) => {
    const text = table[key] ?? en[key] ?? key;
    return vars
      ? text.replace(/\{(\w+)\}/g, (whole, name: string) => (name in vars ? String(vars[name]) : whole))
      : text;
  };
}

/** A translator for keys built at run time (status names, reasons); unknown keys fall back to `fallback`. */
export function hasKey(key: string): key is MessageKey {
  return key in en;
}
