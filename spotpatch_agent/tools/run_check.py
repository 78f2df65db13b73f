"""``run_check {checkId}``: run one pre-registered check in the worktree (docs/design.md §6, §9; spec "检查工具").

The model only ever names a ``checkId``; the command and its argv come from the job's trusted config
(``TrustedConfig.checks``, handed to the executor, which exposes them as ``ctx.checks``). An unknown id is a
retryable ``TOOL_ARGUMENTS_INVALID`` that names the available ids.

The process itself (argv only, minimal environment, own process group killed on timeout or cancellation,
bounded and cleaned output) is :func:`spotpatch_agent.checks.runner.run_check_process`; this module only
resolves the id and shapes the model-facing text. Every run is recorded as ``ctx.check_runs[checkId] =
(version, CheckRun)`` with the worktree version after the run, for the host's final required-check stage.

A check is a bounded process that may write: the tool is registered as a write (``writes=True``), so the
executor runs it alone and bumps the worktree version after it (caches are dropped). Timeout, non-zero
exit or a signal is a failed result (``ok=False``, ``code=None``, retryable: the model may fix the code and
run it again); the model cannot turn it into success. A command that cannot be started is a trusted-config
error the model cannot fix: the job fails with ``CHECK_FAILED``; so does a check that must run confined
(``sandbox: "required"``) on a machine without a sandbox (:class:`~spotpatch_agent.checks.runner.SandboxUnavailable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotpatch_agent.checks.runner import CheckRun, run_check_process
from spotpatch_agent.checks.timeouts import check_timeout
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.models import CheckConfig
from spotpatch_agent.tools.base import ALL_EDIT_FORMATS, ToolArgs, ToolDef, ToolResult, arguments_guidance

if TYPE_CHECKING:
    from spotpatch_agent.tools.context import WorktreeContext

class RunCheckArgs(ToolArgs):
    check_id: str


def format_check_run(run: CheckRun, timeout_sec: int) -> str:
    """The model-facing text: ``Check <id> (<name>) PASSED|FAILED: <outcome>, <ms> ms.``, how it ran
    (:meth:`CheckRun.sandbox_note`: confined, with or without network, or the UNCONFINED warning), then the
    output (a denied read or connection shows there as the tool's own error)."""
    outcome = f"timed out after {timeout_sec} s" if run.status == "timed-out" else run.outcome()
    head = f"Check {run.check_id} ({run.name}) {'PASSED' if run.ok else 'FAILED'}: {outcome}, {run.duration_ms} ms."
    head += "\n" + run.sandbox_note()
    return head + ("\nOutput:\n" + run.output if run.output else "\n(no output)")


async def _run_check(ctx: WorktreeContext, args: RunCheckArgs) -> ToolResult:
    checks: tuple[CheckConfig, ...] = ctx.checks
    check = next((c for c in checks if c.id == args.check_id), None)
    if check is None:
        ids = ", ".join(c.id for c in checks) or "(none)"
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID,
            arguments_guidance(RUN_CHECK, [f"checkId must be one of the configured checks: {ids}."]),
        )
    try:
        run = await run_check_process(check, ctx.root, ctx.limits, project_root=ctx.project_root,
                                      sandbox=ctx.check_sandbox)
    finally:
        ctx.bump()  # a check may rewrite files: no cached listing or read survives it
    if not run.started:
        raise JobFailure(ErrorCode.CHECK_FAILED, f"check {check.id}: the command could not be started")
    runs: dict[str, tuple[int, CheckRun]] = ctx.__dict__.setdefault("check_runs", {})
    runs[check.id] = (ctx.version, run)
    text = format_check_run(run, check_timeout(check, ctx.limits))
    if run.ok:
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
    kind="process",
    deadline="check",
    audit=(("checkId", "id"),),
    audit_served=False,
    retry_hint="change the code to fix what the check reported before running it again.",
    offer="with_checks",
    edit_formats=ALL_EDIT_FORMATS,
    descriptions={},
)
