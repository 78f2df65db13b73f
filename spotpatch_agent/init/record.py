"""What ``init`` changed, so ``init --undo`` removes exactly that (docs/adopt.md).

One JSON file per repository, ``<git common dir>/spotpatch/init.json`` (inside ``.git``: never committed,
never in a job's worktree, never offered to a model), keyed by the app's path relative to the git top level.
Per app: every file init touched with its bytes before init (base64, or null when init created it) and the
SHA-256 of what init left there; the ``node_modules`` entries the package manager added; whether init created
the repository. The record is saved before init's first write (``complete: false``) and completed after its
last, so an interrupted init can still be undone."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotpatch_agent.init.app import InitError
from spotpatch_agent.tools import _fs

RECORD_VERSION = 1


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temp file in the same folder (a crash leaves the old or the new bytes);
    an existing file's mode is kept."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        # Planning leaves such files alone (command.py): replacing a link would change what git tracks, and
        # writing through it could write outside the repository.
        raise InitError(f"{path.name} is not a regular file (a link or a folder): init does not write it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        mode = path.stat().st_mode & 0o777
    else:  # what a plain `open` would have made (mkstemp's own 0600 would hide the file from others)
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    _fs.write_atomic(path, data, mode=mode)


@dataclass
class AppRecord:
    """One app's entry. ``files`` maps a path (relative to the git top level, or absolute outside it: the
    user-level engine record) to ``{"before": base64 | None, "after": sha256 | None}``."""

    files: dict[str, dict[str, str | None]] = field(default_factory=dict)
    node_modules: list[str] = field(default_factory=list)
    created_repo: bool = False
    complete: bool = False
    #: The package manager that installed the plugin (undo removes it with the same one).
    package_manager: str | None = None

    @staticmethod
    def state(before: bytes | None, after: str | None) -> dict[str, str | None]:
        return {"before": None if before is None else base64.b64encode(before).decode("ascii"), "after": after}

    def remember(self, key: str, before: bytes | None) -> None:
        """The bytes before init, once: a later init run keeps the earlier pre-image (rebased on the user's
        later work by ``changeset.apply_changes``)."""
        if key not in self.files:
            self.files[key] = self.state(before, None)

    def before(self, key: str) -> bytes | None:
        value = self.files[key]["before"]
        try:
            return None if value is None else base64.b64decode(value, validate=True)
        except ValueError:
            raise InitError("The record of an earlier init (.git/spotpatch/init.json) is damaged: remove it and "
                            "undo by hand (git diff shows what changed).") from None


class Record:
    def __init__(self, file: Path) -> None:
        self.file = file
        self.apps: dict[str, AppRecord] = {}
        if file.is_file():
            try:
                raw: Any = json.loads(file.read_text(encoding="utf-8"))
                for name, entry in raw.get("apps", {}).items():
                    files = dict(entry.get("files", {}))
                    if not all(isinstance(k, str) and isinstance(v, dict)
                               and all(isinstance(v.get(f), str | None) for f in ("before", "after", "rebased"))
                               for k, v in files.items()):
                        raise TypeError("a file entry is not {before, after}")
                    if not all(isinstance(m, str) for m in entry.get("node_modules", [])) \
                            or entry.get("package_manager") not in (None, "npm", "pnpm", "yarn", "bun"):
                        raise TypeError("not a node_modules path or package manager init writes")
                    self.apps[name] = AppRecord(files=files,
                                                node_modules=list(entry.get("node_modules", [])),
                                                created_repo=bool(entry.get("created_repo")),
                                                complete=bool(entry.get("complete")),
                                                package_manager=entry.get("package_manager"))
            except (ValueError, AttributeError, TypeError, UnicodeDecodeError):
                raise InitError("The record of an earlier init (.git/spotpatch/init.json) is damaged: remove it and "
                                "undo by hand (git diff shows what changed).") from None

    def save(self) -> None:
        body = {"version": RECORD_VERSION, "apps": {
            name: {"files": a.files, "node_modules": a.node_modules, "created_repo": a.created_repo,
                   "complete": a.complete, "package_manager": a.package_manager} for name, a in self.apps.items()}}
        write_atomic(self.file, (json.dumps(body, indent=1) + "\n").encode("utf-8"))

    def drop(self, name: str) -> None:
        self.apps.pop(name, None)
        if self.apps:
            self.save()
        else:
            self.file.unlink(missing_ok=True)


def remove_node_module(path: Path) -> None:
    """A package folder the package manager added (a pnpm symlink, or a folder): gone."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
