"""What each repository-health reason is about, and its fix (docs/configuration.md "Repository health").

:func:`detail` turns a reason code and the project-relative paths behind it into a
``HealthDetail{reason, paths, morePaths, fix}``. Paths under a folder a template leaves untracked — a
Python virtualenv (``.venv/``, ``venv/``, any folder holding ``pyvenv.cfg``), ``node_modules/`` or a build
folder (``dist/``, ``build/``, ``.next/`` …), when git tracks nothing in it — are shown as that folder, and
the fix says to add it to ``.gitignore``. Every path is relative (git reports them so), redacted and cut; the
list holds at most :data:`MAX_PATHS` entries and counts the rest. :func:`health_message` is the one-line form for
errors.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.models import HealthDetail, Limits, RepoHealth

__all__ = ["MAX_PATHS", "MAX_ADVICE_FOLDERS", "LOCAL_CHANGES", "detail", "health_message", "template_folder",
           "wholly_untracked"]

#: Paths listed per detail; the rest are counted in ``morePaths``.
MAX_PATHS = 20
#: Template folders named one by one in a fix (the rest are counted), so a fix stays bounded.
MAX_ADVICE_FOLDERS = 3
#: The detail code of a ``consent-required`` tree (its ``reasons`` list is empty).
LOCAL_CHANGES = "local-changes"
_PATH_CHARS = 300

_VENV_NAMES = frozenset({".venv", "venv"})
_BUILD_NAMES = frozenset({"dist", "build", "out", ".next", ".nuxt", ".output", ".svelte-kit", ".vite", ".turbo",
                          ".parcel-cache", ".cache", "coverage", "__pycache__"})
_KIND_WORDS = {"venv": "a Python virtualenv", "node_modules": "installed Node packages", "build": "build output"}

_INCLUDE = ("include them in the job (\u201cInclude my local changes\u201d on the page, "
            "`spotpatch-agent run --include-local-changes` in a terminal)")

_FIXES = {
    "not-a-git-repository": "SpotPatch works on a git repository: run `git init` and make a first commit in the "
                            "project folder.",
    "not-top-level": "point SpotPatch at the repository's top-level folder (`git rev-parse --show-toplevel` "
                     "prints it), not a subfolder.",
    "head-unresolvable": "HEAD names no commit: make a first commit (`git add -A && git commit`) or check out an "
                         "existing branch.",
    "merge-in-progress": "finish the merge (`git commit`) or abort it (`git merge --abort`).",
    "rebase-in-progress": "finish the rebase (`git rebase --continue`) or abort it (`git rebase --abort`).",
    "am-in-progress": "finish `git am` (`git am --continue`) or abort it (`git am --abort`).",
    "cherry-pick-in-progress": "finish the cherry-pick (`git cherry-pick --continue`) or abort it "
                               "(`git cherry-pick --abort`).",
    "revert-in-progress": "finish the revert (`git revert --continue`) or abort it (`git revert --abort`).",
    "bisect-in-progress": "end the bisect session (`git bisect reset`).",
    "index-locked": "another git process is running or one crashed; remove it by hand once no git process "
                    "runs (SpotPatch never deletes it).",
    "conflicts": "resolve the conflicts, `git add` the files, and finish or abort the operation.",
    "untracked-symlink": "untracked symbolic links cannot be copied into a job's worktree: add them to "
                         ".gitignore, commit them, or remove them.",
    "untracked-not-regular": "a nested repository, FIFO, socket or device cannot be snapshotted: add it to "
                             ".gitignore or remove it (a nested repository can also become a submodule).",
    "local-symlink": "a changed path is a symbolic link, which a job cannot copy: commit or stash that change "
                     "(`git stash -u`).",
    "local-changes-over-limit": "commit or stash them (`git stash -u`), add generated folders to .gitignore, or "
                                "raise limits.localSnapshotMaxFiles / limits.localSnapshotMaxBytes in "
                                "spotpatch.config.json (docs/configuration.md).",
    LOCAL_CHANGES: f"commit or stash them (`git stash -u`), or {_INCLUDE}.",
}


def template_folder(root: Path, rel: str, cache: dict[str, bool] | None = None) -> tuple[str, str] | None:
    """``(folder/, kind)`` when ``rel`` lies in (or is) a virtualenv, ``node_modules`` or build folder, the
    outermost such folder first; ``kind`` is ``venv``, ``node_modules`` or ``build``. A folder is a
    virtualenv by name (``.venv``, ``venv``) or because it holds ``pyvenv.cfg`` (``cache`` remembers that
    look-up per folder)."""
    parts = [p for p in rel.split("/") if p]
    folders = parts if rel.endswith("/") else parts[:-1]
    cache = {} if cache is None else cache
    for i, name in enumerate(folders, start=1):
        folder = "/".join(parts[:i])
        if name in _VENV_NAMES:
            return folder + "/", "venv"
        if name == "node_modules":
            return folder + "/", "node_modules"
        if name in _BUILD_NAMES:
            return folder + "/", "build"
        if folder not in cache:
            cache[folder] = os.path.isfile(root / folder / "pyvenv.cfg")
        if cache[folder]:
            return folder + "/", "venv"
    return None


def _collapse(rel: str, folders: frozenset[str]) -> str:
    """``rel`` shown as the outermost entry of ``folders`` (git's untracked ``dir/`` entries) holding it."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        candidate = "/".join(parts[:i]) + "/"
        if candidate in folders:
            return candidate
    return rel


def wholly_untracked(folder: str, untracked_dirs: frozenset[str]) -> bool:
    """Whether ``folder`` (``dir/``) holds nothing git tracks: it or a parent is one of git's collapsed
    untracked folders (``git status --untracked-files=normal``)."""
    parts = folder.rstrip("/").split("/")
    return any("/".join(parts[:i]) + "/" in untracked_dirs for i in range(1, len(parts) + 1))


def detail(root: Path, reason: str, paths: Iterable[str] = (), *, untracked: Iterable[str] = (),
           untracked_dirs: Iterable[str] = (), limits: Limits | None = None,
           sizes: tuple[int, int] | None = None) -> HealthDetail:
    """The ``HealthDetail`` of ``reason`` about ``paths`` (relative POSIX, as git prints them).

    An ``untracked`` path inside a template folder that git tracks nothing in (:func:`wholly_untracked`
    by ``untracked_dirs``, git's collapsed untracked folders ``dir/``) becomes that folder, with the
    .gitignore advice; other paths inside one of ``untracked_dirs`` become it. ``sizes`` is
    ``(files, bytes)`` of the local changes, with ``limits``, for ``local-changes-over-limit``."""
    folders = frozenset(untracked_dirs)
    untracked_set = frozenset(untracked)
    shown: dict[str, None] = {}
    kinds: dict[str, str] = {}
    cache: dict[str, bool] = {}
    for rel in paths:
        found = template_folder(root, rel, cache) if rel in untracked_set else None
        if found is not None and wholly_untracked(found[0], folders):
            kinds[found[0]] = found[1]
            shown[found[0]] = None
        else:
            shown[_collapse(rel, folders)] = None
    listed = sorted(shown, key=lambda p: (p not in kinds, p))
    fix = _fix(reason, kinds, limits, sizes, others=len(shown) > len(kinds))
    if reason == "index-locked":
        fix = f"{listed[0] if listed else 'index.lock'} exists: {fix}"
    cut = [redact_cut(p, _PATH_CHARS) for p in listed[:MAX_PATHS]]
    return HealthDetail(reason=reason, paths=cut, more_paths=max(0, len(listed) - MAX_PATHS), fix=fix)


def _fix(reason: str, kinds: dict[str, str], limits: Limits | None, sizes: tuple[int, int] | None, *,
         others: bool) -> str:
    base = _FIXES.get(reason, "see docs/configuration.md \u201cRepository health\u201d.")
    if reason == "local-changes-over-limit" and limits is not None and sizes is not None:
        files, size = sizes
        base = (f"{files} changed or untracked files ({size} bytes), over the limit of "
                f"{limits.get('localSnapshotMaxFiles')} files or {limits.get('localSnapshotMaxBytes')} bytes: "
                + base)
    if not kinds:
        return base
    what = {"untracked-symlink": "an untracked folder with symlinks",
            "local-changes-over-limit": "an untracked folder with many files"}.get(reason, "an untracked folder")
    named = sorted(kinds.items())
    advice = " ".join(f"`{redact_cut(folder, _PATH_CHARS)}` is {what} ({_KIND_WORDS[kind]}): add it to .gitignore."
                      for folder, kind in named[:MAX_ADVICE_FOLDERS])
    if len(named) > MAX_ADVICE_FOLDERS:  # a monorepo's packages/*/node_modules: the fix stays one sentence or so
        rest = named[MAX_ADVICE_FOLDERS:]
        words = ", ".join(_KIND_WORDS[k] for k in sorted({kind for _, kind in rest}))
        advice += (f" So are {len(rest)} more folders ({words}): add them too (a line such as `node_modules/` "
                   "in .gitignore covers such folders at any depth).")
    if reason == "local-changes-over-limit" and sizes is not None:
        return f"{advice} {base}"  # the counts and limits stay visible
    return f"{advice} For the other paths: {base}" if others else advice


def health_message(health: RepoHealth) -> str:
    """The details of a blocked (or consent-required) ``health`` in one line for an error message:
    ``reason (path, path, +N more): fix; …`` — relative paths only."""
    parts = []
    for d in health.details:
        where = ", ".join(d.paths) + (f", +{d.more_paths} more" if d.more_paths else "")
        parts.append(f"{d.reason} ({where}): {d.fix}" if where else f"{d.reason}: {d.fix}")
    return "; ".join(parts) if parts else ", ".join(health.reasons)
