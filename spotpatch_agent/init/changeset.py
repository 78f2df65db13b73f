"""Making init's changes as one changeset (docs/adopt.md, "--dry-run and --undo"): the undo record first, then
the files, then the install; on any failure — an error, Ctrl-C, SIGTERM — the files this run wrote are put back
and the record is as it was before the run.

The record's promise is that ``--undo`` returns each file to the bytes it held before init, and never further
back than the user's own later work: a file that no longer holds what the last init left there (the user
changed it since) takes its current bytes as its new pre-image before this run touches it, and a file the
user edits while init runs is never overwritten by the rollback nor recorded as init's."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.init.app import InitError
from spotpatch_agent.init.record import AppRecord, Record, read_bytes, sha256, write_atomic


@dataclass
class Change:
    path: Path
    before: bytes | None
    after: bytes | None  # None: the file is removed
    why: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _put(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink(missing_ok=True)
    else:
        write_atomic(path, data)


def apply_changes(record: Record, key: str, top: Path, changes: list[Change], package_files: list[Path],
                  install: Callable[[], None] | None, *, created_repo: bool, module: str | None,
                  package_manager: str) -> list[str]:
    """Writes ``changes``, then runs ``install`` (which changes ``package_files``), recording it all under
    ``key``; returns the repository-relative paths whose bytes changed. Raises what failed, after the rollback."""
    previous = copy.deepcopy(record.apps.get(key))
    entry = record.apps.setdefault(key, AppRecord())
    entry.created_repo = entry.created_repo or created_repo
    entry.package_manager = package_manager

    def name(path: Path) -> str:
        return path.relative_to(top).as_posix()

    # The user's work since the last init becomes the pre-image: undo never goes behind it.
    for file_name, state in list(entry.files.items()):
        now = read_bytes(top / file_name) if not Path(file_name).is_absolute() else None
        if Path(file_name).is_absolute():
            del entry.files[file_name]  # a record from before the engine record became per user
        elif state["after"] is None or sha256(now) != state["after"]:
            # The user's bytes may hold init's earlier edit (the plugin in package.json): undo then removes the
            # plugin with the package manager instead of restoring bytes (undo.py).
            entry.files[file_name] = {**AppRecord.state(now, sha256(now)), "rebased": "yes"}
    start = {path: read_bytes(path) for path in [c.path for c in changes] + package_files}
    for path, data in start.items():
        entry.remember(name(path), data)
    for change in changes:
        entry.files[name(change.path)]["after"] = sha256(change.after)
        entry.files[name(change.path)].pop("rebased", None)  # this run writes it: the pre-image is today's
    for path in package_files:
        entry.files[name(path)]["after"] = None  # known once the install ends
    if module and module not in entry.node_modules:
        entry.node_modules.append(module)
    entry.complete = False
    record.save()

    written: list[Change] = []
    try:
        for change in changes:
            if read_bytes(change.path) != change.before:
                raise InitError(f"{name(change.path)} changed while init ran: run init again.")
            _put(change.path, change.after)
            written.append(change)
        if install is not None:
            install()
    except BaseException as exc:
        note = _roll_back(written, package_files, start, top)
        if previous is None:
            record.drop(key)
        else:
            record.apps[key] = previous
            record.save()
        if note:
            what = exc.message if isinstance(exc, InitError) else "interrupted" if isinstance(exc, KeyboardInterrupt) \
                else f"{type(exc).__name__}"
            raise InitError(f"{what.rstrip('.')}. {note}") from exc
        raise
    changed = set()
    for path in package_files:
        now = read_bytes(path)
        entry.files[name(path)]["after"] = sha256(now)
        if now != start[path]:
            changed.add(name(path))
    changed |= {name(c.path) for c in changes}
    entry.files = {k: v for k, v in entry.files.items() if v["before"] is not None or v["after"] is not None}
    entry.complete = True
    record.save()
    return sorted(changed)


def _roll_back(written: list[Change], package_files: list[Path], start: dict[Path, bytes | None], top: Path) -> str:
    """This run's files back to their bytes at its start: each file init wrote only while it still holds init's
    bytes (a user's edit made meanwhile stays), the package manager's files whatever it left. Every file is
    tried; returns a sentence naming those not restored, or ""."""
    failed: list[str] = []
    kept: list[str] = []
    for change in reversed(written):
        try:
            if read_bytes(change.path) == change.after:
                _put(change.path, change.before)
            else:
                kept.append(change.path.relative_to(top).as_posix())
        except OSError:
            failed.append(change.path.relative_to(top).as_posix())
    for path in package_files:
        try:
            if read_bytes(path) != start[path]:
                _put(path, start[path])
        except OSError:
            failed.append(path.relative_to(top).as_posix())
    parts = []
    if failed:
        parts.append("could not be restored: " + ", ".join(failed))
    if kept:
        parts.append("changed by someone else while init ran, left as they are: " + ", ".join(kept))
    return ("Some files " + "; ".join(parts) + ". Check them (git diff).") if parts else ""
