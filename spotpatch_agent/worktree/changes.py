"""Apply the agent's diff to the user's working tree, and revert it, safely (docs/design.md §8).

Apply: HEAD and git operation state re-read; every touched path must still hold its baseline bytes
(SHA-256; "absent" must be absent). Post-images: the diff's hunks applied exactly to those bytes
(:mod:`~spotpatch_agent.worktree.patch_images`, stricter than ``git apply --check``), else
``git apply --check`` (working tree only: never ``--index``/``--cached``/``--reject``; the diff on
stdin) and the job's result blobs (the ``index`` lines of the ``--full-index`` diff name them; the
job's worktree shares the object store) in working-tree form — either way verified against the
expected result hashes before anything is written. Then the crash journal
(:mod:`~spotpatch_agent.worktree.journal`) is made durable and each path is re-checked and replaced
(:func:`~spotpatch_agent.worktree.image_write.replace_image`: exchanged with a same-directory temp file, the
bytes that came out verified to be the pre-image before they are discarded); every path is verified
afterwards. A write error undoes what was written (``APPLY_CONFLICT``: nothing changed); a race — a save
to a touched file while it is written — is reported the same way, naming the file, whose saved bytes stay
on disk while every other path is undone. So each file is wholly old or wholly new at every instant, even
under ``kill -9``, and a user's save is never lost.

Revert: HEAD and operation state unchanged; every touched path must still hold its post-apply bytes,
else ``REVERT_CONFLICT`` ("resolve by hand"); the target bytes are the ones Apply replaced (kept in
:class:`AppliedChange`; without them the diff's old blobs, after ``git apply --reverse --check``) and
must equal the baseline hashes, else it refuses before writing; then the same journalled, per-file
atomic write.

Neither ever touches the index, HEAD or a path the diff does not name; file permission bits are
kept (new files get git's ``0666 & ~umask``). Hashes are of the file's bytes as they are (or will be)
in a working tree: :func:`~spotpatch_agent.worktree.hashes.change_hashes` runs git's checkout filters
(``cat-file --filters``), so ``eol=crlf`` and similar attributes compare correctly.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.change_plan import (
    AppliedChange,
    applied_record,
    apply_writes,
    check_post_images,
    exact_posts,
    paths_by_header,
    post_mode,
    revert_plan,
)
from spotpatch_agent.worktree.git import describe, run_git
from spotpatch_agent.worktree.hashes import filtered_blob, raw_blobs
from spotpatch_agent.worktree.images import (
    ABSENT,
    NOT_REGULAR,
    Image,
    file_hash,
    new_file_mode,
    read_image,
    safe_path,
)
from spotpatch_agent.worktree.journal import (
    ChangeJournal,
    DiskJournal,
    PathWrite,
    WritePlan,
    list_paths,
    valid_job_id,
    write_journalled,
    write_journalled_sync,
)
from spotpatch_agent.worktree.patch_images import (
    FileSection,
    parse_sections,
)
from spotpatch_agent.worktree.refs import RepoState, read_repo_state
from spotpatch_agent.worktree.repo import (
    RepoLayout,
    locate,
    operation_reasons,
    resolve_head,
    same_path,
)

__all__ = [
    "NOT_REGULAR",
    "AppliedChange",
    "ChangeJournal",
    "apply_change",
    "file_hash",
    "revert_change",
]


# ---------------------------------------------------------------- shared guards and helpers


async def _repo_facts(root: Path) -> tuple[RepoLayout | None, str | None]:
    """The repository layout and HEAD's commit id in one ``git rev-parse`` (else :func:`locate` +
    :func:`resolve_head`, e.g. outside a repository)."""
    out = await run_git(
        ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir",
         "--verify", "--quiet", "HEAD^{commit}"],
        cwd=root, check=False, read_only=True, timeout=30,
    )
    lines = out.stdout.decode("utf-8", "surrogateescape").split("\n")
    if out.returncode in (0, 1) and len(lines) == 5 - out.returncode and lines[-1] == "" and all(lines[:3]):
        layout = RepoLayout(*(Path(os.path.realpath(line)) for line in lines[:3]))
        oid = lines[3] if out.returncode == 0 else ""
        return layout, oid if oid and all(c in "0123456789abcdef" for c in oid) else None
    return await locate(root), await resolve_head(root)


async def _guard_repository(root: Path, expected_head: str, code: ErrorCode, what: str) -> RepoLayout:
    """HEAD still ``expected_head`` and no git operation in progress, else ``SpotPatchError(code)`` (git's answer)."""
    layout, head = await _repo_facts(root)
    if layout is None or not same_path(layout.toplevel, root):
        raise SpotPatchError(ErrorCode.REPO_BLOCKED,
                             f"cannot {what}: the project is no longer a git repository top level")
    if head != expected_head:
        raise SpotPatchError(code, f"cannot {what}: HEAD moved since the job started; nothing was changed")
    _check_operations(layout, code, what)
    return layout


def _check_operations(layout: RepoLayout, code: ErrorCode, what: str) -> None:
    busy = operation_reasons(layout)
    if busy:
        raise SpotPatchError(
            code, f"cannot {what}: a git operation is in progress ({', '.join(busy)}); finish it and try again"
        )


def _state_and_images(root: Path, paths: list[str]) -> tuple[RepoState | None, dict[str, Image | str]]:
    return read_repo_state(root), {p: read_image(root, p) for p in paths}


def _fast_guard(
    root: Path, state: RepoState | None, expected_head: str, code: ErrorCode, what: str
) -> Callable[[], None] | None:
    """The guard from the in-process reading (:mod:`~spotpatch_agent.worktree.refs`): ``None`` when it cannot
    decide (the reader declined, or read anything but ``expected_head``: git must answer). Otherwise raises
    when an operation is in progress, or returns the re-check to run right before the journal is written."""
    if state is None or state.head != expected_head:
        return None
    _check_operations(state.layout, code, what)
    layout = state.layout

    def recheck() -> None:  # the same in-process read, microseconds before the first write
        again = read_repo_state(root)
        if again is None:
            return  # became unusual since: the check moments ago stands
        if again.head != expected_head or again.layout != layout:
            raise SpotPatchError(code, f"cannot {what}: HEAD moved since the job started; nothing was changed")
        _check_operations(again.layout, code, what)

    return recheck


async def _finish_guard(
    root: Path, state: RepoState | None, expected_head: str, code: ErrorCode, what: str
) -> tuple[RepoLayout, Callable[[], None] | None]:
    """The guard (HEAD, operation state) from the in-process reading, else from git (:func:`_guard_repository`).
    Returns the layout and the pre-journal re-check (``None`` after a git answer)."""
    recheck = _fast_guard(root, state, expected_head, code, what)
    if recheck is None:
        return await _guard_repository(root, expected_head, code, what), None
    assert state is not None
    return state.layout, recheck


async def _git_check(root: Path, patch: bytes, *, reverse: bool, numstat: bool) -> tuple[bool, list[str], str]:
    """``git apply [--reverse] --check`` (with ``--numstat -z``: also the touched paths); writes nothing.

    Returns ``(applies, paths, why)``; ``paths`` is empty without ``numstat``."""
    args = ["apply", "--whitespace=nowarn", *(["--reverse"] if reverse else []), "--check"]
    out = await run_git([*args, *(["--numstat", "-z"] if numstat else []), "-"], cwd=root, input=patch,
                        check=False, read_only=True, timeout=120)
    if out.returncode == 0:
        return True, _numstat_paths(out.stdout) if numstat else [], ""
    why = describe(out, root)
    if not numstat:
        return False, [], why
    listed = await run_git(["apply", "--numstat", "-z", "-"], cwd=root, input=patch, check=False, read_only=True)
    if listed.returncode != 0:
        raise SpotPatchError(ErrorCode.INTERNAL, f"the recorded diff does not parse: {describe(listed, root)}")
    return False, _numstat_paths(listed.stdout), why


def _numstat_paths(raw: bytes) -> list[str]:
    return [r.decode("utf-8", "surrogateescape").split("\t", 2)[2] for r in raw.split(b"\0") if r]


# ---------------------------------------------------------------- apply


async def apply_change(
    root: Path,
    diff: str,
    baseline_hashes: dict[str, str | None],
    *,
    expected_head: str,
    result_hashes: dict[str, str | None] | None = None,
    journal: ChangeJournal | None = None,
    job_id: str | None = None,
) -> AppliedChange:
    """Apply the agent's ``diff`` to the working tree of ``root``, all-or-nothing (docs/design.md §8).

    ``baseline_hashes`` (path → SHA-256 hex or ``None`` = absent) must name exactly the paths the
    diff touches (see :func:`change_hashes`). ``result_hashes`` (optional, usually
    ``change_hashes(wt).result``): the bytes written must have these hashes, checked before the
    first write. ``journal``: default a :class:`~spotpatch_agent.worktree.journal.DiskJournal` in the
    repository's git dir, named ``job_id`` (default a random id). Returns the
    :class:`AppliedChange` record. Never writes the index or HEAD, never touches other paths.

    Raises ``SpotPatchError`` with ``APPLY_CONFLICT`` — HEAD moved, a git operation is in progress,
    a touched path changed since the job started (message names it, relative), the diff no longer
    applies, the result cannot be reproduced here, the journal cannot be written, or a path changed
    or failed to write while applying (undone) — in all of which nothing was changed;
    ``REPO_BLOCKED`` when ``root`` is no longer a repository top level; ``CHANGESET_REJECTED`` for
    an unsafe path; ``INVALID_STATE`` for an empty diff; ``INTERNAL`` when the record is
    inconsistent or a failed write could not be undone (the journal is then kept for the next start).
    """
    patch = diff.encode("utf-8", "surrogateescape")
    if not patch.strip():
        raise SpotPatchError(ErrorCode.INVALID_STATE, "the change is empty; nothing to apply")
    sections = parse_sections(patch)
    recorded = [p for p in baseline_hashes if safe_path(p)]  # must equal the diff's paths
    paths = paths_by_header(sections, recorded)
    job_id = job_id if job_id and valid_job_id(job_id) else "apply-" + secrets.token_hex(8)
    if paths is not None and result_hashes is not None:  # the usual case: everything in one worker thread
        state, current, done = await anyio.to_thread.run_sync(
            _apply_in_thread, root, paths, sections, baseline_hashes, result_hashes, expected_head, journal, job_id
        )
        if done is not None:
            writes, after = done
            return applied_record(diff, paths, baseline_hashes, after, job_id, writes)
    else:
        state, current = await anyio.to_thread.run_sync(_state_and_images, root, recorded)
    layout, recheck = await _finish_guard(root, state, expected_head, ErrorCode.APPLY_CONFLICT, "apply")
    checked: tuple[bool, str] | None = None  # git apply --check: (applies, why), once it ran
    if paths is None:  # a quoted or unexpected header: git names the paths
        applies, paths, why = await _git_check(root, patch, reverse=False, numstat=True)
        checked = (applies, why)
    posts = exact_posts(paths, sections, current, baseline_hashes, result_hashes)
    if checked is None and (result_hashes is None or None in posts.values()):
        applies, _, why = await _git_check(root, patch, reverse=False, numstat=False)
        checked = (applies, why)
    if checked is not None and not checked[0]:
        raise SpotPatchError(
            ErrorCode.APPLY_CONFLICT, f"not applied; the change no longer applies cleanly: {checked[1]}"
        )
    await _fill_from_objects(root, paths, sections, current, posts, result_hashes)
    unreproducible = [p for p in paths if posts[p] is None]
    if unreproducible:
        raise SpotPatchError(
            ErrorCode.APPLY_CONFLICT,
            f"not applied; the job's result for {list_paths(unreproducible)} cannot be reproduced in this working tree "
            "(its objects are gone or checkout attributes changed); nothing was changed, create the job again",
        )
    writes = apply_writes(root, paths, current, posts)  # type: ignore[arg-type]
    plan = WritePlan(job_id, "apply", expected_head, writes)
    after = await write_journalled(root, plan, journal or DiskJournal(layout.git_dir), ErrorCode.APPLY_CONFLICT,
                                   before=recheck)
    return applied_record(diff, paths, baseline_hashes, after, job_id, writes)


def _apply_in_thread(
    root: Path,
    paths: list[str],
    sections: list[FileSection],
    baseline_hashes: dict[str, str | None],
    result_hashes: dict[str, str | None],
    expected_head: str,
    journal: ChangeJournal | None,
    job_id: str,
) -> tuple[RepoState | None, dict[str, Image | str], tuple[list[PathWrite], dict[str, str | None]] | None]:
    """Apply without leaving the worker thread when no git process is needed: read HEAD, operation state and
    the pre-images, check, compute the post-images from the diff text, write through the journal. Returns
    ``(state, pre-images, (writes, post hashes))``, or ``(state, pre-images, None)`` when git must help (the
    caller continues with what was read). Raises like :func:`apply_change`."""
    state, current = _state_and_images(root, paths)
    recheck = _fast_guard(root, state, expected_head, ErrorCode.APPLY_CONFLICT, "apply")
    if recheck is None:
        return state, current, None
    assert state is not None
    posts = exact_posts(paths, sections, current, baseline_hashes, result_hashes)
    if None in posts.values():
        return state, current, None
    writes = apply_writes(root, paths, current, posts)  # type: ignore[arg-type]
    plan = WritePlan(job_id, "apply", expected_head, writes)
    after = write_journalled_sync(root, plan, journal or DiskJournal(state.layout.git_dir), ErrorCode.APPLY_CONFLICT,
                                  before=recheck)
    return state, current, (writes, after)


async def _fill_from_objects(
    root: Path,
    paths: list[str],
    sections: list[FileSection],
    current: dict[str, Image | str],
    posts: dict[str, Image | None],
    result_hashes: dict[str, str | None] | None,
) -> None:
    """Post-images the diff text could not give: the result blobs (one ``cat-file --batch``), through the
    checkout filters when the raw bytes differ from the result hash (one process per such file)."""
    missing = [(p, s) for p, s in zip(paths, sections, strict=True) if posts[p] is None and s.new_oid is not None]
    if not missing:
        return
    blobs = await raw_blobs(root, [s.new_oid for _, s in missing if s.new_oid])
    for path, section in missing:
        assert section.new_oid is not None
        expected = result_hashes[path] if result_hashes is not None else None
        data = blobs.get(section.new_oid)
        if data is None or expected is None or hashlib.sha256(data).hexdigest() != expected:
            data = await filtered_blob(root, section.new_oid, path)  # checkout filters (eol, ident, …)
        if data is not None and (expected is None or hashlib.sha256(data).hexdigest() == expected):
            pre = current[path]
            assert isinstance(pre, Image)
            posts[path] = Image(data, post_mode(section, pre))


# ---------------------------------------------------------------- revert


async def revert_change(
    root: Path, applied: AppliedChange, *, expected_head: str, journal: ChangeJournal | None = None
) -> None:
    """Undo ``applied`` in the working tree of ``root``: restore the bytes Apply replaced (docs/design.md §8).

    Requires HEAD == ``expected_head``, no git operation in progress, every touched path still at
    its post-apply hash, ``git apply --reverse --check`` passing, and restore images equal to the
    baseline hashes; then writes them through the crash journal (``journal``: default a
    :class:`~spotpatch_agent.worktree.journal.DiskJournal` named ``applied.job_id``). Index, HEAD and
    all other paths (staged, unstaged or untracked) are untouched.

    Raises ``SpotPatchError`` with ``REVERT_CONFLICT`` — HEAD moved, an operation is in progress, a
    touched path changed after apply (message names it, relative; "resolve by hand"), the reverse
    patch no longer applies, the revert would not restore the baseline hashes, or a path changed or
    failed to write while reverting (undone) — in all of which nothing was changed; ``REPO_BLOCKED``
    when ``root`` is no longer a repository top level; ``INTERNAL`` when the record is inconsistent
    or a failed write could not be undone (the journal is then kept for the next start).
    """
    paths = list(applied.paths)
    patch = applied.diff.encode("utf-8", "surrogateescape")
    if not paths or set(paths) != set(applied.post_hashes) or not all(safe_path(p) for p in paths):
        raise SpotPatchError(ErrorCode.INTERNAL, "the applied-change record is inconsistent")
    job_id = applied.job_id if valid_job_id(applied.job_id) else "revert-" + secrets.token_hex(8)
    if all(p in applied.baseline_images for p in paths):  # the usual case: everything in one worker thread
        state, current, done = await anyio.to_thread.run_sync(
            _revert_in_thread, root, applied, paths, expected_head, journal, job_id
        )
        if done:
            return
    else:
        state, current = await anyio.to_thread.run_sync(_state_and_images, root, paths)
    layout, recheck = await _finish_guard(root, state, expected_head, ErrorCode.REVERT_CONFLICT, "revert")
    check_post_images(paths, current, applied)
    if not all(p in applied.baseline_images for p in paths):
        # Without the replaced bytes the diff's old blobs are used: check that it reverses first. (With
        # them, every path holds its post-apply bytes and gets its baseline bytes back, which is exactly
        # what a clean `git apply --reverse` would produce.)
        applies, _, why = await _git_check(root, patch, reverse=True, numstat=False)
        if not applies:
            raise SpotPatchError(
                ErrorCode.REVERT_CONFLICT,
                f"not reverted; the change no longer reverses cleanly ({why}); resolve by hand",
            )
    targets = await _baseline_images(root, applied, paths)
    plan = revert_plan(root, paths, current, targets, applied, expected_head, job_id)
    await write_journalled(root, plan, journal or DiskJournal(layout.git_dir), ErrorCode.REVERT_CONFLICT,
                           before=recheck)


def _revert_in_thread(
    root: Path, applied: AppliedChange, paths: list[str], expected_head: str, journal: ChangeJournal | None, job_id: str
) -> tuple[RepoState | None, dict[str, Image | str], bool]:
    """Revert without leaving the worker thread when git need not answer the guard (the targets are the
    images Apply replaced). Returns ``(state, images, done)``; raises like :func:`revert_change`."""
    state, current = _state_and_images(root, paths)
    recheck = _fast_guard(root, state, expected_head, ErrorCode.REVERT_CONFLICT, "revert")
    if recheck is None:
        return state, current, False
    assert state is not None
    check_post_images(paths, current, applied)
    plan = revert_plan(root, paths, current, {p: applied.baseline_images[p] for p in paths}, applied, expected_head,
                        job_id)
    write_journalled_sync(root, plan, journal or DiskJournal(state.layout.git_dir), ErrorCode.REVERT_CONFLICT,
                          before=recheck)
    return state, current, True


async def _baseline_images(root: Path, applied: AppliedChange, paths: list[str]) -> dict[str, Image]:
    """What Revert writes: the images Apply replaced, else the diff's old blobs (filtered, default mode)."""
    images = {p: applied.baseline_images[p] for p in paths if p in applied.baseline_images}
    missing = [p for p in paths if p not in images]
    if missing:
        parsed = parse_sections(applied.diff.encode("utf-8", "surrogateescape"))
        sections = dict(zip(await _git_paths(root, applied.diff), parsed, strict=True))
        for path in missing:
            section = sections.get(path)
            if section is not None and section.has_index and section.old_oid is None:
                images[path] = ABSENT
            elif section is not None and section.old_oid is not None:
                data = await filtered_blob(root, section.old_oid, path)
                if data is not None:
                    images[path] = Image(data, new_file_mode(section.old_mode == "100755"))
    return images


async def _git_paths(root: Path, diff: str) -> list[str]:
    out = await run_git(["apply", "--numstat", "-z", "-"], cwd=root, input=diff.encode("utf-8", "surrogateescape"),
                        check=False, read_only=True)
    return _numstat_paths(out.stdout) if out.returncode == 0 else []
