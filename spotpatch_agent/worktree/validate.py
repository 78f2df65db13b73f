"""Changeset validation: the agent's whole change is checked before it is shown or applied (docs/design.md §8).

::

    validate_changeset(wt, limits) -> Changeset(diff, files, baseline_hashes, result_hashes)

The first violation raises ``JobFailure(CHANGESET_REJECTED)`` and fails the job whole; a bad file is never
dropped while the rest goes on. The steps, in order:

1. **Worktree state.** First, no file ``git add --all`` would store is over ``editableFileMaxBytes``
   unless it is a tracked file of unchanged size (:func:`~spotpatch_agent.worktree.scan.oversized_to_stage`:
   a check's big file never reaches the user's object store, issue 25). Then ``git add --all`` on the
   worktree's own index, then ``git diff --cached --raw -z
   --no-renames`` against the baseline commit. A worktree git cannot stage (for example a nested repository
   without a commit) is rejected; a file outside a sparse checkout's definition is named with the command
   that adds its directory.
2. **File count** ≤ ``maxChangedFiles``.
3. **Each path** (:func:`check_entry`, git's order): canonical relative POSIX form (``normalize_rel_path``
   leaves it unchanged: NFC, no control character, ``..``, ``:``, backslash …); no git metadata (a ``.git``
   segment, ``.gitmodules``); not protected for writing (docs/design.md §7); no gitlink (160000) and no symlink
   (120000) on either side; an added file is ``100644``, a modified file keeps its mode, a deleted file was
   ``100644`` (as ``apply_patch`` allows). Any ``old mode``/``new mode`` change is rejected, executable or not.
4. **Binary**: ``git diff --numstat`` shows ``-``.
5. **Ignored**: an added path git ignores (``check-ignore --no-index``, so a force-added path counts) is
   rejected. An ignored file that is merely written (build output, caches of a check) is never staged by
   ``git add --all``, so it never reaches the diff and is deleted with the worktree.
6. **Size**: every result blob ≤ ``editableFileMaxBytes`` (``cat-file --batch-check``, before any diff text
   is produced).
7. **Diff text** (:func:`~spotpatch_agent.worktree.result.result_diff`): ≤ ``maxDiffBytes`` bytes; its file
   list equals step 1.
8. **Re-parse**: the diff text is split into file sections whose headers must be exactly git's for the
   step-1 modes and blob ids; ``git apply --numstat`` of the text must give step 1's paths and +/- counts;
   ``git apply --reverse --check`` of the text must succeed on the worktree (its post-image is the worktree).
9. **Content**: each result file (working-tree form) is UTF-8 text (no NUL) within the size limit, the file
   on disk is a regular file whose ``hash-object`` equals the staged blob, a deleted path is absent; the
   baseline/result SHA-256 are recorded (same values as ``change_hashes``).
10. **Checkout form** (:mod:`~spotpatch_agent.worktree.checkout_form`): the working-tree form of every
    baseline and result blob is the blob itself, or it with every LF as CRLF; a ``.gitattributes`` change
    must leave the conversion attributes of the changed paths alone. Apply writes only bytes with the
    recorded result hash, so it writes exactly what the diff shows (or its CRLF form). Checked with step 9.

Renames and copies never exist here: every diff uses ``--no-renames``, so a moved file is a delete plus an
add and each half is validated on its own; a ``rename``/``copy``/``similarity`` header fails step 8.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from spotpatch_agent.errors import GitError, JobFailure
from spotpatch_agent.policy.paths import PathDenied, is_protected, is_text, normalize_rel_path
from spotpatch_agent.policy.redact import REDACTOR, redact_cut
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import FileStat, Limits
from spotpatch_agent.worktree.changes import NOT_REGULAR, file_hash
from spotpatch_agent.worktree.checkout_form import (
    changed_attributes,
    describe_conversion,
    form_difference,
    raw_blobs,
    sparse_outside,
)
from spotpatch_agent.worktree.git import CACHED_DIFF_SUBMODULES, describe, run_git
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.result import RawEntry, parse_raw, result_diff, stage_all
from spotpatch_agent.worktree.scan import oversized_to_stage, scan_in_thread

__all__ = ["Changeset", "DiffSource", "check_entry", "validate_changeset"]

#: Produces ``(diff, files)`` of a worktree; :func:`result_diff` in production (a test seam).
DiffSource = Callable[[Worktree], Awaitable[tuple[str, list[FileStat]]]]

_ZERO_OID = "0" * 40
_REGULAR = "100644"
_EXECUTABLE = "100755"
_SYMLINK = "120000"
_GITLINK = "160000"
_SHOWN_PATH_CHARS = 120
_SHOWN_GIT_CHARS = 200
_DIFF_OPTIONS = ("--cached", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", *CACHED_DIFF_SUBMODULES)
_AGENT_FAULT = "The agent's change (its edits or a check it ran) broke this rule; the whole change is discarded."
_ENGINE_FAULT = (
    "This is a SpotPatch consistency failure (or something changed the worktree during validation), "
    "not the model's; the whole change is discarded."
)


@dataclass(frozen=True)
class Changeset:
    """A validated change (docs/design.md §8).

    ``diff``: git's diff text against the baseline (``surrogateescape``-decoded bytes, see
    :func:`~spotpatch_agent.worktree.result.result_diff`). ``files``: one :class:`FileStat` per path, git's
    order. ``baseline_hashes`` / ``result_hashes``: path → SHA-256 hex of the file's working-tree bytes in the
    baseline / the result, ``None`` when absent; keys are exactly the paths of ``files``.
    """

    diff: str
    files: list[FileStat]
    baseline_hashes: dict[str, str | None]
    result_hashes: dict[str, str | None]


def _show(path: str) -> str:
    """``path`` for a message: relative as given, non-printable characters as ``?``, bounded."""
    text = "".join(ch if ch.isprintable() else "?" for ch in REDACTOR(path))
    if len(text) > _SHOWN_PATH_CHARS:
        text = text[: _SHOWN_PATH_CHARS - 1] + "…"
    return f"'{text}'"


def _brief(text: str) -> str:
    """git's (already sanitized) diagnostics, bounded for a job message."""
    return redact_cut(text, _SHOWN_GIT_CHARS)


