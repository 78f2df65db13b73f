"""The one boundary where the engine runs git: fixed argv, ``shell=False``, bounded and sanitized errors.

Every git command of the engine goes through :func:`run_git` (docs/design.md §8: "Only fixed-argv git
subcommands; model text is never put on a command line"). Data that may come from the model (file
names, patches) travels on stdin, never in ``args``.

Each call gets a hardened prefix of ``-c`` options so the user's configuration cannot change what
we parse or run: no hooks (``core.hooksPath`` points at the null device), no fsmonitor daemon, no
colour, no path quoting, no automatic ``gc``/maintenance (a commit in a linked worktree would
otherwise run ``gc --auto`` on the user's repository), git's canonical diff headers and blank context
lines, no ``core.safecrlf`` refusal.

The user's git configuration (system, global, the repository's own) and attribute files are otherwise
read as git reads them: the job's worktree must be checked out the way the user's working tree is (line
endings, filters of unchanged files), ignore rules (``core.excludesFile``) keep hiding what the user
ignores, and ``safe.directory`` keeps working. What that configuration may *not* do — make Apply write
other bytes than the review shows — is ruled out by changeset validation instead
(:mod:`~spotpatch_agent.worktree.checkout_form`): it cannot be ruled out here, since a repository's own
``.git/config`` and ``info/attributes`` can configure the same conversions as a global config. The environment is the engine's own minus the variables that would
redirect git to another repository (``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE``, …), plus
``GIT_TERMINAL_PROMPT=0`` and ``LC_ALL=C``; read-only calls also set ``GIT_OPTIONAL_LOCKS=0`` so that
e.g. ``git status`` never refreshes (writes) the user's index.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import AsyncIterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from spotpatch_agent.policy.paths import git_env
from spotpatch_agent.errors import GitError
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.process import kill_tree

__all__ = ["GitResult", "run_git", "sanitize", "describe", "MAX_ERROR_CHARS"]

_POSIX = os.name == "posix"

#: Upper bound of the stderr excerpt carried by a :class:`GitError` message, in characters.
MAX_ERROR_CHARS = 500

#: Environment variables that would point git at another repository, index or object store.
_REPO_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
)

#: Options placed before every subcommand (see the module docstring).
_PREFIX = (
    "-c", "core.quotepath=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "core.fsmonitor=false",
    "-c", "color.ui=false",
    # Never let a command of ours start git's housekeeping in the user's repository (gc packs refs,
    # expires reflogs and prunes worktree registrations; maintenance may run after we exit).
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    # The review's text is git's canonical diff whatever the user's diff settings (hunk layout aside:
    # diff.algorithm may place hunks differently, never change what they say).
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.relative=false",
    # core.safecrlf only refuses (or warns about) staging a file whose line endings a checkout would change;
    # it never changes bytes. Validation judges that itself (worktree/checkout_form.py), with a clear reason.
    "-c", "core.safecrlf=false",
)


@dataclass(frozen=True)
class GitResult:
    """What a finished git process left: exit status and the raw bytes of both streams."""

    returncode: int
    stdout: bytes
    stderr: bytes


def _environment(read_only: bool, index_file: Path | None = None) -> dict[str, str]:
    """An allowlisted environment (policy.paths.git_env): provider keys and tokens never reach git."""
    env = {k: v for k, v in git_env().items() if k not in _REPO_ENV}
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    env["LANGUAGE"] = "C"
    if read_only:
        env["GIT_OPTIONAL_LOCKS"] = "0"
    else:
        env.pop("GIT_OPTIONAL_LOCKS", None)
    return env


_WIN_ABS = re.compile(r"(?<![\w])[A-Za-z]:[\\/][^\s'\"`]*")
_POSIX_ABS = re.compile(r"(?<![\w.~/>-])/(?:[^\s'\"`:/]+/)*[^\s'\"`:/]+/?")


def sanitize(text: str, *paths: Path | str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` with every absolute path removed, bounded to ``limit`` characters.

    Each of ``paths`` (real and given spelling) is replaced by ``.`` first (the first one) or
    ``<worktree>`` (the others), so relative names stay readable; any remaining absolute path
    becomes ``<path>``. Control characters become spaces. docs/design.md §3 / §16 invariant 3.
    """
    out = text
    for index, path in enumerate(paths):
        label = "." if index == 0 else "<worktree>"
        for spelling in _spellings(path):
            out = out.replace(spelling + os.sep, label + "/").replace(spelling + "/", label + "/")
            out = out.replace(spelling, label)
    out = _WIN_ABS.sub("<path>", out)
    out = _POSIX_ABS.sub("<path>", out)
    out = "".join(ch if ch.isprintable() else " " for ch in out)
    out = REDACTOR(re.sub(r" {2,}", " ", out).strip())  # redact before the cut (no secret prefix survives)
    if len(out) > limit:
        out = out[: limit - 1] + "…"
    return out


