"""A bounded, fixed-argv git runner for the file tools (docs/design.md §8: model text is never a command line).

Model-supplied text only ever appears as a single argv element after ``-e`` or ``--``, never through a
shell. Output is read as it streams and bounded: past ``max_bytes`` the process is killed and the result
is marked ``truncated``. Cancellation (the executor's tool deadline) kills the process; no orphan stays.

TODO(worktree): replace with the worktree package's git runner once it exists.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream

from spotpatch_agent.errors import GitError
from spotpatch_agent.policy.paths import git_env
from spotpatch_agent.process import kill_tree

#: Options put before every subcommand: never run a user fsmonitor hook from inside a tool.
_GIT_PREFIX = ("git", "-c", "core.fsmonitor=false", "-c", "core.quotepath=off", "-c", "gc.auto=0",
               "-c", "maintenance.auto=false")
_STDERR_KEEP = 4096


@dataclass(frozen=True)
class GitOutput:
    """``returncode`` (None when killed after truncation), ``stdout`` bytes, ``truncated`` flag."""

    returncode: int | None
    stdout: bytes
    truncated: bool



async def run_git(
    root: Path,
    *args: str,
    max_bytes: int = 32 * 1024 * 1024,
    ok_codes: tuple[int, ...] = (0,),
    config: tuple[str, ...] = (),
    index_file: str | None = None,
    sink: Callable[[bytes], Awaitable[bool]] | None = None,
) -> GitOutput:
    """Run ``git <args>`` in ``root`` with a minimal environment; stdout bounded to ``max_bytes`` bytes.

    Raises :class:`~spotpatch_agent.errors.GitError` (code ``INTERNAL``, sanitized message naming only the
    subcommand and exit code) when git exits with a code outside ``ok_codes``. A truncated run is not an
    error: the caller decides what partial output means. ``config`` adds ``-c key=value`` options;
    ``index_file`` makes git use that index file instead of the worktree's (``GIT_INDEX_FILE``).

    With ``sink``, stdout is not kept: each chunk is awaited in ``sink`` as it arrives (the result's
    ``stdout`` is empty) and ``max_bytes`` bounds the total streamed; ``sink`` returning False stops git and
    marks the result ``truncated``, like passing the bound.
    """
    argv = [*_GIT_PREFIX, *(part for item in config for part in ("-c", item)), *args]
    env = git_env()
    if index_file is not None:
        env["GIT_INDEX_FILE"] = index_file
    process = await anyio.open_process(argv, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                        start_new_session=os.name != "nt")
    chunks: list[bytes] = []
    size = 0
    truncated = False
    stderr_tail = bytearray()
    try:
        async with anyio.create_task_group() as tg:

            async def drain_stderr(stream: ByteReceiveStream) -> None:
                async for chunk in stream:
                    if len(stderr_tail) < _STDERR_KEEP:
                        stderr_tail.extend(chunk[: _STDERR_KEEP - len(stderr_tail)])

            assert process.stdout is not None and process.stderr is not None
            tg.start_soon(drain_stderr, process.stderr)
            async for chunk in process.stdout:
                if sink is not None:
                    size += len(chunk)
                    if size > max_bytes or not await sink(chunk):
                        truncated = True
                        kill_tree(process)
                        break
                    continue
                if size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    truncated = True
                    kill_tree(process)
                    break
                chunks.append(chunk)
                size += len(chunk)
        returncode = await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                kill_tree(process)
            await process.aclose()
    if truncated:
        return GitOutput(None, b"".join(chunks), True)
    if returncode not in ok_codes:
        raise GitError(f"git {args[0]} failed with exit code {returncode}")
    return GitOutput(returncode, b"".join(chunks), False)
