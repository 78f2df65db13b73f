"""The bytes Apply writes are the bytes the review shows: checkout conversions are checked in validation.

The diff shows git's stored form of each file (its blobs). Apply writes the *checkout form*: what git's
checkout would put in a working tree for that path — the blob after a ``filter`` driver's smudge,
``ident`` expansion, ``working-tree-encoding`` re-encoding and end-of-line conversion (``text``/``eol``/
``crlf`` attributes, ``core.autocrlf``/``core.eol``). Those come from attribute files (``.gitattributes``
in the tree, ``$GIT_COMMON_DIR/info/attributes``, ``core.attributesFile``) and from git configuration
(system, global, the repository's own), none of which the review shows. Changeset validation therefore
compares both forms of every changed path's baseline and result blob and accepts exactly two cases
(:func:`form_difference`):

* ``same``: the checkout form is the blob, byte for byte;
* ``crlf``: the blob holds no CR and the checkout form is the blob with every LF written as CRLF (the
  user's own line-ending setting, e.g. ``core.autocrlf=true`` on Windows, applied to the reviewed text and
  to nothing else) — and the change does not alter that path's conversion attributes.

Anything else fails the job with ``CHANGESET_REJECTED`` naming the path and the attribute or setting
(:func:`describe_conversion`). Since Apply writes only bytes whose SHA-256 equals the validated result
hash (worktree/changes.py), no configuration can make it write other bytes than these.

A change that alters the conversion attributes of a path it also changes (a ``.gitattributes`` rule plus a
file the rule covers) is rejected too (:func:`changed_attributes`): the stored form and the checkout form
would then depend on which ``.gitattributes`` applies, the job's or the user's, and the job could never be
applied as reviewed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from spotpatch_agent.worktree.git import parse_cat_file_batch, run_git
from spotpatch_agent.worktree.placement import Worktree

__all__ = [
    "CONVERSION_ATTRIBUTES",
    "changed_attributes",
    "conversion_attributes",
    "describe_conversion",
    "form_difference",
    "raw_blobs",
    "sparse_outside",
]

#: The attributes that make a path's checkout form differ from its blob (gitattributes(5), "Checking-out
#: and checking-in"); ``crlf`` is the legacy spelling of ``text``.
CONVERSION_ATTRIBUTES = ("filter", "ident", "working-tree-encoding", "eol", "text", "crlf")
_EOL_CONFIG = ("core.autocrlf", "core.eol")


def form_difference(blob: bytes, checkout: bytes) -> str:
    """``same`` (identical bytes), ``crlf`` (``blob`` has no CR and ``checkout`` is it with every LF as
    CRLF) or ``other``."""
    if checkout == blob:
        return "same"
    if b"\r" not in blob and checkout == blob.replace(b"\n", b"\r\n"):
        return "crlf"
    return "other"


async def raw_blobs(wt: Worktree, oids: Sequence[str]) -> dict[str, bytes]:
    """Stored bytes of each blob of ``oids`` (one ``git cat-file --batch``; no filter runs); missing ones omitted."""
    wanted = sorted(set(oids))
    if not wanted:
        return {}
    out = await run_git(["cat-file", "--batch"], cwd=wt.path, input="".join(f"{o}\n" for o in wanted).encode(),
                        read_only=True, redact=[wt.path])
    return parse_cat_file_batch(out.stdout)


async def conversion_attributes(
    wt: Worktree, paths: Sequence[str], *, tree: str | None = None
) -> dict[str, dict[str, str]]:
    """path → {attribute: value} of :data:`CONVERSION_ATTRIBUTES` that are not ``unspecified``.

    ``tree`` ``None``: the ``.gitattributes`` files of the worktree's index (``check-attr --cached``; after
    staging, the result). Else those of commit/tree ``tree`` (read into a temporary index). Both also read
    ``info/attributes`` and ``core.attributesFile``. Values as git prints them (``set``, ``unset``, a string).
    """
    if not paths:
        return {}
    data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
    args = ["check-attr", "--cached", "-z", "--stdin", *CONVERSION_ATTRIBUTES]
    if tree is None:
        out = await run_git(args, cwd=wt.path, input=data, read_only=True, redact=[wt.path])
    else:
        with tempfile.TemporaryDirectory(prefix="spotpatch-attr-") as tmp:
            index = Path(tmp) / "index"
            # GIT_INDEX_FILE, not --index-output: git writes <index>.lock beside it and renames it in place,
            # so the temporary directory may be on another file system than the worktree's index.
            await run_git(["read-tree", tree], cwd=wt.path, redact=[wt.path, Path(tmp)], index_file=index)
            out = await run_git(args, cwd=wt.path, input=data, read_only=True, redact=[wt.path, Path(tmp)],
                                index_file=index)
    fields = out.stdout.split(b"\0")
    found: dict[str, dict[str, str]] = {p: {} for p in paths}
    for i in range(0, len(fields) - 2, 3):
        path, attr, value = (f.decode("utf-8", "surrogateescape") for f in fields[i : i + 3])
        if value != "unspecified" and path in found:
            found[path][attr] = value
    return found


async def changed_attributes(wt: Worktree, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """path → (baseline, result) description of its conversion attributes, for each of ``paths`` whose
    conversion attributes differ between the baseline commit and the staged result; ``{}`` otherwise."""
    before = await conversion_attributes(wt, paths, tree=wt.baseline_oid)
    after = await conversion_attributes(wt, paths)
    return {p: (_spell(before[p]), _spell(after[p])) for p in paths if before[p] != after[p]}


async def describe_conversion(wt: Worktree, path: str, difference: str) -> str:
    """The attributes and settings that convert ``path`` at checkout, as ``filter=lfs``, ``ident``,
    ``eol=crlf``, ``core.autocrlf=true`` …, most specific first; a generic phrase when none is found."""
    attrs = (await conversion_attributes(wt, [path]))[path]
    named = [_one(attr, attrs[attr]) for attr in ("filter", "working-tree-encoding", "ident") if _active(attrs, attr)]
    eol = [_one(attr, attrs[attr]) for attr in ("eol", "text", "crlf") if attr in attrs]
    out = await run_git(["config", "-z", "--get-regexp", r"^core\.(autocrlf|eol)$"], cwd=wt.path, check=False,
                        read_only=True, redact=[wt.path])
    for record in out.stdout.split(b"\0"):
        key, _, value = record.decode("utf-8", "replace").partition("\n")
        if key in _EOL_CONFIG and value:
            eol.append(f"{key}={value}")
    if difference == "crlf" or not named:
        named += eol
    return ", ".join(named) if named else "a checkout conversion of git"


async def sparse_outside(wt: Worktree) -> tuple[list[str], list[str]] | None:
    """After ``git add --all`` failed: ``(untracked paths it left, cone directories)`` when the worktree is a
    sparse checkout (git refuses to stage a path outside the sparse-checkout definition), else ``None``. The
    directories are listed in cone mode only (empty otherwise)."""
    flag = await run_git(["config", "--bool", "core.sparseCheckout"], cwd=wt.path, check=False, read_only=True)
    if flag.stdout.strip() != b"true":
        return None
    left = await run_git(["ls-files", "--others", "--exclude-standard", "-z"], cwd=wt.path, check=False,
                         read_only=True)
    paths = [p.decode("utf-8", "surrogateescape") for p in left.stdout.split(b"\0") if p]
    cone = await run_git(["config", "--bool", "core.sparseCheckoutCone"], cwd=wt.path, check=False, read_only=True)
    if cone.stdout.strip() != b"true":
        return paths, []  # pattern mode: the patterns are no list of directories
    cones = await run_git(["sparse-checkout", "list"], cwd=wt.path, check=False, read_only=True)
    dirs = cones.stdout.decode("utf-8", "surrogateescape").splitlines() if cones.returncode == 0 else []
    return paths, [d for d in dirs if d]


def _active(attrs: dict[str, str], attr: str) -> bool:
    return attr in attrs and attrs[attr] != "unset"


def _one(attr: str, value: str) -> str:
    if value == "set":
        return attr
    if value == "unset":
        return "-" + attr
    return f"{attr}={value}"


def _spell(attrs: dict[str, str]) -> str:
    return " ".join(_one(a, attrs[a]) for a in CONVERSION_ATTRIBUTES if a in attrs) or "none"
