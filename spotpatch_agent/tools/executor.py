"""The tool executor: validate one tool call, run it under the worktree's gate and deadline (docs/design.md §5, §6).

``ToolExecutor(root, limits, tools=...)`` serves one job worktree. :meth:`ToolExecutor.execute` takes the
provider's tool name and raw arguments text and either returns a :class:`~spotpatch_agent.tools.base.ToolResult`
(success, or a retryable rejection the model may correct) or raises
:class:`~spotpatch_agent.errors.JobFailure` (terminal: the job stops). Idempotency of ``(turn, toolCallId)``
and call budgets are the engine's job, not this one's.

Read-only tools may run concurrently; a write waits for running reads and excludes everything else, so
writes are serial and never interleave with reads of the same worktree.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import ValidationError

from spotpatch_agent.checks.timeouts import check_deadline
from spotpatch_agent.errors import GitError, JobFailure
from spotpatch_agent.protocol.config import EditFormat
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools.base import (
    ToolDef,
    ToolResult,
    arguments_guidance,
    unknown_tool_guidance,
)
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.registry import TOOL_DEFS
from spotpatch_agent.worktree.scan import after_check, before_check, left_behind

#: Arguments text beyond two editable files plus this slack (bytes) is an oversized input (terminal).
_ARGUMENTS_SLACK_BYTES = 64 * 1024


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class _Gate:
    """Readers share; a writer waits for readers to finish and excludes everyone."""

    def __init__(self) -> None:
        self._cond = anyio.Condition()
        self._readers = 0
        self._writing = False

    @asynccontextmanager
    async def hold(self, *, write: bool) -> AsyncIterator[None]:
        async with self._cond:
            while self._writing or (write and self._readers):
                await self._cond.wait()
            if write:
                self._writing = True
            else:
                self._readers += 1
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._cond:
                    if write:
                        self._writing = False
                    else:
                        self._readers -= 1
                    self._cond.notify_all()


class ToolExecutor:
    """Runs the file tools in the worktree at ``root`` under ``limits``.

    ``tools``: names offered to the model in this job (default: every registered tool); a call to any
    other name is answered as an unknown tool. Raises ``KeyError`` for a name that is not registered.
    ``checks``: the job's trusted checks, the only commands ``run_check`` may run (exposed as ``ctx.checks``);
    ``sandbox`` the trusted config's policy for them and ``project_root`` the user's checkout the confined
    check must not see (``ctx.check_sandbox``, ``ctx.project_root``: checks/runner.py).
    ``focus``: the targets' offered lines per relative path (``read_file`` without a range starts near them).
    ``edit_format``: the model profile's ``editFormat`` (``anchors``: reads and searches show line anchors).
    """

    def __init__(self, root: Path, limits: Limits, *, tools: Iterable[str] | None = None,
                 checks: Sequence[CheckConfig] = (), sandbox: Literal["required", "warn"] = "required",
                 project_root: Path | None = None, focus: dict[str, tuple[int, ...]] | None = None,
                 edit_format: EditFormat = "replace") -> None:
        names = list(TOOL_DEFS) if tools is None else list(tools)
        self._tools: dict[str, ToolDef] = {name: TOOL_DEFS[name] for name in names}
        self._ctx = WorktreeContext(Path(root), limits, focus=focus)
        self._ctx.checks = tuple(checks)
        self._ctx.check_sandbox = sandbox
        self._ctx.project_root = project_root
        self._ctx.edit_format = edit_format
        self._gate = _Gate()
        # A check tool enforces its own (shorter) check timeout; this outer deadline only backs it up.
        self._deadlines: dict[str, float] = {"tool": limits.get("toolTimeoutSec"),
                                             "check": check_deadline(checks, limits)}
        self._check_wrote: dict[str, bool] = {}  # checkId → its latest run changed the worktree
        self._any_check_wrote = False  # some run_check of this job changed the worktree (sticky)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools offered in this job, in offer order (the ``tools`` given at construction)."""
        return tuple(self._tools)

    def declared(self, name: str) -> ToolDef | None:
        """The declaration of ``name`` when this job offers it, else None (an unknown tool)."""
        return self._tools.get(name)

    @property
    def context(self) -> WorktreeContext:
        """The worktree's shared tool state (reads made through it land in the tools' per-version cache)."""
        return self._ctx

    @property
    def version(self) -> int:
        """Worktree version: 0 at start, +1 per write (or :meth:`invalidate`); caches live per version."""
        return self._ctx.version

    def invalidate(self) -> None:
        """Drop every cached listing and read (the next call lists and reads the worktree again).

        ``run_check`` already reports its changes. A change by anything else that is not one of these tools
        must be reported with :meth:`mark_external_change` instead, so the listing stops trusting git's index.
        """
        self._ctx.bump()

    def mark_external_change(self) -> None:
        """Tell the executor something other than its tools changed the worktree (e.g. a host-side command):
        drops the caches and makes every later listing check each file on disk."""
        self._ctx.mark_external_change()
        self._ctx.bump()

    # -- check results for the engine's final check stage (engine/gates.py, docs/design.md §9)

    @property
    def check_runs(self) -> dict[str, tuple[int, Any]]:
        """``checkId → (worktree version after the run, CheckRun)`` of the model's latest ``run_check`` of
        each check (recorded by tools/run_check.py). A run is fresh while that version equals :attr:`version`."""
        return dict(getattr(self._ctx, "check_runs", {}))

    @property
    def checks_that_wrote(self) -> frozenset[str]:
        """Ids of the checks whose latest ``run_check`` changed the worktree fingerprint: such a result
        describes the tree before its own writes, so it is never reused as a final result."""
        return frozenset(cid for cid, wrote in self._check_wrote.items() if wrote)

    @property
    def checks_changed_files(self) -> bool:
        """Whether any ``run_check`` of this job changed the worktree fingerprint (sticky: a later clean run
        of the same check does not clear it). Such writes reach the diff without the file tools' policy, so
        ``auto`` does not apply them (engine/gates.py)."""
        return self._any_check_wrote

    async def fingerprint(self) -> str:
        """The worktree fingerprint (:meth:`WorktreeContext.fingerprint`). Raises ``GitError``, ``OSError``."""
        return await self._ctx.fingerprint()

    async def _run_watched(self, tool: ToolDef, args: Any) -> ToolResult:
        # The tree is scanned before every host git command that follows a check (issue 25, worktree/scan.py):
        # what the check left that git must not meet (a .git, a FIFO, a new oversized file) is removed first,
        # also when the check was cancelled, and the model is told.
        root, cap = self._ctx.root, self._ctx.limits.get("editableFileMaxBytes")
        check_id = str(getattr(args, "check_id", ""))
        scanned = await before_check(root, max_file_bytes=cap)
        before = await self._ctx.fingerprint()
        try:
            result = await tool.handler(self._ctx, args)
        finally:
            found = await after_check(root, max_file_bytes=cap, before=scanned)
        wrote = bool(found) or await self._ctx.fingerprint() != before
        self._check_wrote[check_id] = wrote
        self._any_check_wrote = self._any_check_wrote or wrote
        if found:
            return ToolResult(ok=False, code=None, retryable=True, wrote=True,
                              output=left_behind(check_id, found) + " The check's own result was:\n" + result.output)
        return result

    async def execute(self, name: str, arguments_json: str) -> ToolResult:
        """Validate and run one tool call.

        ``name``: the tool name as the provider sent it; ``arguments_json``: the raw arguments text.
        Returns a retryable ``TOOL_ARGUMENTS_INVALID`` result (before any side effect) for an unknown tool,
        invalid JSON, JSON that is not an object, duplicate keys, or missing/unknown/mistyped arguments.
        Raises ``JobFailure``: ``LIMIT_EXCEEDED`` for arguments over ``2 × editableFileMaxBytes + 64 KiB``
        bytes or a call over ``toolTimeoutSec`` seconds; ``INTERNAL`` when git or the OS fails; and each
        tool's own terminal failures (see its module).
        """
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult.rejected(ToolErrorCode.TOOL_ARGUMENTS_INVALID, unknown_tool_guidance(list(self._tools)))
        limits = self._ctx.limits
        if len(arguments_json.encode("utf-8", errors="replace")) > (
            2 * limits.get("editableFileMaxBytes") + _ARGUMENTS_SLACK_BYTES
        ):
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"{name}: the arguments are too large")
        args_or_problem = _parse_arguments(tool, arguments_json)
        if isinstance(args_or_problem, ToolResult):
            return args_or_problem
        try:
            with anyio.fail_after(self._deadlines[tool.deadline]):
                async with self._gate.hold(write=tool.writes):
                    if not tool.writes:
                        return await tool.handler(self._ctx, args_or_problem)
                    # Tell the listing how the worktree may have changed. A check runs arbitrary trusted
                    # commands (symlinks, big files, index changes): from then on every listed file is
                    # checked on disk. A write tool changes files only through the path policy.
                    if tool.kind == "process":
                        self._ctx.mark_external_change()
                        return await self._run_watched(tool, args_or_problem)
                    self._ctx.mark_own_write()
                    try:
                        return await tool.handler(self._ctx, args_or_problem)
                    finally:
                        self._ctx.end_own_write()
        except TimeoutError:
            raise JobFailure(ErrorCode.LIMIT_EXCEEDED, f"{name} exceeded toolTimeoutSec") from None
        except GitError as exc:
            raise JobFailure(ErrorCode.INTERNAL, f"{name}: {exc.message}") from None
        except OSError:
            raise JobFailure(ErrorCode.INTERNAL, f"{name}: a file system operation failed") from None


