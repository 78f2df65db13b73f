"""Git isolation for jobs (docs/design.md §8): fixed-argv git runner, repository health, one detached
worktree per job with a baseline commit (optionally holding the user's local changes), the agent's
result diff, and safe, crash-journalled apply/revert.

Public surface (re-exported here; modules: ``git``, ``repo``, ``health``, ``isolation``, ``changes``)::

    run_git(args, *, cwd, input=None, check=True, timeout=60, read_only=False, redact=()) -> GitResult
    repo_health(root, limits) -> RepoHealth
    create_worktree(root, job_id, *, limits=None, include_local_changes=False, pool=None, health=None) -> Worktree
    result_diff(wt) -> (diff, [FileStat])
    change_hashes(wt) -> ChangeHashes(baseline, result)
    remove_worktree(root, wt) -> None                     never raises
    sweep_orphans(root, *, live_job_ids=frozenset()) -> int
    apply_change(root, diff, baseline_hashes, *, expected_head, result_hashes=None,
                 journal=None, job_id=None) -> AppliedChange
    revert_change(root, applied, *, expected_head, journal=None) -> None

``journal=None`` means the real crash journal under the git directory (``journal.DiskJournal``);
``NULL_JOURNAL`` records nothing (tests only). Not re-exported: ``health.blocked_message``,
``snapshot`` (include-local-changes), ``validate`` (changeset validation), ``journal`` (crash journal
and recovery), ``images``/``patch_images`` (file images), ``pool`` (warm worktree pool), ``lock``
(cross-engine write lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spotpatch_agent.worktree.changes import (
        NULL_JOURNAL,
        AppliedChange,
        ChangeHashes,
        ChangeJournal,
        apply_change,
        change_hashes,
        file_hash,
        revert_change,
    )
    from spotpatch_agent.worktree.git import GitResult, run_git, sanitize
    from spotpatch_agent.worktree.health import repo_health
    from spotpatch_agent.worktree.isolation import (
        Worktree,
        create_worktree,
        remove_worktree,
        result_diff,
        sweep_orphans,
    )

#: Re-exported name → its module. Imported on first access (PEP 562), so importing one submodule (e.g.
#: ``worktree.isolation`` to answer initialize) does not import them all (cold start, issue 3).
_EXPORTS = {
    **dict.fromkeys(("NULL_JOURNAL", "AppliedChange", "ChangeHashes", "ChangeJournal", "apply_change",
                     "change_hashes", "file_hash", "revert_change"), "changes"),
    **dict.fromkeys(("GitResult", "run_git", "sanitize"), "git"),
    "repo_health": "health",
    **dict.fromkeys(("Worktree", "create_worktree", "remove_worktree", "result_diff", "sweep_orphans"), "isolation"),
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "NULL_JOURNAL",
    "AppliedChange",
    "ChangeHashes",
    "ChangeJournal",
    "GitResult",
    "Worktree",
    "apply_change",
    "change_hashes",
    "create_worktree",
    "file_hash",
    "remove_worktree",
    "repo_health",
    "result_diff",
    "revert_change",
    "run_git",
    "sanitize",
    "sweep_orphans",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
