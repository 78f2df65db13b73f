"""The worktree's git front: fixed argv, checked exit status, bounded and sanitized errors.

The git process itself runs in :func:`spotpatch_agent.git_runner.run_git_process`, the one place the
package starts git (hardened ``-c`` prefix, allowlisted environment, timeout, bounded output, process-tree
kill; its docstring lists the options). :func:`run_git` adds what the worktree needs on top: a non-zero
exit is a :class:`~spotpatch_agent.errors.GitError` whose message names the subcommand and carries a
sanitized excerpt of git's stderr (no absolute path, no secret). docs/design.md §8: "Only fixed-argv git
subcommands; model text is never put on a command line". Data that may come from the model (file names,
patches) travels on stdin, never in ``args``.

The user's git configuration (system, global, the repository's own) and attribute files are otherwise
read as git reads them: the job's worktree must be checked out the way the user's working tree is (line
endings, filters of unchanged files), ignore rules (``core.excludesFile``) keep hiding what the user
ignores, and ``safe.directory`` keeps working. What that configuration may *not* do — make Apply write
other bytes than the review shows — is ruled out by changeset validation instead
(:mod:`~spotpatch_agent.worktree.checkout_form`): it cannot be ruled out here, since a repository's own
``.git/config`` and ``info/attributes`` can configure the same conversions as a global config.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import CACHED_DIFF_SUBMODULES, DEFAULT_MAX_BYTES, run_git_process, subcommand
from spotpatch_agent.policy.redact import REDACTOR

__all__ = ["CACHED_DIFF_SUBMODULES", "GitResult", "run_git", "sanitize", "describe", "MAX_ERROR_CHARS"]

#: Upper bound of the stderr excerpt carried by a :class:`GitError` message, in characters.
MAX_ERROR_CHARS = 500

@dataclass(frozen=True)
class GitResult:
    """What a finished git process left: exit status and the raw bytes of both streams (stderr: its head,
    :data:`~spotpatch_agent.git_runner.STDERR_KEEP_BYTES`)."""

    returncode: int
    stdout: bytes
    stderr: bytes


_WIN_ABS = re.compile(r"(?<![\w])[A-Za-z]:[\\/][^\s'\"`]*")
_POSIX_ABS = re.compile(r"(?<![\w.~/>-])/(?:[^\s'\"`:/]+/)*[^\s'\"`:/]+/?")
#: A quoted absolute path (git quotes most of the paths it names: ``unable to access '/Users/Jo Ann/…'``),
#: taken whole: the unquoted patterns stop at a space and would leave the rest of the path behind.
_QUOTED_ABS = re.compile(r"(['\"`])(?:/|[A-Za-z]:[\\/])[^'\"`\n]*\1")
#: A word after an absolute path that goes on with a ``/`` (``/home/ann lee/.gitconfig``, unquoted): still the path.
_PATH_TAIL = re.compile(r"<path>(?: [^\s'\"`:]*/[^\s'\"`:]*)+")


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
    out = _QUOTED_ABS.sub(lambda m: f"{m.group(1)}<path>{m.group(1)}", out)
    out = _WIN_ABS.sub("<path>", out)
    out = _POSIX_ABS.sub("<path>", out)
    out = _PATH_TAIL.sub("<path>", out)
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
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> GitResult:
    """Run ``git <hardened prefix> <args>`` in ``cwd`` and collect its output.

    ``args`` is a fixed argv (never model text); ``input`` is fed to stdin (stdin is the null
    device otherwise, so the engine's own stdin — the JSON-RPC channel — is never inherited).
    ``timeout`` is in seconds. ``read_only=True`` sets ``GIT_OPTIONAL_LOCKS=0``. ``redact`` lists
    extra absolute paths (e.g. a worktree) to hide from error messages besides ``cwd``.
    ``index_file``: an absolute path git uses as the index instead of the repository's (``GIT_INDEX_FILE``;
    the engine's own temporary index, never the user's). ``max_bytes`` bounds stdout.

    Returns a :class:`GitResult`. Raises :class:`GitError` (code ``INTERNAL``) when git exits
    non-zero and ``check`` is true, when it cannot be started, when it exceeds ``timeout`` or when its
    stdout passes ``max_bytes``; the message names the subcommand and holds at most :data:`MAX_ERROR_CHARS`
    characters of stderr with ``cwd`` shown as ``.`` and any other absolute path (quoted or with spaces) as
    ``<path>``. On timeout or cancellation git and every process it started
    (filters, helpers: its own process group on POSIX) are killed; cancellation propagates.
    """
    try:
        run = await run_git_process(args, cwd=cwd, input=input, timeout=timeout, read_only=read_only,
                                    index_file=index_file, max_bytes=max_bytes)
    except OSError as exc:
        reason = sanitize(exc.strerror or type(exc).__name__, cwd, *redact)
        raise GitError(f"git {subcommand(args)} could not be started: {reason}") from None
    if run.truncated:
        raise GitError(f"git {subcommand(args)} wrote more than {max_bytes} bytes")
    assert run.returncode is not None
    result = GitResult(run.returncode, run.stdout, run.stderr)
    if check and result.returncode != 0:
        raise GitError(f"git {subcommand(args)} failed (exit {result.returncode}): {describe(result, cwd, *redact)}")
    return result


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
