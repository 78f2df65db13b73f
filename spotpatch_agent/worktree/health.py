"""Repository health (DESIGN.md §8): may a job isolate this repository, and does it need consent?

A diagnosis of this instant, not a lock: creation, Apply and Revert re-read the disk themselves.
Nothing here writes — ``git status`` runs with ``GIT_OPTIONAL_LOCKS=0`` so it never refreshes the
user's index.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from spotpatch_agent.protocol.models import HealthCounts, Limits, RepoHealth
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.repo import locate, operation_reasons, resolve_head, same_path

__all__ = ["repo_health", "read_status", "LocalStatus"]


@dataclass
class LocalStatus:
    """Parsed ``git status --porcelain=v2``: counts plus the paths behind them (relative POSIX).

    ``changed`` holds every tracked path with a staged or unstaged change (deleted ones included),
    ``untracked`` every untracked path (a nested repository shows as ``dir/``).
    """

    counts: HealthCounts = field(default_factory=HealthCounts)
    changed: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)

    @property
    def dirty(self) -> bool:
        return bool(self.changed or self.untracked)


async def read_status(root: Path) -> LocalStatus:
    """Staged, unstaged, untracked and conflicted entries of the working tree at ``root``.

    Uses ``git status --porcelain=v2 -z --untracked-files=all --no-renames`` (read-only). Raises
    :class:`~spotpatch_agent.errors.GitError` if git fails.
    """
    result = await run_git(
        ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=none"],
        cwd=root,
        read_only=True,
    )
    return _parse_status(result.stdout)


def _parse_status(raw: bytes) -> LocalStatus:
    out = LocalStatus()
    fields = raw.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i].decode("utf-8", "surrogateescape")
        i += 1
        if not entry:
            continue
        kind = entry[0]
        if kind == "?":
            out.untracked.append(entry[2:])
            out.counts.untracked += 1
        elif kind in "12":
            parts = entry.split(" ", 8 if kind == "1" else 9)
            xy, path = parts[1], parts[-1]
            if kind == "2":
                i += 1  # the original path of a rename/copy follows as its own field
            out.counts.staged += xy[0] != "."
            out.counts.unstaged += xy[1] != "."
            out.changed.append(path)
        elif kind == "u":
            out.counts.conflicted += 1
            out.changed.append(entry.split(" ", 10)[-1])
    return out


async def repo_health(root: Path, limits: Limits) -> RepoHealth:
    """The health of the repository whose top level must be ``root`` (DESIGN.md §8).

    Returns ``RepoHealth{state, reasons, counts}``:

    - ``blocked`` with one or more stable reasons — ``not-a-git-repository``, ``not-top-level``,
      ``head-unresolvable``, ``merge-in-progress``, ``rebase-in-progress``, ``am-in-progress``,
      ``cherry-pick-in-progress``, ``revert-in-progress``, ``bisect-in-progress``, ``conflicts``,
      ``index-locked``, ``untracked-symlink``, ``untracked-not-regular``,
      ``local-changes-over-limit`` (more than ``localSnapshotMaxFiles`` changed/untracked paths,
      or more than ``localSnapshotMaxBytes`` bytes in their working-tree files);
    - ``consent-required`` when healthy but with staged, unstaged or untracked changes;
    - ``clean`` otherwise.

    ``counts`` are entries of ``git status`` (a path staged and unstaged counts in both). Never
    writes. Raises :class:`~spotpatch_agent.errors.GitError` only when git itself misbehaves on
    a repository it did recognise.
    """
    layout = await locate(root)
    if layout is None:
        return RepoHealth(state="blocked", reasons=["not-a-git-repository"])
    if not same_path(layout.toplevel, root):
        return RepoHealth(state="blocked", reasons=["not-top-level"])
    reasons: list[str] = []
    if await resolve_head(root) is None:
        reasons.append("head-unresolvable")
    reasons.extend(operation_reasons(layout))
    status = await read_status(root)
    if status.counts.conflicted:
        reasons.append("conflicts")
    reasons.extend(_untracked_reasons(root, status.untracked))
    if _over_limits(root, status, limits):
        reasons.append("local-changes-over-limit")
    if reasons:
        state = "blocked"
    elif status.dirty:
        state = "consent-required"
    else:
        state = "clean"
    return RepoHealth(state=state, reasons=list(dict.fromkeys(reasons)), counts=status.counts)


def _untracked_reasons(root: Path, untracked: list[str]) -> list[str]:
    reasons: list[str] = []
    for rel in untracked:
        try:
            st = os.lstat(root / rel.rstrip("/"))
        except OSError:
            continue  # vanished since status ran; the next check will see the new state
        if stat.S_ISLNK(st.st_mode):
            reasons.append("untracked-symlink")
        elif not stat.S_ISREG(st.st_mode):
            reasons.append("untracked-not-regular")
    return reasons


def _over_limits(root: Path, status: LocalStatus, limits: Limits) -> bool:
    paths = set(status.changed) | set(status.untracked)
    if len(paths) > limits.get("localSnapshotMaxFiles"):
        return True
    budget = limits.get("localSnapshotMaxBytes")
    total = 0
    for rel in paths:
        try:
            st = os.lstat(root / rel.rstrip("/"))
        except OSError:
            continue  # deleted in the working tree: no bytes to snapshot
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
            if total > budget:
                return True
    return False
