"""``spotpatch-agent demo``: a real annotation job on the bundled demo Vite app (README's first command).

Copies ``demo/app`` into a temp dir, makes it a one-commit git repo, and runs the job "target 1: make the
Save button primary; target 2: show the price with two decimals" through the real engine: worktree, tool
loop, the ``typecheck`` check (TypeScript installed by the demo itself: demo/typecheck.py; skipped with a
message when npm or the registry is unavailable), diff, apply, revert. With ``OPENAI_API_KEY`` set
(optional ``OPENAI_BASE_URL``, ``SPOTPATCH_MODEL``, ``SPOTPATCH_MAX_OUTPUT_TOKENS``) it uses that provider —
any OpenAI-compatible server, a local ``llama-server`` or Ollama included (tests/bench/README.md); without,
a local scripted OpenAI-compatible server on 127.0.0.1 plays a fixed tool-calling conversation through the
same adapter — and the output says that no model is involved. ``api`` (``--api chat|responses``) picks the
adapter: Chat Completions (the default) or Responses, for the scripted server and a real one alike.
Exit 0 only when the diff was produced, applied, shown, reverted and the file verified restored, and
every required check the engine reported passed.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

from spotpatch_agent.demo.script import DEMO_TARGETS, EXPECTED_AFTER, demo_turns
from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_sync, subcommand
from spotpatch_agent.protocol.models import (
    CheckConfig,
    JobCreateParams,
    JobIdParams,
    Limits,
    SpotAnnotation,
    TrustedConfig,
)
from spotpatch_agent.run_cli import check_how, print_event

APP_DIR = Path(__file__).with_name("app")
DEMO_KEY_ENV = "SPOTPATCH_DEMO_API_KEY"
TOUCHED = "src/components/ProductCard.tsx"
IDENTITY = ["-c", "user.name=SpotPatch Demo", "-c", "user.email=demo@spotpatch.invalid"]


def make_demo_project(dest: Path) -> Path:
    """Copy the demo app to ``dest`` and commit it (fixed argv git, no global identity needed)."""
    shutil.copytree(APP_DIR, dest, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*IDENTITY, "commit", "-q", "-m", "demo app"]):
        done = run_git_sync(args, cwd=dest, timeout=120)
        if done.returncode != 0:
            raise GitError(f"git {subcommand(args)} failed (exit {done.returncode}) while setting up the demo project")
    return dest


#: Lines of a check's output the demo prints (the engine already bounds it by ``checkOutputMaxBytes``).
CHECK_OUTPUT_LINES = 20


#: The wire formats ``demo --api`` offers, as the output names them.
API_NAMES = {"chat": "Chat Completions", "responses": "Responses"}
#: Environment variable: the demo model profile's ``maxOutputTokens`` (a whole number; unset: the default).
MAX_OUTPUT_ENV = "SPOTPATCH_MAX_OUTPUT_TOKENS"


def _config(base_url: str, key_env: str, model: str, check: CheckConfig | None = None, *, api: str = "chat",
            max_output_tokens: int | None = None, sandbox: str = "required",
            edit_format: str | None = None) -> TrustedConfig:
    profile: dict[str, Any] = {"id": "demo-model", "model": model, "displayName": model}
    if edit_format is not None:
        profile["editFormat"] = edit_format
    if max_output_tokens is not None:
        profile["maxOutputTokens"] = max_output_tokens
    return TrustedConfig.model_validate({"providers": [{
        "id": "demo", "displayName": "Demo provider", "api": api, "baseUrl": base_url, "apiKeyEnv": key_env,
        "models": [profile],
    }], "checks": [check.dump()] if check is not None else [], "sandbox": sandbox})


def _max_output_tokens() -> int | None:
    """``SPOTPATCH_MAX_OUTPUT_TOKENS`` as a whole number, None when unset. Raises ``ValueError`` otherwise."""
    raw = os.environ.get(MAX_OUTPUT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise ValueError(f"{MAX_OUTPUT_ENV} must be a whole number of tokens (0: send no cap)")
    return int(raw)


def _format_check(event: dict[str, Any]) -> str:
    """A check event as the demo's result shows it: name, status, duration, then the output (bounded)."""
    required = "required" if event.get("required", True) else "optional"
    head = (f"  {event['name']} [{event['checkId']}, {required}]: {event['status'].upper()} "
            f"in {event['durationMs']} ms{check_how(event)}")
    lines = (event.get("output") or "").splitlines()
    body = [f"    | {line}" for line in lines[:CHECK_OUTPUT_LINES]] or ["    | (no output)"]
    if len(lines) > CHECK_OUTPUT_LINES:
        body.append(f"    | … {len(lines) - CHECK_OUTPUT_LINES} more lines")
    return "\n".join([head, *body])