def _rejected(path: str | None, reason: str) -> JobFailure:
    subject = f"{_show(path)} " if path is not None else ""
    return JobFailure(ErrorCode.CHANGESET_REJECTED, f"Changeset rejected: {subject}{reason}. {_AGENT_FAULT}")


def _inconsistent(detail: str) -> JobFailure:
    return JobFailure(
        ErrorCode.CHANGESET_REJECTED,
        f"Changeset rejected: the diff does not match the worktree ({detail}). {_ENGINE_FAULT}",
    )


# ---------------------------------------------------------------- entry point


async def validate_changeset(wt: Worktree, limits: Limits, *, diff_source: DiffSource = result_diff) -> Changeset:
    """Validate the agent's change in ``wt`` against its baseline and return it (docs/design.md §8).

    ``limits``: the job's limits (``maxChangedFiles``, ``maxDiffBytes``, ``editableFileMaxBytes`` in bytes).
    ``diff_source``: produces the diff text and file stats (a seam for tests; default :func:`result_diff`).
    Returns a :class:`Changeset` (empty when nothing changed: the caller decides whether that is an error).

    Raises ``JobFailure(CHANGESET_REJECTED)`` at the first violation (see the module docstring); the message
    names the offending relative path (never an absolute one), is bounded, and says whether the agent's change
    or an engine inconsistency is to blame. Raises :class:`~spotpatch_agent.errors.GitError` when git fails
    in a way no content explains.
    """
    entries = await _staged_entries(wt, limits.get("editableFileMaxBytes"))
    max_files = limits.get("maxChangedFiles")
    if len(entries) > max_files:
        raise _rejected(None, f"the change touches {len(entries)} files (limit maxChangedFiles = {max_files})")
    for entry in entries:
        check_entry(entry)
    if not entries:
        diff, files = await diff_source(wt)
        if diff or files:
            raise _inconsistent("the diff is not empty but no path changed")
        return Changeset("", [], {}, {})
    counts = await _numstat(wt)
    for entry in entries:
        if counts.get(entry.path, (0, 0)) is None:
            raise _rejected(entry.path, "is a binary file; only UTF-8 text files may change")
    await _check_not_ignored(wt, [e.path for e in entries if e.old_oid is None])
    max_bytes = limits.get("editableFileMaxBytes")
    await _check_blob_sizes(wt, entries, max_bytes)

    diff, files = await diff_source(wt)
    data = diff.encode("utf-8", "surrogateescape")
    max_diff = limits.get("maxDiffBytes")
    if len(data) > max_diff:
        raise _rejected(None, f"the diff is {len(data)} bytes (limit maxDiffBytes = {max_diff})")
    _compare_files(files, entries, counts)
    await _reparse(wt, data, entries, counts)
    baseline, result = await _hashes(wt, entries, max_bytes)
    return Changeset(diff, files, baseline, result)


