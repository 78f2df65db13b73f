"""``spotpatch-agent run``: one job from the terminal, with live progress (docs/design.md §1).

Every target's location is checked first (``prompt/render``'s warnings, printed to stderr): exit 2 when the
project is not a git repository or no target has a usable location. Without a usable provider it prints the
v1 prompt (the text ``prompt/render`` returns) and how to configure one, and exits 3. The repository's health
is shown as the page shows it (reasons, paths, fixes); a blocked tree, or local changes without
``--include-local-changes``, exits 1 before any job. Exit 0 only when the job reached ``awaiting-review``
and its reviewed changeset was saved (``worktree/reviews.py``) for ``spotpatch-agent apply JOB_ID``, which
writes exactly it (issue 25). ``--apply`` is refused (exit 2, before any job): a fresh run is never applied
unreviewed. ``--json`` prints one object for scripts (:func:`run_report`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_PROMPT_ONLY, EXIT_USAGE
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.models import JobCreateParams, SpotAnnotation, TrustedConfig

CONFIG_FILE = "spotpatch.config.json"


def format_event(event: dict[str, Any], *, speaker: str = "model") -> str | None:
    """One human line for a ``job/event`` (None for events not worth a line)."""
    kind = event["kind"]
    if kind == "status":
        shown = event.get("message") and event["status"] == "failed"
        return f"[{event['seq']:>3}] status: {event['status']}" + (f" — {event['message']}" if shown else "")
    if kind == "activity" and event.get("phase") == "finished":
        mark = "ok" if event.get("ok") else (f"refused ({event['errorCode']})" if event.get("errorCode") else "failed")
        where = f" {event['path']}" if event.get("path") else ""
        return (f"[{event['seq']:>3}]   turn {event.get('turn')}: {event['tool']}{where} → {mark}, "
                f"{event.get('durationMs')} ms")
    if kind == "message":
        text = " ".join(str(event.get("text", "")).split())
        return f"[{event['seq']:>3}]   {speaker} says: {redact_cut(text, 300, ellipsis='')}"
    if kind == "diff":
        files = ", ".join(f"{f['path']} (+{f['added']}/-{f['removed']})" for f in event.get("files", []))
        return f"[{event['seq']:>3}] diff ready: {files}"
    if kind == "error":
        err = event.get("error") or {}
        return f"[{event['seq']:>3}] error {err.get('code')}: {err.get('message')}"
    if kind == "check":
        return (f"[{event['seq']:>3}] check {event['checkId']}: {event['status']}, {event['durationMs']} ms"
                f"{check_how(event)}")
    return None


def format_suggestion(result: dict[str, Any]) -> str:
    """A ``job/suggest`` result (wire dict) for the terminal: the label, the outcome, the draft, then its
    citation check and the diff check. Every line of the draft is indented under the label."""
    head = [
        "",
        f"=== SUGGESTION (draft) from {result['provider']} / {result['model']} ===",
        result["label"],
        f"Outcome: {result['outcome']} (breaker: {result['breaker']}) — {result['message']}",
    ]
    if result.get("error"):
        head.append(f"Error: {result['error']['code']}: {result['error']['message']}")
    excerpts = ", ".join(f"{e['path']}:{e['startLine']}-{e['endLine']}" for e in result["excerpts"]) or "none"
    head.append(f"Excerpts offered: {excerpts}")
    body = ["    " + line for line in result["text"].splitlines()] or ["    (no text)"]
    flagged = [c["ref"] for c in result["citations"] if not c["verified"]]
    tail = [f"Citations: {result['verified']} verified, {result['unverified']} unverified"
            + (f" (NOT checked: {', '.join(flagged[:10])})" if flagged else "")]
    diff = result.get("diff")
    if diff:
        tail.append(f"Diff: {diff['summary']}" + (f" — {diff['reason']}" if diff.get("reason") else "")
                    + " (never applied)")
    tail.append("=== end of suggestion: nothing was changed ===")
    return "\n".join([*head, "", *body, "", *tail])


def check_how(event: dict[str, Any]) -> str:
    """How a ``check`` event's check ran, for a terminal line: `` (confined, no network)``,
    `` (confined, WITH NETWORK)`` or `` — RAN UNCONFINED (no sandbox here; sandbox: "warn")``; empty when skipped."""
    if event.get("sandbox") == "unconfined":
        return ' — RAN UNCONFINED (no sandbox here; sandbox: "warn")'
    if event.get("sandbox") == "confined":
        return " (confined, WITH NETWORK)" if event.get("network") else " (confined, no network)"
    return ""


def sandbox_banner(box: Any) -> str | None:
    """A prominent line about the check sandbox for the terminal (``ChecksSandbox`` or None), or None when
    checks run confined (or none are configured)."""
    if box is None or box.state == "confined":
        return None
    if box.policy == "warn":
        return ("WARNING: checks will run UNCONFINED — they can read your files and secrets and use the network. "
                f"{box.reason}.")
    return f"NOTE: checks cannot run here, so jobs that would run them fail: {box.reason}."


def print_event(out: TextIO, *, speaker: str = "model") -> Any:
    def send(event: dict[str, Any]) -> None:
        line = format_event(event, speaker=speaker)
        if line:
            print(line, file=out, flush=True)

    return send


#: Validation errors listed for an invalid config file; the rest are counted.
CONFIG_ERRORS_SHOWN = 20


class ConfigFileError(Exception):
    """The config file cannot be used. ``reason`` completes "<file> …" (``is not readable JSON: …``);
    ``lines`` are the validation errors by location (``providers.0.apiKey: Extra inputs are not
    permitted``), never with the values: a key pasted into the file must not be echoed."""

    def __init__(self, reason: str, lines: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lines = lines or []


#: The largest config file read (1 MiB; a real one is a few KB); the Vite plugin has the same cap (config-file.ts).
MAX_CONFIG_FILE_BYTES = 1 << 20


def read_config_file(file: Path) -> TrustedConfig:
    """The ``TrustedConfig`` in ``file`` (UTF-8, a leading BOM allowed); raises :class:`ConfigFileError`
    for a file that is not a regular file (a folder, a FIFO) or cannot be read (no permission), is not JSON
    (nested too deeply included) or does not match the model. Shared by ``run`` and ``doctor``."""
    from pydantic import ValidationError

    if file.exists() and not file.is_file():  # a FIFO would block for good; a folder cannot be read
        raise ConfigFileError("is not a regular file")
    try:
        size = file.stat().st_size
        if size > MAX_CONFIG_FILE_BYTES:  # before parsing: validation time grows faster than the file
            raise ConfigFileError(f"is {size} bytes, over the {MAX_CONFIG_FILE_BYTES} a config may have (a SpotPatch "
                                  "config is a few kilobytes)")
        raw = json.loads(file.read_text("utf-8-sig"))
    except OSError as exc:  # its str() names the absolute path; the reason alone is enough
        raise ConfigFileError(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    except RecursionError:
        raise ConfigFileError("is not usable JSON: it is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError say where, not what
        raise ConfigFileError(f"is not readable JSON: {redact_cut(str(exc), 300)}") from None
    try:
        return TrustedConfig.model_validate(raw)
    except RecursionError:
        raise ConfigFileError("is not a valid SpotPatch config: it is nested too deeply") from None
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        lines = [f"{one_line('.'.join(str(p) for p in e['loc'])[:200]) or '(top level)'}: {redact_cut(e['msg'], 300)}"
                 for e in errors[:CONFIG_ERRORS_SHOWN]]
        if len(errors) > CONFIG_ERRORS_SHOWN:
            lines.append(f"+{len(errors) - CONFIG_ERRORS_SHOWN} more")
        raise ConfigFileError(f"is not a valid SpotPatch config ({len(errors)} error"
                              f"{'s' if len(errors) != 1 else ''})", lines) from None


def load_config(project: Path, path: Path | None) -> TrustedConfig:
    """Trusted config from ``path`` or ``<project>/spotpatch.config.json`` (empty when absent); exits 2
    naming the file and each bad key (never a value) when it cannot be used (:func:`read_config_file`)."""
    file = path or project / CONFIG_FILE
    if not file.exists():
        if path is not None:
            print(f"spotpatch-agent: config file {path} does not exist", file=sys.stderr)
            raise SystemExit(EXIT_USAGE)
        return TrustedConfig()
    try:
        return read_config_file(file)
    except ConfigFileError as exc:
        print("\n  ".join([f"spotpatch-agent: {file.name} {exc.reason}", *exc.lines]), file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def build_annotation(targets: list[str], instructions: list[str]) -> SpotAnnotation:
    if not targets or len(targets) != len(instructions):
        usage_error("give one --instruction per --target (at least one pair)")
    items = []
    for i, (target, instruction) in enumerate(zip(targets, instructions, strict=True), start=1):
        m = re.fullmatch(r"(.+?):([0-9]{1,9})(?::([0-9]{1,9}))?", target, re.DOTALL)
        if not m:
            usage_error(f"--target must be FILE:LINE[:COL] (line and column: 1 to 9 digits), got {target[:200]!r}")
        if int(m.group(2)) < 1 or (m.group(3) is not None and int(m.group(3)) < 1):
            usage_error(f"--target lines and columns start at 1, got {target[:200]!r}")
        items.append({"index": i, "instruction": instruction,
                      "source": {"file": m.group(1), "line": int(m.group(2)), "column": int(m.group(3) or 1)}})
    try:
        return SpotAnnotation.model_validate({"annotationId": "cli", "pageUrl": "/", "targets": items})
    except ValueError as exc:
        usage_error(str(exc))


def usage_error(message: str) -> NoReturn:
    print(f"spotpatch-agent run: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


PROVIDER_HELP = """\
No usable AI provider, so no job ran. Copy the prompt above into any AI tool, or configure a provider in
spotpatch.config.json at the project root (see docs/configuration.md), for example:

  {"providers": [{"id": "openai", "displayName": "OpenAI", "api": "chat",
                  "baseUrl": "https://api.openai.com/v1", "apiKeyEnv": "OPENAI_API_KEY",
                  "models": [{"id": "gpt-4o-mini", "model": "gpt-4o-mini", "displayName": "GPT-4o mini"}]}]}

