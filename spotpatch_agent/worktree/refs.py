"""HEAD and the repository layout read from the git directory, in process (no ``git`` process).

Apply, Revert and job start re-read the user's HEAD several times (docs/design.md §8); a ``git rev-parse``
costs a process (2-3 ms, more on a busy machine). :func:`read_repo_state` reads the same facts from the
files git itself reads — ``<root>/.git`` (a directory, or a ``gitdir:`` file for a linked worktree or a
separate git dir), the per-worktree ``HEAD``, ``commondir``, then the branch as a loose ref file under the
common dir or a line of ``packed-refs`` — and answers ``None`` ("ask git") on anything it does not fully
understand: a symlinked ``.git``, a symbolic ref chain, a ref outside ``refs/heads/``, a reftable or
unknown repository extension (``extensions.refStorage`` …), ``core.bare``/``core.worktree``, config
includes, a per-worktree config, a repository not owned by this user (git's ``safe.directory`` check),
Windows, an unreadable file. Callers then run git (:func:`~spotpatch_agent.worktree.repo.locate` /
:func:`~spotpatch_agent.worktree.repo.resolve_head`).

It is used only to *confirm* a HEAD already verified by git (the job's recorded commit): an answer that
differs from the expected commit is re-checked with git before anything refuses (:func:`head_is`), so a
commit-peeling subtlety (``HEAD^{commit}`` of a ref naming a tag) can never make a check fail wrongly,
and a reading equal to the expected commit means git reads the same files to the same commit. Nothing
here writes.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spotpatch_agent.worktree.repo import RepoLayout, resolve_head

__all__ = ["RepoState", "head_is", "read_git_dir", "read_repo_state"]

#: Extensions that change nothing about where HEAD and refs live.
_HARMLESS_EXTENSIONS = frozenset({"noop", "preciousobjects", "partialclone", "objectformat"})
_HEX = frozenset("0123456789abcdef")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


@dataclass(frozen=True)
class RepoState:
    """``layout`` of the working tree at a root and the commit id ``head`` names (``None``: unborn branch)."""

    layout: RepoLayout
    head: str | None


def read_repo_state(root: Path) -> RepoState | None:
    """The layout and HEAD of the working tree whose top level is ``root``, read from the git dir; ``None``
    when anything is unusual (see the module docstring) — then ask git. Blocking (file reads)."""
    if os.name == "nt" or not hasattr(os, "geteuid"):
        return None
    try:
        top = os.path.realpath(root)
        git_dir = read_git_dir(Path(top))
        if git_dir is None:
            return None
        common = _common_dir(git_dir)
        if common is None or not _owned(top, git_dir, common):
            return None
        oid_len = _config_oid_len(common)
        if oid_len is None:
            return None
        head = _read_head(git_dir, common, oid_len)
    except (OSError, ValueError, UnicodeError):
        return None
    if head is False:
        return None
    return RepoState(RepoLayout(Path(top), git_dir, common), head or None)


def read_git_dir(top: Path) -> Path | None:
    """The (real) git dir of the working tree at ``top``: ``top/.git`` when it is a directory, the target of a
    ``gitdir:`` file otherwise; ``None`` for a symlink, anything else, or a dir without ``HEAD``. Blocking."""
    dotgit = os.path.join(top, ".git")
    try:
        st = os.lstat(dotgit)
        if stat.S_ISDIR(st.st_mode):
            git_dir = dotgit
        elif stat.S_ISREG(st.st_mode) and st.st_size < 4096:
            with open(dotgit, "rb") as fh:
                text = fh.read().decode("utf-8")
            if not text.startswith("gitdir:") or text.count("\n") > 1:
                return None
            target = text[len("gitdir:"):].strip()
            if not target:
                return None
            git_dir = os.path.realpath(os.path.join(top, target))
        else:
            return None
        if not stat.S_ISREG(os.lstat(os.path.join(git_dir, "HEAD")).st_mode):
            return None
    except (OSError, UnicodeError):
        return None
    return Path(git_dir)


def _common_dir(git_dir: Path) -> Path | None:
    try:
        with open(git_dir / "commondir", "rb") as fh:
            text = fh.read().decode("utf-8").strip()
    except FileNotFoundError:
        common = git_dir
    else:
        if not text or "\n" in text:
            return None
        common = Path(os.path.realpath(os.path.join(git_dir, text)))
    if not (os.path.isdir(common / "objects") and os.path.isdir(common / "refs")):
        return None
    return common


def _owned(*paths: str | Path) -> bool:
    uid = os.geteuid()
    return all(os.stat(p).st_uid == uid for p in paths)


def _config_oid_len(common: Path) -> int | None:
    """Object id length (40 or 64) when the repository config is one this reader understands, else ``None``."""
    try:
        with open(common / "config", "rb") as fh:
            text = fh.read().decode("utf-8")
    except FileNotFoundError:
        return 40
    settings = parse_config(text)
    if settings is None:
        return None
    version = settings.get(("core", "repositoryformatversion"), "0")
    if version not in ("0", "1"):
        return None
    if any(section in ("include", "includeif") for section, _ in settings):
        return None
    bare = settings.get(("core", "bare"))
    if bare is not None and bare.lower() not in ("false", "no", "off", "0", ""):
        return None
    if ("core", "worktree") in settings:
        return None
    oid_len = 40
    for (section, key), value in settings.items():
        if section != "extensions":
            continue
        if key not in _HARMLESS_EXTENSIONS:
            return None  # refstorage (reftable), worktreeconfig, anything newer: ask git
        if key == "objectformat":
            fmt = value.lower()
            if fmt == "sha256" and version == "1":
                oid_len = 64
            elif fmt != "sha1":
                return None
    return oid_len


def parse_config(text: str) -> dict[tuple[str, str], str] | None:
    """``(section, key) → value`` of a git config file (section and key lower-cased, subsection dropped; the
    last value wins; a key without ``=`` is ``"true"``). ``None`` on syntax this parser does not handle
    (an unterminated section header, a line continuation, an escaped quote)."""
    settings: dict[tuple[str, str], str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("\\") or '\\"' in line:
            return None
        if line.startswith("["):
            end = line.find("]")
            if end < 0:
                return None
            header = line[1:end].strip()
            section = re.split(r'[\s."]', header, maxsplit=1)[0].lower()
            line = line[end + 1:].strip()
        if not line or line[0] in "#;":
            continue
        name, eq, value = line.partition("=")
        value = value.strip()
        if value.startswith('"'):
            value = value[1:value.find('"', 1)] if value.find('"', 1) > 0 else value[1:]
        else:
            value = re.split(r"\s*[#;]", value, maxsplit=1)[0].strip()
        settings[(section, name.strip().lower())] = value if eq else "true"
    return settings


def _valid_branch(ref: str) -> bool:
    if not ref.startswith("refs/heads/") or ref.endswith(("/", ".", ".lock")) or _BAD_REF_CHARS.search(ref):
        return False
    return all(part and not part.startswith(".") for part in ref.split("/")) and ".." not in ref and "@{" not in ref


def _oid(text: str, oid_len: int) -> str | None:
    text = text.rstrip("\n")
    return text if len(text) == oid_len and set(text) <= _HEX else None


def _read_head(git_dir: Path, common: Path, oid_len: int) -> str | Literal[False]:
    """HEAD's commit id; ``""`` for an unborn branch; ``False`` when only git can tell."""
    with open(git_dir / "HEAD", "rb") as fh:
        text = fh.read(4096).decode("utf-8")
    if not text.startswith("ref:"):
        return _oid(text, oid_len) or False
    ref = text[len("ref:"):].strip()
    if not _valid_branch(ref):
        return False  # refs/bisect/…, refs/worktree/…, anything odd: per-worktree or unusual
    path = common.joinpath(*ref.split("/"))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _packed(common, ref, oid_len)
    except NotADirectoryError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False  # a symlink, a directory …
    with open(path, "rb") as fh:
        loose = fh.read(4096).decode("utf-8")
    return _oid(loose, oid_len) or False  # "ref: …" (a chain) or garbage: ask git


def _packed(common: Path, ref: str, oid_len: int) -> str | Literal[False]:
    try:
        with open(common / "packed-refs", "rb") as fh:
            lines = fh.read().decode("utf-8").splitlines()
    except FileNotFoundError:
        return ""  # no such branch: unborn
    for line in lines:
        if not line or line[0] in "#^":
            continue
        oid, sep, name = line.partition(" ")
        if not sep or _oid(oid, oid_len) is None:
            return False
        if name == ref:
            return oid
    return ""


async def head_is(path: Path, expected: str) -> bool:
    """Whether HEAD of the working tree at ``path`` is the commit ``expected``: read in process when possible;
    any other answer is confirmed by ``git rev-parse`` (so it is never wrongly false). The in-process read is
    a few small-file reads, done on the event loop."""
    state = read_repo_state(path)
    if state is not None and state.head == expected:
        return True
    return await resolve_head(path) == expected