# ---------------------------------------------------------------- 1. worktree state


async def _staged_entries(wt: Worktree, max_bytes: int) -> list[RawEntry]:
    # Before any git command: a repository or a special file inside the worktree (a check's, left because it
    # could not be removed) is never read by host git; `git add --all` would store an oversized file in the
    # user's object store (issue 25).
    found = await scan_in_thread(wt.path, max_file_bytes=max_bytes)
    if found.hazards:
        hazard = found.hazards[0]
        if hazard.path.rpartition("/")[2].casefold() == ".git":
            raise _rejected(hazard.path.rpartition("/")[0], "holds a git repository (.git): a submodule or a nested "
                            "repository cannot be part of a change, and git must not read it")
        raise _rejected(hazard.path, f"is {hazard.reason}; git must not read it")
    oversized = await oversized_to_stage(wt.path, max_file_bytes=max_bytes)
    if oversized is not None:
        raise _rejected(oversized[0], f"is {oversized[1]} bytes (limit editableFileMaxBytes = {max_bytes})")
    try:
        await stage_all(wt)
    except GitError as exc:
        if "sparse-checkout" in exc.message:
            await _check_sparse(wt)
        raise _rejected(None, f"git could not record the worktree's state ({_brief(exc.message)})") from None
    raw = await run_git(
        ["diff", *_DIFF_OPTIONS, "--raw", "-z", "--no-abbrev", wt.baseline_oid, "--"], cwd=wt.path, redact=[wt.path]
    )
    return parse_raw(raw.stdout)


async def _numstat(wt: Worktree) -> dict[str, tuple[int, int] | None]:
    out = await run_git(["diff", *_DIFF_OPTIONS, "--numstat", "-z", wt.baseline_oid, "--"], cwd=wt.path,
                        redact=[wt.path])
    return dict(_parse_numstat(out.stdout))


def _parse_numstat(raw: bytes) -> list[tuple[str, tuple[int, int] | None]]:
    """``--numstat -z`` records (no renames) → ``[(path, (added, removed) | None for binary)]``."""
    records: list[tuple[str, tuple[int, int] | None]] = []
    for field in raw.split(b"\0"):
        if not field:
            continue
        added, removed, path = field.decode("utf-8", "surrogateescape").split("\t", 2)
        counts = (int(added), int(removed)) if added.isdigit() and removed.isdigit() else None
        records.append((path, counts))
    return records


async def _check_sparse(wt: Worktree) -> None:
    """A sparse checkout refuses to stage a file created outside its definition: say so, and what to do."""
    sparse = await sparse_outside(wt)
    if sparse is None:
        return
    outside, cones = sparse
    subject = f"{_show(outside[0])} is" if outside else "a file the change creates is"
    where = ""
    if cones:
        shown = ", ".join(_show(c) for c in cones[:3]) + (", …" if len(cones) > 3 else "")
        where = f" (checked out: {shown} and the top-level files)"
    parent = outside[0].rsplit("/", 1)[0] if outside and "/" in outside[0] else "<directory>"
    raise JobFailure(
        ErrorCode.CHANGESET_REJECTED,
        f"Changeset rejected: {subject} outside this repository's sparse checkout{where}, where git cannot record "
        f"a file. To let SpotPatch change it, add its directory (git sparse-checkout add {_show(parent)[1:-1]}) "
        "and create the job again.",
    )


# ---------------------------------------------------------------- 3. paths and modes


