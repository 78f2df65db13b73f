"""Saved reviews: the changeset a user reviewed, kept so that Apply writes exactly it and Revert works after the
engine exited (issue 25; docs/security.md §7).

Layout: ``<git-common-dir>/spotpatch/reviews/<jobId>.json``, never in the working tree. One record per job::

    {"format": "spotpatch-review/1", "jobId", "head", "diff", "diffSha256", "paths",
     "baselineHashes": {path: sha256 | null}, "resultHashes": {path: sha256 | null},
     "state": "review" | "applied" | "reverted",
     "applied": null | {"postHashes": {…}, "baselineImages": {path: {"data": base64 | null, "mode": int | null}},
                        "createdDirs": {path: int}},
     "recordSha256"}

``diffSha256`` is the SHA-256 of the diff's bytes (what ``run`` prints and ``apply --sha256`` compares);
``resultHashes`` pin the bytes Apply writes (``worktree.changes.apply_change`` verifies every post-image
against them before the first write), so the diff text plus the record *is* the reviewed changeset.
``recordSha256`` is the SHA-256 of the record's canonical JSON without itself: a record edited after it was
saved is refused. ``applied`` holds what Revert needs (the bytes Apply replaced).

Every file here is opened relative to a directory descriptor, never through a symlink: ``spotpatch`` and
``reviews`` are opened ``O_DIRECTORY|O_NOFOLLOW`` (made ``0700`` when missing), a record is written to a new
temp file (``O_CREAT|O_EXCL|O_NOFOLLOW``, ``0600``) and renamed over the old one, and read only
when it is a regular file of at most :data:`MAX_REVIEW_BYTES`. A symlink on the way is refused, never
followed. Errors are :class:`~spotpatch_agent.errors.SpotPatchError` with relative messages.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.dirfd import DIR_FD, NONBLOCK, READ_FLAGS, TMP_FLAGS, write_fully
from spotpatch_agent.worktree.gitdir_files import UnsafeGitDirEntry, folder
from spotpatch_agent.worktree.images import Image, safe_path

__all__ = ["MAX_REVIEW_BYTES", "REVIEW_SUBDIR", "SavedReview", "diff_sha256", "load_review", "save_review"]

#: The records' directory under a git common dir.
REVIEW_SUBDIR = ("spotpatch", "reviews")
FORMAT = "spotpatch-review/1"
#: Largest record read back: a diff and the replaced images of at most ``maxChangedFiles`` files, base64.
MAX_REVIEW_BYTES = 256 * 1024 * 1024
#: Records kept: after a save, the oldest beyond this many are removed (a record that old is refused as unknown).
KEEP_REVIEWS = 200
_JOB_ID = re.compile(r"^job_[0-9a-f]{16}$")
_RECORD = re.compile(r"^job_[0-9a-f]{16}\.json$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
ReviewState = Literal["review", "applied", "reverted"]
#: Shown in messages: the directory as a user finds it in a usual repository.
SHOWN_DIR = ".git/spotpatch/reviews"


def diff_sha256(diff: str) -> str:
    """The SHA-256 hex of a diff's bytes (its text is ``surrogateescape``-decoded bytes)."""
    return hashlib.sha256(diff.encode("utf-8", "surrogateescape")).hexdigest()


def valid_job_id(job_id: str) -> bool:
    return bool(_JOB_ID.match(job_id))