def _show(path: Path, title: str) -> None:
    """Print the two target lines (11–12) of the touched file."""
    print(f"\n--- {title}: {TOUCHED}, lines 11-12 ---")
    for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if n in (11, 12):
            print(f"{n:>4}| {line}")


def run_demo(*, keep: bool = False, api: str = "chat", edit_format: str | None = None) -> int:
    from spotpatch_agent.demo.typecheck import prepare_typecheck
    from spotpatch_agent.provider.scripted import ScriptedProviderServer

    started = time.monotonic()
    with ExitStack() as stack:
        tmp = Path(tempfile.mkdtemp(prefix="spotpatch-demo-"))
        if not keep:
            stack.callback(shutil.rmtree, tmp, True)
        project = make_demo_project(tmp / "demo-app")
        original = (project / TOUCHED).read_bytes()
        scripted = not os.environ.get("OPENAI_API_KEY")
        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        model = os.environ.get("SPOTPATCH_MODEL", "gpt-4o-mini")
        try:
            cap = _max_output_tokens()
        except ValueError as exc:
            print(f"SpotPatch demo: {exc}.", file=sys.stderr)
            return 2
        if scripted and edit_format is not None:
            print("SpotPatch demo: --edit-format needs a model (OPENAI_API_KEY): the scripted conversation edits "
                  "with replace_text.", file=sys.stderr)
            return 2
        if scripted:
            print("SpotPatch demo — NO MODEL IS INVOLVED: OPENAI_API_KEY is not set, so a scripted local provider on\n"
                  "127.0.0.1 plays a fixed tool-calling conversation through the real engine (worktree, tools, "
                  "checks,\n"
                  "diff, apply, revert). Set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, SPOTPATCH_MODEL) to use "
                  "a model.")
            print(f"The scripted provider answers the OpenAI-compatible {API_NAMES[api]} API (--api {api}).")
        else:
            host = base.split("//", 1)[-1].split("/", 1)[0]
            print(f"SpotPatch demo — using model {model!r} at {host} "
                  f"(OpenAI-compatible {API_NAMES[api]}, --api {api}"
                  f"{', edit format ' + edit_format if edit_format else ''}).")
        kept = " (kept at " + str(project) + ")" if keep else ""
        print(f"Demo project: a fresh git copy of the bundled Vite + React app{kept}.")
        for t in DEMO_TARGETS:
            print(f"  target {t['index']}: {t['source']['file']}:{t['source']['line']} "
                  f"<{t['element']['tagName']}> — {t['instruction']}")
        sandbox, note = _sandbox_choice(scripted)
        print(note)
        typecheck = prepare_typecheck(project, Limits(), sandbox=sandbox) if sandbox is not None else None
        if typecheck is not None:
            print(typecheck.message)
        check = typecheck.check if typecheck is not None else None
        if scripted:
            server = stack.enter_context(ScriptedProviderServer(demo_turns(check_id=check.id if check else None)))
            os.environ[DEMO_KEY_ENV] = "sk-demo-" + secrets.token_hex(12)
            config = _config(server.base_url, DEMO_KEY_ENV, "scripted-demo", check, api=api, max_output_tokens=cap,
                             sandbox=sandbox or "required")
        else:
            config = _config(base, "OPENAI_API_KEY", model, check, api=api, max_output_tokens=cap,
                             sandbox=sandbox or "required", edit_format=edit_format)
        _show(project / TOUCHED, "before")
        code = anyio.run(_drive, project, config, original, scripted, "scripted provider" if scripted else "model")
        took = f" ({time.monotonic() - started:.1f} s)"
        print(f"\nDemo finished: diff produced, applied, reverted and verified{took}." if code == 0
              else f"\nDemo FAILED{took}.")
        return code


