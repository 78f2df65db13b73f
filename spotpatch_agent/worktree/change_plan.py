"""What an Apply or a Revert will write, decided before anything is written (worktree/changes.py runs the
guards and git, and writes through the crash journal). Owns the change record (:class:`AppliedChange`: what
Apply did, enough to Revert it), the record's consistency with its diff (:func:`check_record`), the pre-image
checks (every path still at its baseline hash before Apply, at its post-apply hash before Revert), the
post-images computed from the diff text alone (:func:`exact_posts`; ``None`` where git must help) and their
permission bits (:func:`post_mode`), and the journal entries of each (:func:`apply_writes`, :func:`revert_plan`).
No git process and no file write here: these functions read only the images they are given and, for a new
file, which parent directories are missing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.images import ABSENT, Image, missing_parents, new_file_mode, new_tmp_name, safe_path
from spotpatch_agent.worktree.journal import PathWrite, WritePlan, list_paths
from spotpatch_agent.worktree.patch_images import FileSection, apply_exact, plain_header

__all__ = [
    "AppliedChange",
    "applied_record",
    "apply_writes",
    "check_post_images",
    "check_record",
    "exact_post",
    "exact_posts",
    "paths_by_header",
    "post_mode",
    "revert_plan",
]


@dataclass
class AppliedChange:
    """What Apply did, enough to Revert it safely (docs/design.md §8).

    ``diff``: the applied git diff (text, ``surrogateescape``-decoded bytes). ``paths``: touched
    paths, relative POSIX, git's order. ``baseline_hashes`` / ``post_hashes``: path → SHA-256 hex of
    the file's bytes before / after apply, ``None`` when the file is absent. ``job_id`` names the
    crash journal. ``baseline_images``: path → the bytes and permission bits Apply replaced (what
    Revert restores; in memory only, at most ``maxChangedFiles`` × ``editableFileMaxBytes``).
    """

    diff: str
    paths: list[str]
    baseline_hashes: dict[str, str | None]
    post_hashes: dict[str, str | None] = field(default_factory=dict)
    job_id: str = ""
    baseline_images: dict[str, Image] = field(default_factory=dict, repr=False)
    #: path → how many of its parent directories Apply made for a new file (Revert removes only those, when
    #: empty: a user's own empty directory is never removed). A path missing here: none.
    created_dirs: dict[str, int] = field(default_factory=dict)


def _sha(image: Image | str) -> str | None:
    return image if isinstance(image, str) else image.sha256


def check_record(
    paths: list[str], baseline: dict[str, str | None], result: dict[str, str | None] | None
) -> None:
    if any(not safe_path(p) for p in paths):
        raise SpotPatchError(ErrorCode.CHANGESET_REJECTED, "the change names a path outside the working tree")
    if not paths:
        raise SpotPatchError(ErrorCode.INVALID_STATE, "the change is empty; nothing to apply")
    if set(paths) != set(baseline) or (result is not None and set(paths) != set(result)):
        raise SpotPatchError(ErrorCode.INTERNAL, "the change record does not match its diff")


def apply_writes(root: Path, paths: list[str], current: dict[str, Image], posts: dict[str, Image]) -> list[PathWrite]:
    """Apply's journal entries; a new file records the parent directories its write will make (``dirs``)."""
    return [PathWrite(p, current[p], posts[p], new_tmp_name(),
                      missing_parents(root, p) if current[p].data is None else None) for p in paths]


def applied_record(diff: str, paths: list[str], baseline_hashes: dict[str, str | None], after: dict[str, str | None],
             job_id: str, writes: list[PathWrite]) -> AppliedChange:
    return AppliedChange(diff=diff, paths=paths, baseline_hashes=dict(baseline_hashes), post_hashes=after,
                         job_id=job_id, baseline_images={w.path: w.pre for w in writes},
                         created_dirs={w.path: w.dirs for w in writes if w.pre.data is None and w.dirs})


