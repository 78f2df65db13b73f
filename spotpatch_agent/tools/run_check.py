"""``run_check {checkId}``: run one pre-registered check in the worktree (DESIGN.md §6, §9; spec "检查工具").

The model only ever names a ``checkId``; the command and its argv come from the job's trusted config
(``TrustedConfig.checks``, handed to the executor, which exposes them as ``ctx.checks``). An unknown id is a
retryable ``TOOL_ARGUMENTS_INVALID`` that names the available ids.

The check runs with ``shell=False``, cwd = the worktree, a minimal environment allowlist (``PATH``, ``HOME``,
``LANG``, ``LC_*``, ``TMPDIR`` plus ``CI=1``, ``FORCE_COLOR=0``, ``NO_COLOR=1`` — never a provider key or any
other variable), in its own process group (POSIX) that is killed on timeout or cancellation, so no orphan
stays. Its timeout is the check's ``timeoutSec`` or the ``checkTimeoutSec`` limit. stdout and stderr are
merged, bounded to ``checkOutputMaxBytes``, decoded leniently, ANSI-stripped, and absolute worktree paths
are replaced by relative ones.

A check is a bounded process that may write: the tool is registered as a write (``writes=True``), so the
executor runs it alone and bumps the worktree version after it (caches are dropped). Timeout, non-zero
exit or a signal is a failed result (``ok=False``, ``code=None``, retryable: the model may fix the code and
run it again); the model cannot turn it into success.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.models import CheckConfig
from spotpatch_agent.tools.base import ToolArgs, ToolDef, ToolResult, arguments_guidance
from spotpatch_agent.process import kill_tree

if TYPE_CHECKING:
    from spotpatch_agent.tools.context import WorktreeContext

#: Variables copied from the engine's environment (plus every ``LC_*``); everything else is dropped.
CHECK_ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT", "WINDIR", "TEMP", "TMP")
#: Variables always set for a check: non-interactive, no colour.
CHECK_ENV_FIXED = {"CI": "1", "FORCE_COLOR": "0", "NO_COLOR": "1"}
#: Extra seconds the outer deadlines (executor, loop) allow beyond the check's own timeout.
CHECK_DEADLINE_GRACE_SEC = 10

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class RunCheckArgs(ToolArgs):
    check_id: str


def check_env() -> dict[str, str]:
    """The minimal environment of a check process (see the module docstring)."""
    env = {key: os.environ[key] for key in CHECK_ENV_ALLOWLIST if key in os.environ}
    env.update({key: value for key, value in os.environ.items() if key.startswith("LC_")})
    env.update(CHECK_ENV_FIXED)
    return env


def check_timeout(check: CheckConfig, ctx: WorktreeContext) -> int:
    """The check's own ``timeoutSec``, else the ``checkTimeoutSec`` limit (never above that limit's cap)."""
    return check.timeout_sec or ctx.limits.get("checkTimeoutSec")


def clean_output(raw: bytes, root_variants: Sequence[str], max_bytes: int, truncated: bool) -> str:
    """Lenient UTF-8 decode, ANSI and control characters removed, worktree paths made relative, bounded."""
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _ANSI.sub("", text))
    for root in sorted(root_variants, key=len, reverse=True):
        text = text.replace(root + "/", "").replace(root + os.sep, "").replace(root, ".")
    encoded = text.encode("utf-8")
    if len(encoded) > max_bytes or truncated:
        text = encoded[:max_bytes].decode("utf-8", errors="ignore") + "\n[output truncated]"
    return text



#: Seconds to keep reading a check's output after its process group was killed.
DRAIN_GRACE_SEC = 1.0


async def _run(ctx: WorktreeContext, check: CheckConfig) -> tuple[int | None, bytes, bool, bool]:
    """(returncode or None on timeout, output bytes, truncated, timed_out). Kills the group on any exit."""
    limit = ctx.limits.get("checkOutputMaxBytes")
    try:
        process = await anyio.open_process(
            [check.command, *check.args], cwd=ctx.root, env=check_env(), stdin=subprocess.DEVNULL,
            stderr=subprocess.STDOUT, start_new_session=os.name != "nt",
        )
    except OSError:
        raise JobFailure(ErrorCode.CHECK_FAILED, f"check {check.id}: the command could not be started") from None
    chunks: list[bytes] = []
    size = 0
    truncated = False

    drained = anyio.Event()

    async def drain() -> None:
        nonlocal size, truncated
        assert process.stdout is not None
        try:
            async for chunk in process.stdout:  # keep draining past the bound so the check never blocks
                if size < limit:
                    chunks.append(chunk[: limit - size])
                size += len(chunk)
                truncated = truncated or size > limit
        finally:
            drained.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            with anyio.move_on_after(check_timeout(check, ctx)) as scope:
                await process.wait()
            timed_out = scope.cancelled_caught
            # The leader exited or timed out: kill the whole group, then read what is left. A process that
            # left the group (setsid, a daemon) may still hold the pipe open: stop reading after a grace
            # period instead of waiting for its EOF (it is outside our process group: see docs/security.md).
            kill_tree(process)
            with anyio.move_on_after(DRAIN_GRACE_SEC):
                await drained.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            kill_tree(process)
            await process.wait()
            await process.aclose()
    return (None if timed_out else process.returncode), b"".join(chunks), truncated, timed_out


async def _run_check(ctx: WorktreeContext, args: RunCheckArgs) -> ToolResult:
    checks: tuple[CheckConfig, ...] = tuple(getattr(ctx, "checks", ()))
    check = next((c for c in checks if c.id == args.check_id), None)
    if check is None:
        ids = ", ".join(c.id for c in checks) or "(none)"
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID,
            arguments_guidance(RUN_CHECK, [f"checkId must be one of the configured checks: {ids}."]),
        )
    started = time.perf_counter()
    try:
        returncode, raw, truncated, timed_out = await _run(ctx, check)
    finally:
        ctx.bump()  # a check may rewrite files: no cached listing or read survives it
    duration_ms = int((time.perf_counter() - started) * 1000)
    roots = {str(ctx.root)}
    try:
        roots.add(str(ctx.root.resolve()))
    except OSError:
        pass
    output = clean_output(raw, sorted(roots), ctx.limits.get("checkOutputMaxBytes"), truncated)
    if timed_out:
        outcome = f"timed out after {check_timeout(check, ctx)} s"
    elif returncode is not None and returncode < 0:
        outcome = f"killed by signal {-returncode}"
    else:
        outcome = f"exit code {returncode}"
    passed = not timed_out and returncode == 0
    head = f"Check {check.id} ({check.name}) {'PASSED' if passed else 'FAILED'}: {outcome}, {duration_ms} ms."
    text = head + ("\nOutput:\n" + output if output else "\n(no output)")
    if passed:
        return ToolResult.success(text, wrote=True)
    return ToolResult(ok=False, output=text, code=None, retryable=True, wrote=True)


RUN_CHECK = ToolDef(
    name="run_check",
    description=(
        "Run one pre-registered project check (tests, lint, type check) in the worktree by its checkId. "
        "Returns PASSED or FAILED with the exit code and the bounded output. Only configured check ids exist."
    ),
    args=RunCheckArgs,
    handler=_run_check,
    writes=True,
)
