"""The eval's deterministic judge (issue 27 part 1): file predicates on the result, never a model.

:func:`judge_files` compares every file of the app before and after the job: a file outside the task's
``files`` that changed (or appeared, or went away) fails the task, and so does each
:class:`~spotpatch_agent.eval.tasks.Expect` predicate that does not hold. The typecheck is the job's own
final ``typecheck`` check (the app's tsc / vue-tsc / svelte-check, run confined by the engine); its outcome
is a column of its own (:func:`typecheck_outcome`), ``unavailable: <why>`` when it could not be installed
or confined — never a silent pass.
"""

from __future__ import annotations

import re
from pathlib import Path

from spotpatch_agent.eval.tasks import Task

#: Folders never compared: npm's install and git's own data.
_SKIP = ("node_modules", ".git")


def snapshot(project: Path) -> dict[str, bytes]:
    """Every file of ``project`` by its project-relative POSIX path (``node_modules`` and ``.git`` skipped)."""
    files: dict[str, bytes] = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project)
        if rel.parts and rel.parts[0] in _SKIP:
            continue
        if path.is_file() and not path.is_symlink():
            files[rel.as_posix()] = path.read_bytes()
    return files


def changed_files(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """Paths whose bytes differ, were added or were removed, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def judge_files(task: Task, before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The reasons ``task`` failed on this result (``[]``: every predicate holds). Each reason is one
    line naming the file: ``unexpected change: src/styles.css``, ``src/App.tsx: expected … (why)``."""
    reasons = [f"unexpected change: {p} (the task changes only {', '.join(sorted(task.files))})"
               for p in changed_files(before, after) if p not in task.files]
    for want in task.expect:
        raw = after.get(want.path)
        if raw is None:
            reasons.append(f"{want.path}: missing ({want.why})")
            continue
        text = raw.decode("utf-8", errors="replace")
        if want.kind == "contains":
            ok = want.text in text
        elif want.kind == "lacks":
            ok = want.text not in text
        else:
            ok = re.search(want.text, text) is not None
        if not ok:
            verb = {"contains": "should contain", "lacks": "should not contain", "matches": "should match"}[want.kind]
            reasons.append(f"{want.path}: {verb} {want.text!r} ({want.why})")
    return reasons


def typecheck_outcome(checks: list[dict[str, object]], check_id: str | None, unavailable: str | None) -> str:
    """The typecheck column: ``passed`` / ``failed`` / ``timed-out`` … (the job's final check status),
    ``unavailable: <why>`` when no typecheck could run, ``not run`` when the job ended before its checks."""
    if check_id is None:
        return f"unavailable: {unavailable or 'not configured'}"
    for event in reversed(checks):
        if event.get("checkId") == check_id:
            return str(event.get("status"))
    return "not run"