and set the key variable it names (here OPENAI_API_KEY) in the environment."""


def format_health(health: Any) -> list[str]:
    """The page's health display as terminal lines (``RepoHealth``): the state, then each reason with its
    paths and its fix (docs/configuration.md "Repository health"). Empty for a clean tree."""
    if health.state == "clean":
        return []
    if health.state == "blocked":
        lines = ["Repository: blocked — SpotPatch cannot start a job in this repository:"]
    else:
        c = health.counts
        lines = [f"Repository: local changes ({c.staged} staged, {c.unstaged} unstaged, {c.untracked} untracked):"]
    for d in health.details:
        where = ", ".join(map(one_line, d.paths)) + (f" (+{d.more_paths} more)" if d.more_paths else "")
        lines.append(f"  - {d.reason}" + (f": {where}" if where else ""))
        lines.append(f"    fix: {one_line(d.fix)}")
    return lines


def one_line(text: str) -> str:
    """``text`` with line breaks and tabs shown as ``\\n``, ``\\r``, ``\\t``: a file name holding a newline
    must not print a line of its own (a forged ``✓`` line in ``doctor``). Other control characters are made
    visible by the terminal wrapper (``spotpatch_agent/terminal.py``)."""
    return text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def run_command(args: argparse.Namespace) -> int:
    """``run``; with ``--json`` one JSON object (:func:`run_report`) on stdout and the progress on stderr."""
    if not args.json:
        return _run(args, sys.stdout, {})
    report: dict[str, Any] = {}
    try:
        code = _run(args, sys.stderr, report)
    except SystemExit as exc:  # a usage error, already explained on stderr
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        report.setdefault("outcome", "usage-error")
    sys.stdout.write(json.dumps(run_report(code, report), ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return code


def run_report(code: int, report: dict[str, Any]) -> dict[str, Any]:
    """The ``run --json`` object (docs/configuration.md "The CLI"): ``{exitCode, outcome, health, job, diff,
    error, prompt, suggestion, review}``, every key present (``null`` when it does not apply); ``review`` is
    ``{jobId, diffSha256, applyCommand}`` once the diff was saved for ``spotpatch-agent apply``."""
    out = {"exitCode": code, "outcome": None, "health": None, "job": None, "diff": None, "error": None,
           "prompt": None, "suggestion": None, "review": None}
    out.update(report)
    return out


def _run(args: argparse.Namespace, out: TextIO, report: dict[str, Any]) -> int:
    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.protocol.models import PromptRenderParams
    from spotpatch_agent.worktree.repo import locate

    if args.apply:
        usage_error("--apply is refused: it would apply a new model run nobody reviewed. Run without it, review "
                    "the diff, then `spotpatch-agent apply --project DIR JOB_ID --sha256 HEX` applies exactly that "
                    "diff (the command is printed after it).")
    project = args.project.resolve()
    config = load_config(project, args.config)
    annotation = build_annotation(args.target, args.instruction)
    service = EngineService(send_event=print_event(out))
    model_id = args.model or next((m.id for p in config.providers for m in p.models), None)

    async def main() -> int:
        if await locate(project) is None:
            report["outcome"] = "not-a-git-repository"
            print(f"spotpatch-agent run: {project.name or project} is not a git repository (SpotPatch works on a "
                  "git repository: run `git init` and commit first)", file=sys.stderr)
            return EXIT_USAGE
        async with service.running():
            try:
                await service.configure(project, config)
                banner = sandbox_banner((await service.session_get()).checks_sandbox)
                if banner:
                    print(banner, file=sys.stderr, flush=True)
                    if out is not sys.stderr:
                        print(banner, file=out, flush=True)
                rendered = await service.prompt_render(PromptRenderParams(annotation=annotation))
                for warning in rendered.warnings or ():
                    print(f"spotpatch-agent run: {warning.message}", file=sys.stderr)
                if rendered.warnings and len(rendered.warnings) == len(annotation.targets):
                    report["outcome"] = "no-usable-target"
                    print("spotpatch-agent run: no target has a usable source location; nothing to do.",
                          file=sys.stderr)
                    return EXIT_USAGE
                if model_id is None or not service.ai_enabled():
                    report.update(outcome="no-provider", prompt=rendered.text)
                    if out is sys.stdout:
                        print(rendered.text)
                    print(provider_help(config, args.config or project / CONFIG_FILE), file=sys.stderr)
                    return EXIT_PROMPT_ONLY
                health = await service.health()
                report["health"] = health.dump()
                if not health_allows(health, include_local_changes=args.include_local_changes, report=report):
                    return EXIT_FAILED
                params = JobCreateParams(annotation=annotation, model_profile_id=model_id, apply_mode="review",
                                         local_changes_consent=args.include_local_changes or None)
                return await drive_job(service, params, out=out, report=report,
                                       suggest=getattr(args, "suggest", False), project=str(args.project),
                                       lane_on=config.suggestions.enabled)
            except SpotPatchError as exc:  # caught here, before the task group wraps it in a group
                report.update(outcome="engine-error", error={"code": exc.code.value, "message": exc.message})
                print(f"spotpatch-agent: {exc.code.value}: {exc.message}", file=sys.stderr)
                return EXIT_FAILED

    return anyio.run(main)


def health_allows(health: Any, *, include_local_changes: bool, report: dict[str, Any]) -> bool:
    """Print the health display to stderr; whether a job may start (blocked never; local changes only with
    ``--include-local-changes``). Records the refusal in ``report``."""
    for line in format_health(health):
        print(line, file=sys.stderr)
    if health.state == "blocked":
        report["outcome"] = "repo-blocked"
        print("spotpatch-agent run: no job ran (REPO_BLOCKED): apply the fixes above, then run again; "
              "`spotpatch-agent doctor --project DIR` checks the whole set-up.", file=sys.stderr)
        return False
    if health.state == "consent-required" and not include_local_changes:
        report["outcome"] = "consent-required"
        print("spotpatch-agent run: no job ran (CONSENT_REQUIRED): commit or stash these changes, or run again "
              "with --include-local-changes to start the job from them (the parts the job reads are sent to "
              "the provider; the diff holds only the agent's change). docs/configuration.md \u201cThe CLI\u201d.",
              file=sys.stderr)
        return False
    if health.state == "consent-required":
        print("Including your local changes (--include-local-changes): the job starts from them; the diff holds "
              "only the agent's change.", file=sys.stderr)
    return True


def provider_help(config: TrustedConfig, file: Path) -> str:
    """Why no job ran, naming the config file and the unset key variables when there is a config."""
    if not config.providers:
        return PROVIDER_HELP
    unset = sorted({p.api_key_env for p in config.providers})
    return (f"No usable AI provider in {file.name}, so no job ran: set the key variable {' or '.join(unset)} "
            "in the environment, or copy the prompt above into any AI tool.")


async def drive_job(service: Any, params: JobCreateParams, *, out: TextIO, report: dict[str, Any] | None = None,
                    suggest: bool = False, lane_on: bool = False, project: str = "DIR") -> int:
    """Create the job, wait for it, print its diff and save it for review (:func:`save_for_review`; ``project``
    as the user typed it, for the printed ``apply`` command). Never applies: only ``spotpatch-agent apply``
    does, with exactly the saved changeset. Returns an exit code.
    ``report`` (``run --json``) receives the outcome, the final job snapshot, the diff and the error.

    A job that failed because its model cannot call tools: with ``suggest`` and ``lane_on`` (the trusted
    config's ``suggestions.enabled``) the read-only suggestion lane's draft is printed (``job/suggest``) and
    put in the report's ``suggestion``; otherwise a hint says how to ask for it. The exit code stays 1."""
    from spotpatch_agent.protocol.models import JobIdParams

    report = {} if report is None else report
    snapshot = await service.job_create(params)
    ids = JobIdParams(job_id=snapshot.job_id)
    await service.wait_job(snapshot.job_id)
    snapshot = await service.job_get(ids)
    report.update(outcome=snapshot.status, job=snapshot.dump())
    if snapshot.status != "awaiting-review":
        err = snapshot.error
        if err:
            report["error"] = {"code": err.code, "message": err.message}
        print(f"Job {snapshot.status}: {err.code + ': ' + err.message if err else snapshot.message}", file=out)
        if err is not None and err.code == "MODEL_TOOL_CALL_UNSUPPORTED":
            if suggest and lane_on:
                suggestion = (await service.job_suggest(ids)).dump()
                report["suggestion"] = suggestion
                print(format_suggestion(suggestion), file=out)
            elif suggest:
                print("The suggestion lane is off: set \"suggestions\": {\"enabled\": true} in the config to "
                      "ask this model for a read-only draft.", file=out)
            elif lane_on:
                print("This model cannot call tools. Re-run with --suggest for a read-only draft suggestion "
                      "(it changes nothing).", file=out)
        return EXIT_FAILED
    diff = await service.job_diff(ids)
    report["diff"] = diff.dump()
    print("\n--- the agent's diff (against the job's baseline) ---", file=out)
    print(diff.diff, file=out, end="" if diff.diff.endswith("\n") else "\n")
    return await save_for_review(service, ids, diff.diff, out=out, report=report, project=project)


async def save_for_review(service: Any, ids: Any, diff: str, *, out: TextIO, report: dict[str, Any],
                          project: str) -> int:
    """Save the reviewed changeset (``EngineService.job_save_review``) and print the command that applies exactly
    it, with the diff's SHA-256. Exit 1 when it could not be saved (nothing can apply it later)."""
    import shlex

    from spotpatch_agent.worktree.reviews import diff_sha256

    why = await service.job_save_review(ids)
    if why is not None:
        report["error"] = {"code": "INTERNAL", "message": why}
        print(f"The diff could not be saved for review, so it cannot be applied later: {why}", file=out)
        return EXIT_FAILED
    sha = diff_sha256(diff)
    command = f"spotpatch-agent apply --project {shlex.quote(project)} {ids.job_id} --sha256 {sha}"
    report["review"] = {"jobId": ids.job_id, "diffSha256": sha, "applyCommand": command}
    print(f"Review it, then apply exactly this diff: spotpatch-agent apply --project {shlex.quote(project)} "
          f"{ids.job_id}", file=out)
    print(f"(diff sha256 {sha}; add --sha256 {sha} to refuse any other diff: {command})", file=out)
    return EXIT_OK
