"""Read-only facts about the user's repository: where it is, its HEAD, and git operations in progress.

Shared by health (docs/design.md §8 "Blocked"), worktree creation and apply/revert, which must all
re-read the disk instead of trusting an earlier health answer. Nothing here writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.worktree.git import run_git

__all__ = ["RepoLayout", "locate", "resolve_head", "operation_reasons", "same_path"]


@dataclass(frozen=True)
class RepoLayout:
    """Absolute real paths of a repository seen from one working tree.

    ``toplevel`` is the working tree's root, ``git_dir`` its private git directory (``.git`` of
    the main worktree, ``.git/worktrees/<id>`` of a linked one) and ``common_dir`` the directory
    shared by all worktrees (objects, refs, ``worktrees/``).
    """

    toplevel: Path
    git_dir: Path
    common_dir: Path


def same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same directory once symlinks are resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


async def locate(root: Path) -> RepoLayout | None:
    """The layout of the repository whose working tree contains ``root``; ``None`` if there is none.

    A bare repository, a ``.git`` directory, an unsafe (foreign-owned) repository and a missing
    ``root`` all count as "not a git repository".
    """
    if not root.is_dir():
        return None
    result = await run_git(
        ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir"],
        cwd=root,
        check=False,
        read_only=True,
        timeout=30,
    )
    if result.returncode != 0:
        return None
    lines = result.stdout.decode("utf-8", "surrogateescape").split("\n")
    if len(lines) != 4 or lines[3] != "" or not all(lines[:3]):
        return None
    top, git_dir, common = (Path(os.path.realpath(line)) for line in lines[:3])
    return RepoLayout(top, git_dir, common)


async def resolve_head(root: Path) -> str | None:
    """The full object id of the commit ``HEAD`` names in ``root``, or ``None`` (unborn, broken)."""
    result = await run_git(
        ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        cwd=root,
        check=False,
        read_only=True,
        timeout=30,
    )
    if result.returncode != 0:
        return None
    oid = result.stdout.decode("ascii", "replace").strip()
    return oid if oid and all(c in "0123456789abcdef" for c in oid) else None


def operation_reasons(layout: RepoLayout) -> list[str]:
    """Blocking git operations in progress in this working tree, as stable reason strings.

    Reads marker files of ``git_dir`` only: ``merge-in-progress`` (``MERGE_HEAD``),
    ``rebase-in-progress`` (``rebase-merge/``, ``rebase-apply/``), ``am-in-progress``
    (``rebase-apply/applying``), ``cherry-pick-in-progress`` (``CHERRY_PICK_HEAD`` or a picking
    sequencer), ``revert-in-progress`` (``REVERT_HEAD`` or a reverting sequencer),
    ``bisect-in-progress`` (``BISECT_LOG``) and ``index-locked`` (``index.lock``). docs/design.md §8.
    """
    gd = layout.git_dir
    reasons: list[str] = []
    if (gd / "MERGE_HEAD").exists():
        reasons.append("merge-in-progress")
    if (gd / "rebase-apply" / "applying").exists():
        reasons.append("am-in-progress")
    elif (gd / "rebase-merge").is_dir() or (gd / "rebase-apply").is_dir():
        reasons.append("rebase-in-progress")
    sequencer = _sequencer_command(gd)
    if (gd / "CHERRY_PICK_HEAD").exists() or sequencer == "pick":
        reasons.append("cherry-pick-in-progress")
    if (gd / "REVERT_HEAD").exists() or sequencer == "revert":
        reasons.append("revert-in-progress")
    if (gd / "BISECT_LOG").exists():
        reasons.append("bisect-in-progress")
    if (gd / "index.lock").exists():
        reasons.append("index-locked")
    return reasons


def _sequencer_command(git_dir: Path) -> str | None:
    """The first command of a multi-commit cherry-pick/revert (``sequencer/todo``), if any."""
    try:
        text = (git_dir / "sequencer" / "todo").read_text("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            return {"p": "pick", "pick": "pick", "revert": "revert"}.get(words[0], "pick")
    return None
