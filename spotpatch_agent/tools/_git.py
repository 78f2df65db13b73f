"""The file tools' git front (docs/design.md §8: model text is never a command line).

The process runs in :func:`spotpatch_agent.git_runner.run_git_process`, the package's one git runner
(hardened ``-c`` prefix, allowlisted environment, bounded output, process-tree kill). Model-supplied text
only ever appears as a single argv element after ``-e`` or ``--``, never through a shell. Output is read as
it streams and bounded: past ``max_bytes`` the process is killed and the result is marked ``truncated``.
Cancellation (the executor's tool deadline) kills the process; no orphan stays.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_process
from spotpatch_agent.protocol.limits import LIMITS

#: Seconds one git command of the file tools may take: the highest ``toolTimeoutSec``, so inside the tool
#: executor the tool's own deadline always comes first; it bounds the calls made outside the executor (the
#: prompt's project context, the suggestion lane's excerpts read the project through these tools' context).
GIT_TIMEOUT = LIMITS["toolTimeoutSec"][1]


@dataclass(frozen=True)
class GitOutput:
    """``returncode`` (None when killed after truncation), ``stdout`` bytes, ``truncated`` flag."""

    returncode: int | None
    stdout: bytes
    truncated: bool


async def tool_git(
    root: Path,
    *args: str,
    max_bytes: int = 32 * 1024 * 1024,
    ok_codes: tuple[int, ...] = (0,),
    config: tuple[str, ...] = (),
    index_file: str | None = None,
    sink: Callable[[bytes], Awaitable[bool]] | None = None,
) -> GitOutput:
    """Run ``git <args>`` in ``root`` (read-only environment); stdout bounded to ``max_bytes`` bytes.

    Raises :class:`~spotpatch_agent.errors.GitError` (code ``INTERNAL``, sanitized message naming only the
    subcommand and exit code) when git exits with a code outside ``ok_codes``. A truncated run is not an
    error: the caller decides what partial output means. ``config`` adds ``-c key=value`` options;
    ``index_file`` makes git use that index file instead of the worktree's (``GIT_INDEX_FILE``).

    With ``sink``, stdout is not kept: each chunk is awaited in ``sink`` as it arrives (the result's
    ``stdout`` is empty) and ``max_bytes`` bounds the total streamed; ``sink`` returning False stops git and
    marks the result ``truncated``, like passing the bound. The tool executor's deadline (or the job's)
    cancels the call, which kills git's process tree; past :data:`GIT_TIMEOUT` seconds git is killed and a
    :class:`~spotpatch_agent.errors.GitError` raised whoever called.
    """
    run = await run_git_process(args, cwd=root, timeout=GIT_TIMEOUT, read_only=True, index_file=index_file,
                                config=config, max_bytes=max_bytes, sink=sink)
    if run.truncated:
        return GitOutput(None, run.stdout, True)
    if run.returncode not in ok_codes:
        raise GitError(f"git {args[0]} failed with exit code {run.returncode}")
    return GitOutput(run.returncode, run.stdout, False)