def exact_posts(
    paths: list[str],
    sections: list[FileSection],
    current: dict[str, Image | str],
    baseline_hashes: dict[str, str | None],
    result_hashes: dict[str, str | None] | None,
) -> dict[str, Image | None]:
    """Check the record and the pre-images (every path at its baseline hash, else ``APPLY_CONFLICT``), then the
    post-image of each path from the diff text alone (``None`` where git must help)."""
    check_record(paths, baseline_hashes, result_hashes)
    if len(sections) != len(paths):
        raise SpotPatchError(ErrorCode.INTERNAL, "the change record does not match its diff")
    changed = [p for p in paths if _sha(current[p]) != baseline_hashes[p]]
    if changed:
        raise SpotPatchError(
            ErrorCode.APPLY_CONFLICT, f"not applied; these files changed since the job started: {list_paths(changed)}"
        )
    posts: dict[str, Image | None] = {}
    for path, section in zip(paths, sections, strict=True):
        pre = current[path]
        assert isinstance(pre, Image)  # equal to a baseline hash, so regular or absent
        expected = result_hashes[path] if result_hashes is not None else None
        posts[path] = exact_post(section, pre, expected) if expected is not None or section.new_oid is None else None
    return posts


def paths_by_header(sections: list[FileSection], recorded: list[str]) -> list[str] | None:
    """The recorded path of each section, in diff order, matched by its exact ``diff --git`` line; ``None``
    unless every section maps to a distinct recorded path (git then lists the paths)."""
    by_header = {plain_header(p): p for p in recorded}
    paths = [by_header.get(s.header) for s in sections]
    if None in paths or len(set(paths)) != len(recorded) or len(paths) != len(recorded):
        return None
    return paths  # type: ignore[return-value]


def post_mode(section: FileSection, pre: Image) -> int | None:
    """Permission bits after Apply: the file's own, or git's for a new file or a mode change."""
    if pre.data is None or (section.old_mode and section.new_mode and section.old_mode != section.new_mode):
        return new_file_mode(section.new_mode == "100755")
    return pre.mode


def exact_post(section: FileSection, pre: Image, expected: str | None) -> Image | None:
    """The post-image from the diff text alone (see patch_images), if it has the ``expected`` hash."""
    if section.has_index and section.new_oid is None:
        return ABSENT
    data = pre.data if not section.has_index else apply_exact(section, pre.data)
    if data is None or hashlib.sha256(data).hexdigest() != expected:
        return None
    return Image(data, post_mode(section, pre))


def check_post_images(paths: list[str], current: dict[str, Image | str], applied: AppliedChange) -> None:
    changed = [p for p in paths if _sha(current[p]) != applied.post_hashes[p]]
    if changed:
        raise SpotPatchError(
            ErrorCode.REVERT_CONFLICT,
            f"not reverted; these files changed after apply: {list_paths(changed)}; resolve by hand",
        )


def revert_plan(
    root: Path,
    paths: list[str],
    current: dict[str, Image | str],
    targets: dict[str, Image],
    applied: AppliedChange,
    expected_head: str,
    job_id: str,
) -> WritePlan:
    """The revert's writes; refuses unless every target equals its baseline hash."""
    wrong = [p for p in paths if targets.get(p) is None or targets[p].sha256 != applied.baseline_hashes.get(p)]
    if wrong:
        raise SpotPatchError(
            ErrorCode.REVERT_CONFLICT,
            f"not reverted; the revert would not restore the baseline of {list_paths(wrong)}; nothing was changed, "
            "resolve by hand",
        )
    writes = []
    for path in paths:
        pre = current[path]
        assert isinstance(pre, Image)  # equal to a post-apply hash, so regular or absent
        # Removing a file Apply created: only the directories Apply made for it; re-creating one Apply
        # deleted: the directories this write makes (its undo or recovery removes only those).
        dirs = applied.created_dirs.get(path, 0) if pre.data is not None else missing_parents(root, path)
        writes.append(PathWrite(path, pre, targets[path], new_tmp_name(), dirs))
    return WritePlan(job_id, "revert", expected_head, writes)