@dataclass
class SavedReview:
    """One reviewed changeset (see the module docstring) and, once applied, what Revert needs."""

    job_id: str
    head: str
    diff: str
    paths: list[str]
    baseline_hashes: dict[str, str | None]
    result_hashes: dict[str, str | None]
    state: ReviewState = "review"
    post_hashes: dict[str, str | None] = field(default_factory=dict)
    baseline_images: dict[str, Image] = field(default_factory=dict, repr=False)
    created_dirs: dict[str, int] = field(default_factory=dict)

    @property
    def diff_sha256(self) -> str:
        return diff_sha256(self.diff)

    def to_json(self) -> dict[str, Any]:
        applied = None
        if self.state != "review":
            applied = {"postHashes": self.post_hashes, "createdDirs": self.created_dirs,
                       "baselineImages": {p: _image_json(i) for p, i in self.baseline_images.items()}}
        body = {"format": FORMAT, "jobId": self.job_id, "head": self.head, "diff": self.diff,
                "diffSha256": self.diff_sha256, "paths": self.paths, "baselineHashes": self.baseline_hashes,
                "resultHashes": self.result_hashes, "state": self.state, "applied": applied}
        return {**body, "recordSha256": _canonical_sha(body)}

    @classmethod
    def from_json(cls, raw: Any, job_id: str) -> SavedReview:
        """The record in ``raw`` (parsed JSON) for ``job_id``; raises ``CHANGESET_REJECTED`` when it is not one
        this engine wrote or was changed after it was saved."""
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise _tampered(job_id, "it is not a SpotPatch review record")
        body = {k: v for k, v in raw.items() if k != "recordSha256"}
        if raw.get("recordSha256") != _canonical_sha(body):
            raise _tampered(job_id, "its hash does not match its content")
        try:
            review = cls._parse(raw)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _tampered(job_id, "it is malformed") from None
        if review.job_id != job_id or review.diff_sha256 != raw.get("diffSha256"):
            raise _tampered(job_id, "its diff does not match its diffSha256")
        return review

    @classmethod
    def _parse(cls, raw: dict[str, Any]) -> SavedReview:
        paths = [str(p) for p in raw["paths"]]
        baseline, result = _hashes(raw["baselineHashes"]), _hashes(raw["resultHashes"])
        if not paths or not all(safe_path(p) for p in paths) or set(paths) != set(baseline) \
                or set(paths) != set(result) or raw["state"] not in ("review", "applied", "reverted") \
                or not isinstance(raw["diff"], str) or not re.fullmatch(r"[0-9a-f]{40,64}", raw["head"]):
            raise ValueError("malformed")
        review = cls(job_id=str(raw["jobId"]), head=raw["head"], diff=raw["diff"], paths=paths,
                     baseline_hashes=baseline, result_hashes=result, state=raw["state"])
        applied = raw["applied"]
        if review.state != "review":
            review.post_hashes = _hashes(applied["postHashes"])
            review.created_dirs = {str(p): int(n) for p, n in applied["createdDirs"].items()}
            review.baseline_images = {str(p): _image(i) for p, i in applied["baselineImages"].items()}
            if set(review.post_hashes) != set(paths) or not set(review.baseline_images) <= set(paths):
                raise ValueError("malformed")
        return review


def _image_json(image: Image) -> dict[str, Any]:
    data = None if image.data is None else base64.b64encode(image.data).decode("ascii")
    return {"data": data, "mode": image.mode}


def _image(raw: dict[str, Any]) -> Image:
    if raw["data"] is None:
        return Image(None)
    mode = raw["mode"]
    if not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError("mode")
    return Image(base64.b64decode(raw["data"], validate=True), mode)


def _hashes(raw: Any) -> dict[str, str | None]:
    if not isinstance(raw, dict) or not all(v is None or (isinstance(v, str) and _SHA.match(v)) for v in raw.values()):
        raise ValueError("hashes")
    return {str(k): v for k, v in raw.items()}