def check_entry(entry: RawEntry) -> None:
    """Path and mode rules for one changed path (docs/design.md §7, §8); raises ``JobFailure(CHANGESET_REJECTED)``.

    Path: canonical relative POSIX (``normalize_rel_path`` returns it unchanged), no ``.git`` segment and no
    ``.gitmodules`` (git metadata, any case), not protected for writing. Modes: no gitlink (160000) or
    symlink (120000) on either side, nothing but 100644/100755 at all; added → 100644; modified → same mode;
    deleted → was 100644.
    """
    path = entry.path
    try:
        canonical = normalize_rel_path(path)
    except PathDenied:
        raise _rejected(path, "is not a plain relative path inside the project") from None
    if canonical != path:
        raise _rejected(path, "is not in canonical form (Unicode NFC)")
    if any(segment.casefold() in (".git", ".gitmodules") for segment in path.split("/")):
        raise _rejected(path, "is git metadata (.git, .gitmodules); the change may not touch it")
    if is_protected(path, for_write=True):
        raise _rejected(path, "is a protected path (docs/design.md §7)")
    present = [mode for mode, oid in ((entry.old_mode, entry.old_oid), (entry.new_mode, entry.new_oid)) if oid]
    if _GITLINK in present:
        raise _rejected(path, "is a submodule (gitlink, mode 160000); only regular files may change")
    if _SYMLINK in present:
        raise _rejected(path, "is a symbolic link (mode 120000); only regular files may change")
    if any(mode not in (_REGULAR, _EXECUTABLE) for mode in present):
        raise _rejected(path, "is not a regular file")
    if entry.old_oid is None and entry.new_mode != _REGULAR:
        raise _rejected(path, f"is a new file with mode {entry.new_mode}; new files must be 100644 (not executable)")
    if entry.new_oid is None and entry.old_mode != _REGULAR:
        raise _rejected(path, f"deletes a file of mode {entry.old_mode}; only 100644 files may be deleted")
    if entry.old_oid is not None and entry.new_oid is not None and entry.old_mode != entry.new_mode:
        what = "gains the executable bit" if entry.new_mode == _EXECUTABLE else "changes its file mode"
        raise _rejected(path, f"{what} ({entry.old_mode} -> {entry.new_mode}); file modes may not change")


# ---------------------------------------------------------------- 5, 6. ignored paths, blob sizes