def _sandbox_choice(scripted: bool) -> tuple[str | None, str]:
    """How the demo's check runs (issue 14): ``(policy, what to tell the user)``; policy ``None`` skips it.

    Confined when this machine can confine checks. Otherwise the scripted conversation (fixed: no model
    writes code) runs it unconfined under ``sandbox: "warn"`` and says so; with a real model the check is
    skipped, since the demo never runs model-written code unconfined."""
    from spotpatch_agent.checks.sandbox import detect

    found = anyio.run(detect)
    if found.confinement is not None:
        return "required", (f"Checks run confined ({found.mechanism}): no network, writes only in the job's worktree "
                            "and a private temp dir, your home directory and the checkout hidden.")
    if scripted:
        return "warn", (f"WARNING: checks cannot be confined on this machine ({found.reason}). The scripted demo runs "
                        'its typecheck check UNCONFINED (sandbox: "warn"); no model writes code here. Install the '
                        "sandbox to see it confined.")
    return None, (f"typecheck check skipped: checks cannot be confined on this machine ({found.reason}), and the "
                  "demo does not run model-written code unconfined. Install the sandbox to see the check.")


async def _drive(project: Path, config: TrustedConfig, original: bytes, scripted: bool, speaker: str) -> int:
    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.errors import SpotPatchError

    printer = print_event(sys.stdout, speaker=speaker)
    checks: list[dict[str, Any]] = []  # the job's ``check`` events (docs/design.md §9 final results)

    def send(event: dict[str, Any]) -> None:
        if event.get("kind") == "check":
            checks.append(event)
            print(f"[{event['seq']:>3}] check {event['checkId']}: {event['status']}, {event['durationMs']} ms"
                  f"{check_how(event)}", flush=True)
        else:
            printer(event)

    service = EngineService(send_event=send)
    annotation = SpotAnnotation.model_validate({"annotationId": "demo", "pageUrl": "/", "targets": DEMO_TARGETS})
    async with service.running():
        try:
            await service.configure(project, config)
            print("\n--- job progress ([n] is the job/event seq; tool-start events are not printed) ---")
            snap = await service.job_create(JobCreateParams(annotation=annotation, model_profile_id="demo-model"))
            ids = JobIdParams(job_id=snap.job_id)
            await service.wait_job(snap.job_id)
            snap = await service.job_get(ids)
            if config.checks:
                print("\n--- checks (the job's final results) ---")
                print("\n".join(_format_check(e) for e in checks) if checks else
                      f"  (the engine reported no check result for {', '.join(c.id for c in config.checks)})")
            if snap.status != "awaiting-review":
                why = snap.error.code + " — " + snap.error.message if snap.error else snap.message
                print(f"The job ended {snap.status}: {why}")
                return 1
            diff = await service.job_diff(ids)
            print("\n--- the agent's diff ---")
            print(diff.diff, end="")
            snap = await service.job_apply(ids)
            after = (project / TOUCHED).read_bytes()
            if snap.status != "applied" or after == original:
                print("Apply did not change the file.")
                return 1
            if scripted and after.decode("utf-8") != EXPECTED_AFTER[TOUCHED]:
                print("The applied file differs from the scripted conversation's expected result.")
                return 1
            _show(project / TOUCHED, "after Apply (the working tree; Vite would hot-reload it)")
            snap = await service.job_revert(ids)
            restored = (project / TOUCHED).read_bytes()
            if snap.status != "reverted" or restored != original:
                print("Revert did not restore the original bytes.")
                return 1
            _show(project / TOUCHED, "after Revert")
            print(f"\nRestored byte for byte (sha256 {hashlib.sha256(restored).hexdigest()[:16]}…).")
            return 0
        except SpotPatchError as exc:
            print(f"{exc.code.value}: {exc.message}")
            return 1