def _canonical_sha(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _tampered(job_id: str, why: str) -> SpotPatchError:
    return SpotPatchError(ErrorCode.CHANGESET_REJECTED,
                          f"the saved review of {job_id} was refused: {why} (it was changed after it was saved, "
                          "or not written by SpotPatch); nothing was changed")


# ---------------------------------------------------------------- files, never through a symlink


def _open_dir(common_dir: Path, *, create: bool) -> int | None:
    """A descriptor of ``<common_dir>/spotpatch/reviews`` (:func:`~spotpatch_agent.worktree.gitdir_files.folder`:
    each part ``O_NOFOLLOW``, made 0700 with ``create``), ``None`` when missing. The caller closes it. Raises
    ``CHANGESET_REJECTED`` for a symlink or non-directory on the way."""
    if not DIR_FD:
        raise SpotPatchError(ErrorCode.INTERNAL, "saved reviews need directory descriptors (POSIX)")
    try:
        with folder(common_dir, REVIEW_SUBDIR, create=create) as opened:
            assert opened.fd is not None
            return os.dup(opened.fd)
    except FileNotFoundError:
        if create:
            raise
        return None
    except UnsafeGitDirEntry as exc:
        raise SpotPatchError(ErrorCode.CHANGESET_REJECTED,
                             f".git/{exc.shown} is a symlink or not a directory: refused (remove it)") from None


def _prune(directory: int, keep: int) -> None:
    """Remove the oldest records (by modification time) beyond ``keep``; never raises."""
    try:
        with os.scandir(directory) as entries:
            found = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in entries if _RECORD.match(e.name)]
        for _, name in sorted(found)[: max(0, len(found) - keep)]:
            os.unlink(name, dir_fd=directory)
    except OSError:
        pass


def save_review(common_dir: Path, review: SavedReview, *, keep: int = KEEP_REVIEWS) -> None:
    """Write ``review`` atomically (a new temp file renamed over the record), then keep the newest ``keep``
    records. Not ``fsync``-ed (it would double an Apply's cost): a kill leaves the old or the new record; after a
    power loss a missing or torn one is refused (``JOB_NOT_FOUND``, or its hash), never acted on.
    Raises ``SpotPatchError`` (``CHANGESET_REJECTED`` for a symlinked directory, ``INTERNAL`` for an OS error)."""
    if not valid_job_id(review.job_id):
        raise SpotPatchError(ErrorCode.INTERNAL, "not a job id")
    data = json.dumps(review.to_json(), ensure_ascii=True, separators=(",", ":")).encode("ascii")
    try:
        directory = _open_dir(common_dir, create=True)
        assert directory is not None
        try:
            tmp = f".{review.job_id}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, TMP_FLAGS, 0o600, dir_fd=directory)
            try:
                try:
                    write_fully(fd, data)
                finally:
                    os.close(fd)
                os.rename(tmp, f"{review.job_id}.json", src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=directory)
                except OSError:
                    pass
                raise
            _prune(directory, keep)
        finally:
            os.close(directory)
    except OSError as exc:
        raise SpotPatchError(ErrorCode.INTERNAL, f"the review record could not be saved in {SHOWN_DIR} "
                                                 f"({exc.strerror or type(exc).__name__})") from None


def load_review(common_dir: Path, job_id: str) -> SavedReview:
    """The saved review of ``job_id``. Raises ``JOB_NOT_FOUND`` when there is none, ``CHANGESET_REJECTED``
    when it is a symlink, not a regular file, too large, or not intact (:meth:`SavedReview.from_json`)."""
    if not valid_job_id(job_id):
        raise SpotPatchError(ErrorCode.JOB_NOT_FOUND, "a job id looks like job_ and 16 hex digits")
    missing = SpotPatchError(ErrorCode.JOB_NOT_FOUND, f"no saved review for {job_id} in {SHOWN_DIR}")
    try:
        directory = _open_dir(common_dir, create=False)
        if directory is None:
            raise missing
        try:
            try:
                fd = os.open(f"{job_id}.json", READ_FLAGS | NONBLOCK, dir_fd=directory)
            except FileNotFoundError:
                raise missing from None
        finally:
            os.close(directory)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_REVIEW_BYTES:
                raise _tampered(job_id, "it is not a regular file of a sane size")
            raw = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise _tampered(job_id, "it is a symlink") from None
        raise SpotPatchError(ErrorCode.INTERNAL, f"the saved review of {job_id} cannot be read "
                                                 f"({exc.strerror or type(exc).__name__})") from None
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        raise _tampered(job_id, "it is not JSON") from None
    return SavedReview.from_json(parsed, job_id)