def _nul_separated(paths: Sequence[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _c_quoted(path: str) -> bytes:
    """One ``--stdin-paths`` line: C-quoted, since git unquotes a line that starts with a double quote."""
    body = path.replace("\\", "\\\\").replace('"', '\\"').encode("utf-8", "surrogateescape")
    return b'"' + body + b'"\n'


async def _check_not_ignored(wt: Worktree, added: list[str]) -> None:
    if not added:
        return
    out = await run_git(
        ["check-ignore", "--no-index", "-z", "--stdin"],
        cwd=wt.path, input=_nul_separated(added), check=False, read_only=True, redact=[wt.path],
    )
    if out.returncode == 1:
        return
    if out.returncode != 0:
        why = _brief(describe(out, wt.path))
        raise _rejected(None, f"git could not check the added paths against the ignore rules ({why})")
    first = out.stdout.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    raise _rejected(first, "is ignored by git (.gitignore); an ignored file may not enter the change")


async def _check_blob_sizes(wt: Worktree, entries: list[RawEntry], max_bytes: int) -> None:
    present = [e for e in entries if e.new_oid is not None]
    if not present:
        return
    out = await run_git(
        ["cat-file", "--batch-check"],
        cwd=wt.path, input="".join(f"{e.new_oid}\n" for e in present).encode(), read_only=True, redact=[wt.path],
    )
    lines = out.stdout.decode("ascii", "replace").splitlines()
    if len(lines) != len(present):
        raise _inconsistent("git did not describe every result blob")
    for entry, line in zip(present, lines, strict=True):
        fields = line.split(" ")
        if len(fields) != 3 or fields[1] != "blob" or not fields[2].isdigit():
            raise _inconsistent(f"no result blob for {_show(entry.path)}")
        if int(fields[2]) > max_bytes:
            raise _rejected(entry.path, f"is {fields[2]} bytes (limit editableFileMaxBytes = {max_bytes})")


# ---------------------------------------------------------------- 7, 8. diff text and its re-parse


def _compare_files(files: list[FileStat], entries: list[RawEntry], counts: dict[str, tuple[int, int] | None]) -> None:
    if [f.path for f in files] != [e.path for e in entries]:
        raise _inconsistent("the diff's file list differs from the worktree's changed paths")
    for stat, entry in zip(files, entries, strict=True):
        if stat.status != entry.status or counts.get(stat.path) != (stat.added, stat.removed):
            raise _inconsistent(f"the stats of {_show(stat.path)} differ")


def _sections(text: str) -> list[list[str]]:
    """Header lines of each file section of a git diff: from ``diff --git`` up to ``---``/``@@``/binary."""
    sections: list[list[str]] = []
    in_header = False
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            sections.append([line])
            in_header = True
        elif not sections:
            if line:
                raise _inconsistent("the diff does not start with a file header")
        elif in_header:
            if line.startswith(("--- ", "@@", "GIT binary patch", "Binary files ")):
                in_header = False
            else:
                sections[-1].append(line)
    return sections


def _expected_header(entry: RawEntry) -> list[str]:
    old, new = entry.old_oid or _ZERO_OID, entry.new_oid or _ZERO_OID
    if entry.old_oid is None:
        return [f"new file mode {entry.new_mode}", f"index {old}..{new}"]
    if entry.new_oid is None:
        return [f"deleted file mode {entry.old_mode}", f"index {old}..{new}"]
    return [f"index {old}..{new} {entry.new_mode}"]


async def _reparse(
    wt: Worktree, data: bytes, entries: list[RawEntry], counts: dict[str, tuple[int, int] | None]
) -> None:
    sections = _sections(data.decode("utf-8", "surrogateescape"))
    if len(sections) != len(entries):
        raise _inconsistent(f"the diff has {len(sections)} file sections for {len(entries)} changed paths")
    parsed = await run_git(["apply", "--numstat", "-z", "-"], cwd=wt.path, input=data, check=False, read_only=True)
    if parsed.returncode != 0:
        raise _inconsistent(f"git cannot parse the diff: {_brief(describe(parsed, wt.path))}")
    records = _parse_numstat(parsed.stdout)
    if [path for path, _ in records] != [e.path for e in entries]:
        raise _inconsistent("the re-parsed diff names other paths than the worktree")
    for (path, stats), section, entry in zip(records, sections, entries, strict=True):
        if stats is None or stats != counts.get(path):
            raise _inconsistent(f"the re-parsed +/- counts of {_show(path)} differ")
        if section[1:] != _expected_header(entry):
            raise _inconsistent(f"the diff header of {_show(path)} does not match its modes and blobs")
    check = await run_git(
        ["apply", "--reverse", "--check", "--whitespace=nowarn", "-"], cwd=wt.path, input=data, check=False,
        read_only=True,
    )
    if check.returncode != 0:
        raise _inconsistent(f"the diff's result is not the worktree's content: {_brief(describe(check, wt.path))}")


# ---------------------------------------------------------------- 9. content and hashes


async def _blob_bytes(wt: Worktree, oid: str, path: str) -> bytes:
    """The blob in working-tree form (``cat-file --batch --filters``; object id and path on stdin)."""
    # One object per process: git 2.39 reports the unfiltered size in the header of a filtered object,
    # so the content is "everything after the header line, minus the final newline".
    line = f"{oid} {path}\n".encode("utf-8", "surrogateescape")
    out = await run_git(["cat-file", "--batch", "--filters"], cwd=wt.path, input=line, check=False, read_only=True,
                        redact=[wt.path])
    if out.returncode != 0:  # a checkout filter (or an encoding) failed on it
        attribute = await describe_conversion(wt, path, "other")
        raise JobFailure(
            ErrorCode.CHANGESET_REJECTED,
            f"Changeset rejected: git cannot produce the working-tree form of {_show(path)}: its checkout conversion "
            f"({_brief(attribute)}) failed ({_brief(describe(out, wt.path))}). Remove that attribute for the path "
            "or make the change by hand.",
        )
    header, _, content = out.stdout.partition(b"\n")
    if header.endswith(b" missing") or not content.endswith(b"\n"):
        raise _inconsistent(f"no readable blob for {_show(path)}")
    return content[:-1]


async def _hashes(
    wt: Worktree, entries: list[RawEntry], max_bytes: int
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    present = [e for e in entries if e.new_oid is not None]
    for entry in entries:
        on_disk = file_hash(wt.path, entry.path)
        if entry.new_oid is None and on_disk is not None:
            raise _inconsistent(f"{_show(entry.path)} is deleted in the diff but present in the worktree")
        if entry.new_oid is not None and (on_disk is None or on_disk == NOT_REGULAR):
            raise _inconsistent(f"{_show(entry.path)} is not a regular file in the worktree")
    if present:
        out = await run_git(
            ["hash-object", "--stdin-paths"],
            cwd=wt.path, input=b"".join(_c_quoted(e.path) for e in present), read_only=True, redact=[wt.path],
        )
        oids = out.stdout.decode("ascii", "replace").split()
        if oids != [e.new_oid for e in present]:
            raise _inconsistent("a worktree file differs from the staged result")
    await _check_attributes_kept(wt, entries)
    stored = await raw_blobs(wt, [oid for e in entries for oid in (e.old_oid, e.new_oid) if oid])
    baseline: dict[str, str | None] = {}
    result: dict[str, str | None] = {}
    for entry in entries:
        baseline[entry.path] = None
        if entry.old_oid is not None:
            content = await _blob_bytes(wt, entry.old_oid, entry.path)
            await _check_checkout_form(wt, entry.path, stored.get(entry.old_oid), content)
            baseline[entry.path] = hashlib.sha256(content).hexdigest()
        result[entry.path] = None
        if entry.new_oid is not None:
            content = await _blob_bytes(wt, entry.new_oid, entry.path)
            if len(content) > max_bytes:
                raise _rejected(entry.path, f"is {len(content)} bytes (limit editableFileMaxBytes = {max_bytes})")
            await _check_checkout_form(wt, entry.path, stored.get(entry.new_oid), content)
            if not is_text(content):
                raise _rejected(entry.path, "is not UTF-8 text (binary content or a NUL byte)")
            result[entry.path] = hashlib.sha256(content).hexdigest()
    return baseline, result


# ---------------------------------------------------------------- 10. checkout form = reviewed bytes


async def _check_checkout_form(wt: Worktree, path: str, stored: bytes | None, checkout: bytes) -> None:
    """The bytes Apply would write for ``path`` (``checkout``) are the blob the diff shows (``stored``), or that
    blob with every LF as CRLF (worktree/checkout_form.py); else rejected naming the attribute."""
    if stored is None:
        raise _inconsistent(f"no stored blob for {_show(path)}")
    difference = form_difference(stored, checkout)
    if difference != "other":
        return
    attribute = await describe_conversion(wt, path, difference)
    raise JobFailure(
        ErrorCode.CHANGESET_REJECTED,
        f"Changeset rejected: {_show(path)} would be written with other bytes than the diff shows: git's checkout "
        f"conversion for it ({_brief(attribute)}, from .gitattributes or git configuration) turns the reviewed "
        "text into different file content. SpotPatch cannot change such a file as reviewed; remove that "
        "attribute for the path or make the change by hand.",
    )


async def _check_attributes_kept(wt: Worktree, entries: list[RawEntry]) -> None:
    """A change to a ``.gitattributes`` file must not alter the conversion attributes of a path it changes."""
    if not any(e.path.rsplit("/", 1)[-1].casefold() == ".gitattributes" for e in entries):
        return
    changed = await changed_attributes(wt, [e.path for e in entries])
    if not changed:
        return
    path, (before, after) = next(iter(changed.items()))
    raise JobFailure(
        ErrorCode.CHANGESET_REJECTED,
        f"Changeset rejected: this change alters the checkout attributes of {_show(path)} ({_brief(before)} -> "
        f"{_brief(after)}, in .gitattributes) and changes that file too, so git would write it with other bytes "
        "than the diff shows and the change could never be applied as reviewed. Ask for the .gitattributes change "
        "in a job of its own, apply and commit it, then ask for the file.",
    )