def _parse_arguments(tool: ToolDef, arguments_json: str) -> Any:
    """The validated argument model, or a ``TOOL_ARGUMENTS_INVALID`` result naming only our own field names."""
    try:
        raw = json.loads(arguments_json, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey:
        return _invalid(tool, ["Each field may appear only once."])
    except (ValueError, RecursionError):
        return _invalid(tool, ["The arguments are not valid JSON."])
    if not isinstance(raw, dict):
        return _invalid(tool, ["The arguments must be a JSON object."])
    try:
        return tool.args.model_validate(raw)
    except ValidationError as exc:
        return _invalid(tool, _describe(tool, exc))


def _describe(tool: ToolDef, exc: ValidationError) -> list[str]:
    known = {field.alias or name for name, field in tool.args.model_fields.items()}
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = error["loc"][0] if error["loc"] else None
        if error["type"] == "extra_forbidden":
            problem = "Unknown fields are not allowed."
        elif field in known and error["type"] == "missing":
            problem = f"Missing field {field}."
        elif field in known:
            problem = f"Field {field} has the wrong type or value."
        else:
            problem = "The arguments do not match the schema."
        if problem not in problems:
            problems.append(problem)
    return problems


def _invalid(tool: ToolDef, problems: list[str]) -> ToolResult:
    return ToolResult.rejected(ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(tool, problems))