def _spellings(path: Path | str) -> list[str]:
    given = os.fspath(path)
    spellings = {given.rstrip("/\\") or given}
    try:
        spellings.add(os.path.realpath(given))
        spellings.add(os.path.abspath(given))
    except (OSError, ValueError):
        pass
    # Longest first, so a prefix never eats part of a longer spelling.
    return sorted((s for s in spellings if len(s) > 1), key=len, reverse=True)


def _subcommand(args: Sequence[str]) -> str:
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-c", "-C"):
            skip = True
            continue
        if not arg.startswith("-"):
            return arg
    return "command"


async def run_git(
    args: Sequence[str],
    *,
    cwd: Path,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = 60,
    read_only: bool = False,
    redact: Sequence[Path] = (),
    index_file: Path | None = None,
) -> GitResult:
    """Run ``git <hardened prefix> <args>`` in ``cwd`` and collect its output.

    ``args`` is a fixed argv (never model text); ``input`` is fed to stdin (stdin is the null
    device otherwise, so the engine's own stdin — the JSON-RPC channel — is never inherited).
    ``timeout`` is in seconds. ``read_only=True`` sets ``GIT_OPTIONAL_LOCKS=0``. ``redact`` lists
    extra absolute paths (e.g. a worktree) to hide from error messages besides ``cwd``.
    ``index_file``: an absolute path git uses as the index instead of the repository's (``GIT_INDEX_FILE``;
    the engine's own temporary index, never the user's).

    Returns a :class:`GitResult`. Raises :class:`GitError` (code ``INTERNAL``) when git exits
    non-zero and ``check`` is true, when it cannot be started, or when it exceeds ``timeout``; the
    message names the subcommand and holds at most :data:`MAX_ERROR_CHARS` characters of stderr
    with ``cwd`` shown as ``.``. On timeout or cancellation git and every process it started
    (filters, helpers: its own process group on POSIX) are killed; cancellation propagates.
    """
    argv = ["git", *_PREFIX, *args]
    sub = _subcommand(args)
    try:
        with anyio.fail_after(timeout):
            returncode, out, err = await _run(argv, cwd, input or None, _environment(read_only, index_file))
    except TimeoutError:
        raise GitError(f"git {sub} timed out after {timeout:g} s") from None
    except OSError as exc:
        reason = sanitize(exc.strerror or type(exc).__name__, cwd, *redact)
        raise GitError(f"git {sub} could not be started: {reason}") from None
    result = GitResult(returncode, out, err)
    if check and result.returncode != 0:
        raise GitError(f"git {sub} failed (exit {result.returncode}): {describe(result, cwd, *redact)}")
    return result


async def _run(argv: list[str], cwd: Path, input: bytes | None, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    chunks: tuple[list[bytes], list[bytes]] = ([], [])
    returncode = -1

    async def drain(stream: AsyncIterable[bytes] | None, sink: list[bytes]) -> None:
        if stream is not None:
            async for chunk in stream:
                sink.append(chunk)

    async def feed(process: Process) -> None:
        assert process.stdin is not None
        try:
            await process.stdin.send(input or b"")
            await process.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError):
            pass  # git stopped reading (it failed early); its exit status tells why

    async with await anyio.open_process(
        argv,
        stdin=subprocess.PIPE if input else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=_POSIX,
    ) as process:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, process.stdout, chunks[0])
                tg.start_soon(drain, process.stderr, chunks[1])
                if input:
                    tg.start_soon(feed, process)
                returncode = await process.wait()
        except BaseException:
            kill_tree(process)
            raise
    return returncode, b"".join(chunks[0]), b"".join(chunks[1])



def describe(result: GitResult, cwd: Path, *redact: Path) -> str:
    """git's stderr of ``result``, decoded, sanitized against ``cwd`` and ``redact``, bounded."""
    text = result.stderr.decode("utf-8", "replace")
    return sanitize(text, cwd, *redact) or "no diagnostics"


def parse_cat_file_batch(data: bytes) -> dict[str, bytes]:
    """``oid → bytes`` of each blob in ``git cat-file --batch`` output (``<oid> missing`` lines and
    other object types skipped)."""
    blobs: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        fields = data[pos:end].split(b" ")
        pos = end + 1
        if len(fields) != 3 or not fields[2].isdigit():
            continue  # "<oid> missing"
        size = int(fields[2])
        if fields[1] == b"blob":
            blobs[fields[0].decode("ascii")] = data[pos : pos + size]
        pos += size + 1
    return blobs
