"""One detached git worktree per job, its baseline commit, its result diff, and its removal (docs/design.md §8).

Lifecycle::

    create_worktree(root, job_id)     health → record HEAD → worktree add --detach (or the warm pool) →
                                      marker → re-verify HEAD → [include-local-changes: health again,
                                      snapshot.py] → baseline commit
    result_diff(wt)                   git add --all (the worktree's own index) → diff vs baseline
    remove_worktree(root, wt)         worktree remove --force → delete leftovers; never raises
    sweep_orphans(root)               start-up: remove every worktree carrying our marker

Placement: ``<root>/node_modules/.spotpatch/job-*`` when ``node_modules`` is a real directory (not a
symlink) that git ignores — so checks resolve the installed packages and the user's ``git status``
never shows the worktree — else ``<tempdir>/spotpatch-worktrees/job-*``. Ownership marker: a file
:data:`MARKER_NAME` in the worktree's private git directory (``<common-dir>/worktrees/<id>/``),
never among the working files. Because a kill can fall between ``git worktree add`` and that marker,
ownership is knowable earlier too: before the job directory exists a sidecar ``<base>/<name>.owner``
(our process id) is created beside it in our own base directory, so :func:`sweep_orphans` recognises an
unmarked registration whose directory is ``<base>/job-<random>`` with a dead-owner sidecar as ours.
Nothing here writes the user's index, HEAD or branches; the only
writes to the user's repository are git's own worktree registration and the baseline objects.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from spotpatch_agent.errors import GitError, SpotPatchError
from spotpatch_agent.process import kill_processes_inside
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import FileStat, Limits, RepoHealth
from spotpatch_agent.worktree.git import run_git, sanitize
from spotpatch_agent.worktree.health import blocked_message, health_message, repo_health
from spotpatch_agent.worktree.refs import head_is, read_git_dir
from spotpatch_agent.worktree.repo import locate, resolve_head, same_path

if TYPE_CHECKING:
    from spotpatch_agent.worktree.pool import WorktreePool

__all__ = [
    "Worktree",
    "create_worktree",
    "result_diff",
    "remove_worktree",
    "sweep_orphans",
    "drop_worktree",
    "empty_trash",
    "is_parked",
    "MARKER_NAME",
    "BASELINE_IDENTITY",
]

log = logging.getLogger("spotpatch.worktree")

#: Name of the ownership marker inside a worktree's private git directory.
MARKER_NAME = "spotpatch-owner.json"
#: ``<MARKER_NAME><CLAIM_INFIX><pid>-<hex>``: a parked marker being taken over by process ``pid`` (pool.py).
CLAIM_INFIX = ".claim-"
#: ``-c`` options of the baseline commit: a fixed identity, no signing (never the user's identity), and no
#: auto-maintenance — ``git commit`` otherwise runs ``gc --auto`` on the shared repository, which packs the
#: user's refs, expires their reflogs and prunes their stale worktree registrations.
BASELINE_IDENTITY = (
    "-c", "user.name=SpotPatch",
    "-c", "user.email=spotpatch@localhost",
    "-c", "commit.gpgsign=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)
_CLEANUP_TIMEOUT = 60.0
#: How many times the sweep stops leftover processes in an orphan and removes it before it gives up.
_SWEEP_ATTEMPTS = 3
_ZERO_OID = "0" * 40


@dataclass
class Worktree:
    """A job's isolated worktree.

    ``path``: absolute directory of the worktree (never shown to clients). ``head_oid``: the user's
    HEAD when the job started. ``baseline_oid``: the detached baseline commit inside the worktree —
    the agent's result is diffed against it. ``admin_dir``: the worktree's private git directory
    (holds the marker), ``None`` if unknown.
    """

    path: Path
    head_oid: str
    baseline_oid: str
    job_id: str
    admin_dir: Path | None = None


# ---------------------------------------------------------------- create


async def create_worktree(
    root: Path, job_id: str, *, limits: Limits | None = None, include_local_changes: bool = False,
    pool: WorktreePool | None = None, health: RepoHealth | None = None,
) -> Worktree:
    """Create the job's detached worktree at the user's HEAD and commit its baseline (docs/design.md §8).

    ``root`` must be the repository's top level. Without ``include_local_changes`` (require-clean)
    the user's working tree must have no staged, unstaged or untracked changes. With it (the user
    gave ``localChangesConsent``), a dirty but healthy tree is copied into the worktree by
    :func:`~spotpatch_agent.worktree.snapshot.include_local_changes` — ``git diff-index --binary
    HEAD`` applied, bounded regular untracked files copied, then HEAD, diff, path set and digests
    re-verified — before the baseline commit, so the result diff holds only the agent's increment.

    Raises ``SpotPatchError(REPO_BLOCKED)`` when health is blocked, or HEAD or the local changes
    moved while the worktree was being created (``retryable``: "…; try again"),
    ``SpotPatchError(CONSENT_REQUIRED)`` when the working tree is dirty and ``include_local_changes``
    is false, :class:`GitError` when git fails. On any failure (and on cancellation) everything
    created so far is removed before the error propagates. The user's index, HEAD, refs and
    files are never written. With ``pool`` (worktree/pool.py), a warm checkout at HEAD replaces
    ``git worktree add`` when the pool has one. ``health``: the caller's :func:`repo_health` of ``root``
    taken moments before with nothing done in between (job/create's); it replaces the check here.

    One health check per job (issue 17: each is a ``git status`` and a walk of the user's tree): the
    health is read again after the worktree is ready only when local changes are to be copied in
    (``consent-required``), where the snapshot needs it. A require-clean job's baseline is HEAD's tree
    whatever the user's files do meanwhile (HEAD itself is re-verified), so a tree that became dirty after
    the check is the same case as one edited a moment after the job started.
    """
    limits = limits or Limits()
    first = health or await repo_health(root, limits)
    await _check_health(root, first, include_local_changes)
    head = await resolve_head(root)
    if head is None:  # pragma: no cover - health just saw it; a race
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, "HEAD cannot be resolved", retryable=True)
    pooled = await pool.acquire(head) if pool is not None else None  # a warm clean checkout at head (pool.py)
    job_dir = pooled or await _make_job_dir(root)
    wt = Worktree(path=job_dir, head_oid=head, baseline_oid="", job_id=job_id)
    try:
        if pooled is None:
            await _add_detached(root, job_dir, head)
        wt.admin_dir = await _admin_dir(job_dir)
        _write_marker(wt.admin_dir, job_id)
        if not await head_is(job_dir, head):
            raise GitError("the new worktree is not at the recorded HEAD")
        if not await head_is(root, head):
            raise SpotPatchError(
                ErrorCode.REPO_BLOCKED, "HEAD changed while the job was starting; try again", retryable=True
            )
        clean = True
        if first.state == "consent-required":  # local changes go in: re-read them now (snapshot.py re-verifies)
            health = await repo_health(root, limits)
            await _check_health(root, health, include_local_changes)
            if health.state == "consent-required":
                from spotpatch_agent.worktree.snapshot import include_local_changes as copy_local_changes  # cold

                await copy_local_changes(root, job_dir, head, limits)
            clean = health.state == "clean"
        wt.baseline_oid = await _commit_baseline(wt, clean=clean, proven=pool is not None and pool.proven(job_dir))
        return wt
    except BaseException:
        await remove_worktree(root, wt)
        raise


async def _add_detached(root: Path, path: Path, head: str) -> None:
    """Add the detached worktree at ``head`` in the (empty) directory ``path``."""
    with anyio.CancelScope(shield=True):  # never kill git half-way through registering a worktree
        await run_git(["worktree", "add", "--detach", "--quiet", str(path), head], cwd=root, redact=[path])


async def _check_health(root: Path, health: RepoHealth, include_local_changes: bool) -> None:
    if health.state == "blocked":
        raise SpotPatchError(
            ErrorCode.REPO_BLOCKED, "the repository cannot be isolated: " + blocked_message(health)
        )
    if health.state == "consent-required" and not include_local_changes:
        c = health.counts
        raise SpotPatchError(
            ErrorCode.CONSENT_REQUIRED,
            "the working tree has local changes "
            f"({c.staged} staged, {c.unstaged} unstaged, {c.untracked} untracked): " + health_message(health)
            + " In job/create, localChangesConsent: true includes them.",
        )


async def _commit_baseline(wt: Worktree, *, clean: bool = False, proven: bool = False) -> str:
    """The worktree's baseline commit (detached HEAD of the worktree only; docs/design.md §8); returns its id.

    ``clean`` (require-clean mode: the worktree is a fresh or pool-reset checkout of ``wt.head_oid`` with
    nothing copied into it): when ``git update-index --refresh`` (the worktree's own index) finds every
    file equal to the index — which equals HEAD after the checkout, and the checkout left no untracked file
    — ``git add --all`` would stage nothing, so the baseline is ``commit-tree`` of HEAD's tree and
    ``update-ref`` of the worktree's HEAD (guarded by its old value): the same commit ``add --all`` +
    ``commit`` make, without re-scanning the tree twice. Anything else (include-local-changes, a file
    that differs after the checkout, e.g. a non-idempotent checkout filter) takes ``add --all`` + ``commit``.
    ``proven`` (with ``clean``): the warm pool handed the worktree over after that very refresh found it
    equal to ``wt.head_oid`` with nothing untracked (``WorktreePool.proven``), so it is not run again.
    """
    message = f"spotpatch baseline {wt.job_id}\n".encode("utf-8", "replace")
    if clean:
        refreshed = None if proven else await run_git(["update-index", "--refresh"], cwd=wt.path, check=False,
                                                      redact=[wt.path], timeout=300)
        if refreshed is None or refreshed.returncode == 0:
            made = await run_git(
                [*BASELINE_IDENTITY, "commit-tree", "--no-gpg-sign", f"{wt.head_oid}^{{tree}}", "-p", wt.head_oid,
                 "-F", "-"],
                cwd=wt.path, input=message, redact=[wt.path],
            )
            baseline = made.stdout.decode("ascii", "replace").strip()
            if len(baseline) not in (40, 64) or not all(c in "0123456789abcdef" for c in baseline):
                raise GitError("the baseline commit was not created")
            await run_git(["update-ref", "--no-deref", "-m", "commit: spotpatch baseline", "HEAD", baseline,
                           wt.head_oid], cwd=wt.path, redact=[wt.path])
            if not await head_is(wt.path, baseline):
                raise GitError("the baseline commit was not created")
            return baseline
    await run_git(["add", "--all"], cwd=wt.path, timeout=300)
    await run_git(
        [*BASELINE_IDENTITY, "commit", "--no-verify", "--allow-empty", "--quiet", "--no-gpg-sign", "-F", "-"],
        cwd=wt.path,
        input=message,
        timeout=300,
    )
    baseline = await resolve_head(wt.path)
    if baseline is None or baseline == wt.head_oid:
        raise GitError("the baseline commit was not created")
    return baseline


# ---------------------------------------------------------------- placement


async def _make_job_dir(root: Path) -> Path:
    """A fresh private (0700) empty directory ``<base>/job-<random>`` for the worktree (see the module
    docstring), its ownership sidecar ``<base>/job-<random>.owner`` created first."""
    base = await _node_modules_base(root)
    if base is None:
        base = _temp_base()
    for _attempt in range(3):  # another engine may remove the empty base dir in between
        _ensure_private_dir(base)
        name = "job-" + secrets.token_hex(8)
        try:
            _write_sidecar(base, name)
        except (FileNotFoundError, FileExistsError):
            continue
        try:
            os.mkdir(base / name, 0o700)
        except BaseException:
            _unlink_sidecar(base / name)
            raise
        return base / name
    raise SpotPatchError(ErrorCode.INTERNAL, "could not create a worktree directory")


def _temp_base() -> Path:
    return Path(tempfile.gettempdir()) / "spotpatch-worktrees"


#: Our job directory names (``job-`` + 16 hex digits; older engines: ``mkdtemp``'s 8 characters).
_JOB_NAME = re.compile(r"^job-[A-Za-z0-9_]{8,32}$")
#: Suffix of the ownership sidecar beside a job directory in our base directory.
OWNER_SUFFIX = ".owner"


def _sidecar(job_dir: Path) -> Path:
    return job_dir.parent / (job_dir.name + OWNER_SUFFIX)


def _write_sidecar(base: Path, name: str) -> None:
    """``<base>/<name>.owner``: this process owns ``<base>/<name>`` (exclusive create, never through a symlink)."""
    record = json.dumps({"owner": "spotpatch", "pid": os.getpid(), "start": _process_start(os.getpid()),
                         "createdAt": int(time.time())}).encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(base / (name + OWNER_SUFFIX), flags, 0o600)
    try:
        os.write(fd, record)
    finally:
        os.close(fd)


def _read_sidecar(job_dir: Path) -> dict[str, object] | None:
    path = _sidecar(job_dir)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        record = json.loads(path.read_bytes()[:4096])
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("owner") == "spotpatch" else None


def _unlink_sidecar(job_dir: Path) -> None:
    path = _sidecar(job_dir)
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


def _sidecar_owner_dead(record: dict[str, object]) -> bool:
    """Whether the process a sidecar names is gone. This process counts as alive (it may be creating that
    worktree right now), and so does any process on Windows (no cheap liveness probe) — but a sidecar with
    this process's pid and another start is a dead engine's whose pid was reused (containers restart with
    the same small pids), see :func:`_recorded_process_runs`."""
    pid = record.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    return not _recorded_process_runs(pid, record.get("start"))


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started, as ``"<boot id>:<start time in clock ticks>"`` (Linux ``/proc``), so a
    record of a dead process is not mistaken for a new process that got the same pid; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        start = data[data.rindex(b")") + 2 :].split()[19].decode("ascii")  # field 22 of proc(5)
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return f"{boot}:{start}"


def _recorded_process_runs(pid: int, start: object) -> bool:
    """Whether the engine process a marker or sidecar names (``pid`` and, when recorded, its ``start``) still
    runs. A pid that now belongs to a process with another start is a new process (pid reuse): the recorded
    one is gone. This process runs; without a start to compare (another platform, an older record) its
    pid alone decides. On Windows every other process counts as running (no cheap liveness probe)."""
    if pid == os.getpid():
        mine = _process_start(pid)
        return mine is None or start == mine
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # it runs, as another user: its start still tells whether it is the recorded process
    if isinstance(start, str):
        now = _process_start(pid)
        return now is None or now == start
    return True


def _our_bases(root: Path) -> list[Path]:
    """Our base directories that exist as real directories (never through a symlink)."""
    bases = []
    node_modules = root / "node_modules"
    if _is_real_dir(node_modules) and _is_real_dir(node_modules / ".spotpatch"):
        bases.append(node_modules / ".spotpatch")
    if _is_real_dir(_temp_base()):
        bases.append(_temp_base())
    return bases


def _ours_by_sidecar(registered: Path, bases: list[Path]) -> Path | None:
    """``<base>/<name>`` when the registered worktree path is one of our job directories (our name pattern,
    directly inside one of our base directories) whose sidecar names a dead owner; else ``None``."""
    if not _JOB_NAME.match(registered.name):
        return None
    for base in bases:
        if same_path(registered.parent, base):
            candidate = base / registered.name
            record = _read_sidecar(candidate)
            return candidate if record is not None and _sidecar_owner_dead(record) else None
    return None


def _sweep_stale_sidecars(bases: list[Path]) -> None:
    """Remove sidecars of dead owners whose job directory is gone, or still empty (a kill before ``git
    worktree add`` filled it; a ``git`` the dead owner left working on it is stopped first, see
    :func:`_remove_orphan`), and empty sidecars without a job directory (a kill between the sidecar's
    exclusive create and its write: the directory is made only after the write, so no worktree depends on
    it); then each base directory once empty."""
    for base in bases:
        try:
            names = [n for n in os.listdir(base) if n.endswith(OWNER_SUFFIX)]
        except OSError:
            continue
        for name in names:
            job_dir = base / name[: -len(OWNER_SUFFIX)]
            if _JOB_NAME.match(job_dir.name) and _is_empty_file(base / name) and not os.path.lexists(job_dir):
                _unlink_sidecar(job_dir)
                continue
            record = _read_sidecar(job_dir)
            if not _JOB_NAME.match(job_dir.name) or record is None or not _sidecar_owner_dead(record):
                continue
            # A dead owner's `git worktree add` may still be about to fill (or re-create) the directory.
            kill_processes_inside(job_dir)
            if _is_real_dir(job_dir):
                try:
                    os.rmdir(job_dir)  # only when empty
                except OSError:
                    continue
            elif os.path.lexists(job_dir):
                continue
            _unlink_sidecar(job_dir)
        try:
            base.rmdir()
        except OSError:
            pass


def _is_empty_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


async def _node_modules_base(root: Path) -> Path | None:
    node_modules = root / "node_modules"
    if not _is_real_dir(node_modules):
        return None
    base = node_modules / ".spotpatch"
    if os.path.lexists(base) and not _is_real_dir(base):
        return None
    ignored = await run_git(
        ["check-ignore", "--quiet", "node_modules/.spotpatch/job"], cwd=root, check=False, read_only=True
    )
    return base if ignored.returncode == 0 else None


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _ensure_private_dir(base: Path) -> None:
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(base)
    owned = not hasattr(os, "getuid") or st.st_uid == os.getuid()  # Windows: no uid to compare
    if not stat.S_ISDIR(st.st_mode) or not owned:
        raise SpotPatchError(ErrorCode.INTERNAL, "the worktree directory is not a private directory")


# ---------------------------------------------------------------- marker and registration


async def _admin_dir(worktree_path: Path) -> Path:
    known = read_git_dir(worktree_path)  # in process: the worktree's ``.git`` file names it (refs.py)
    if known is not None and known.parent.name == "worktrees":
        return known
    result = await run_git(
        ["rev-parse", "--path-format=absolute", "--git-dir"], cwd=worktree_path, read_only=True
    )
    return Path(os.path.realpath(result.stdout.decode("utf-8", "surrogateescape").rstrip("\n")))


def _write_marker(admin_dir: Path, job_id: str, **extra: object) -> None:
    record = {"owner": "spotpatch", "jobId": job_id, "pid": os.getpid(), "start": _process_start(os.getpid()),
              "createdAt": int(time.time()), **extra}
    tmp = admin_dir / (MARKER_NAME + ".tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, admin_dir / MARKER_NAME)


def _read_marker(admin_dir: Path) -> dict[str, object] | None:
    try:
        record = json.loads((admin_dir / MARKER_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("owner") == "spotpatch" else None


def _registered_path(admin_dir: Path) -> Path | None:
    """The working directory a worktree registration points at (``gitdir`` holds ``<path>/.git``)."""
    try:
        gitdir = (admin_dir / "gitdir").read_text("utf-8", "surrogateescape").strip("\n")
    except OSError:
        return None
    return Path(gitdir).parent if gitdir else None


def _points_back(worktree_path: Path, admin_dir: Path) -> bool:
    """Whether ``<worktree_path>/.git`` is a gitfile naming ``admin_dir`` (guards every deletion)."""
    try:
        text = (worktree_path / ".git").read_text("utf-8", "surrogateescape").strip()
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    target = Path(text[len("gitdir:"):].strip())
    if not target.is_absolute():
        target = worktree_path / target
    return same_path(target, admin_dir)


async def _registrations(root: Path) -> list[Path]:
    layout = await locate(root)
    if layout is None:
        return []
    folder = layout.common_dir / "worktrees"
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


# ---------------------------------------------------------------- result


async def result_diff(wt: Worktree) -> tuple[str, list[FileStat]]:
    """The agent's change: everything in the worktree against its baseline commit (docs/design.md §8).

    Stages the whole worktree first (``git add --all`` on the worktree's own index). Returns
    ``(diff, files)``: ``diff`` is ``git diff --cached --binary --full-index --no-renames`` against
    the baseline with ``a/``/``b/`` prefixes (bytes decoded as UTF-8 with ``surrogateescape``, so
    ``diff.encode("utf-8", "surrogateescape")`` gives git's exact bytes); ``files`` holds one
    :class:`FileStat` per path (relative POSIX, git's order) with added/removed line counts (0/0 for
    binary files) and status ``added|modified|deleted``. Raises :class:`GitError`.
    """
    await stage_all(wt)
    common = ["diff", "--cached", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"]
    base = [wt.baseline_oid, "--"]
    diff = await run_git(
        [*common, "--binary", "--full-index", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/", "-U3", *base],
        cwd=wt.path,
        redact=[wt.path],
        timeout=120,
    )
    numstat = await run_git([*common, "--numstat", "-z", *base], cwd=wt.path, redact=[wt.path])
    raw = await run_git([*common, "--raw", "-z", "--no-abbrev", *base], cwd=wt.path, redact=[wt.path])
    counts = _parse_numstat(numstat.stdout)
    files = []
    for entry in parse_raw(raw.stdout):
        added, removed = counts.get(entry.path, (0, 0))
        files.append(FileStat(path=entry.path, added=added, removed=removed, status=entry.status))
    return diff.stdout.decode("utf-8", "surrogateescape"), files


async def stage_all(wt: Worktree) -> None:
    """``git add --all`` inside the worktree (its index is the engine's, never the user's)."""
    await run_git(["add", "--all"], cwd=wt.path, redact=[wt.path], timeout=300)


@dataclass(frozen=True)
class RawEntry:
    """One line of ``git diff --raw -z --no-abbrev``: modes, blob ids (zeros = absent), status, path."""

    old_mode: str
    new_mode: str
    old_oid: str | None
    new_oid: str | None
    status: str
    path: str


_STATUS = {"A": "added", "D": "deleted", "M": "modified", "T": "modified"}


def parse_raw(raw: bytes) -> list[RawEntry]:
    """Parse ``--raw -z`` output (no renames). Raises :class:`GitError` on an unexpected status."""
    fields = raw.split(b"\0")
    entries: list[RawEntry] = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode("ascii", "replace")
        if not meta:
            continue
        old_mode, new_mode, old_oid, new_oid, letter = meta.lstrip(":").split(" ")
        if letter[:1] not in _STATUS:
            raise GitError(f"unexpected diff status {letter[:1]!r}")
        entries.append(
            RawEntry(
                old_mode,
                new_mode,
                None if old_oid == _ZERO_OID else old_oid,
                None if new_oid == _ZERO_OID else new_oid,
                _STATUS[letter[:1]],
                fields[i + 1].decode("utf-8", "surrogateescape"),
            )
        )
    return entries


def _parse_numstat(raw: bytes) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    for field in raw.split(b"\0"):
        if not field:
            continue
        added, removed, path = field.decode("utf-8", "surrogateescape").split("\t", 2)
        counts[path] = (int(added) if added.isdigit() else 0, int(removed) if removed.isdigit() else 0)
    return counts


# ---------------------------------------------------------------- removal


async def remove_worktree(root: Path, wt: Worktree) -> None:
    """Remove the job's worktree registration and directory (docs/design.md §8). Never raises.

    ``git worktree remove --force``; then, if anything remains, deletes the directory (only after
    checking its ``.git`` file points at this registration) and this registration's private git
    directory — a prune scoped to our own entry, so unrelated stale worktrees of the user are never
    pruned. Runs shielded from cancellation (bounded by a timeout); failures are logged, sanitized,
    to the ``spotpatch.worktree`` logger.
    """
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_TIMEOUT):
        try:
            admin = wt.admin_dir or await _find_admin_dir(root, wt.path)
            await _remove(root, wt.path, admin)
        except Exception as exc:  # cleanup never replaces the job's result
            log.warning("worktree cleanup failed: %s", sanitize(str(exc), root, wt.path))


async def _find_admin_dir(root: Path, path: Path) -> Path | None:
    """Our registration of ``path``: by its ``gitdir`` file, or — for a ``worktree add`` that died
    before writing it — the entry git names after our (random, unique) job directory."""
    registrations = await _registrations(root)
    for admin in registrations:
        registered = _registered_path(admin)
        if registered is not None and os.path.realpath(registered) == os.path.realpath(path):
            return admin
    if _looks_like_job_dir(path):
        for admin in registrations:
            if admin.name == path.name and not (admin / "gitdir").exists():
                return admin
    return None


async def _remove(root: Path, path: Path, admin: Path | None) -> None:
    if admin is not None and path.exists():
        result = await run_git(
            # Twice --force: also a locked registration (``git worktree lock``, or "initializing" left by a
            # `worktree add` that was killed); it is ours (the caller proved it).
            ["worktree", "remove", "--force", "--force", str(path)], cwd=root, check=False, redact=[path],
            timeout=120
        )
        if result.returncode != 0:
            log.info("git worktree remove failed; deleting the directory directly")
    ours = _looks_like_job_dir(path)
    if os.path.lexists(path) and (ours or (admin is not None and _points_back(path, admin))):
        # Only one of our job directories, or a directory whose .git names this registration.
        await anyio.to_thread.run_sync(_rmtree, path)
    if admin is not None and admin.exists():
        await anyio.to_thread.run_sync(_rmtree, admin)
    if ours:
        if not os.path.lexists(path):
            _unlink_sidecar(path)
        try:
            path.parent.rmdir()  # the shared base directory, once it is empty
        except OSError:
            pass


def _looks_like_job_dir(path: Path) -> bool:
    return path.name.startswith("job-") and path.parent.name in (".spotpatch", "spotpatch-worktrees")


def _rmtree(path: Path) -> None:
    def retry_writable(func, target, _exc_info):  # type: ignore[no-untyped-def]
        try:
            os.chmod(target, stat.S_IWRITE | stat.S_IREAD | stat.S_IEXEC)
            func(target)
        except OSError:
            pass

    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    shutil.rmtree(path, onerror=retry_writable)
    if os.path.lexists(path):
        raise OSError(f"could not delete {path}")


#: Prefix of a job directory moved aside in its base directory to be deleted later (``<base>/trash-<hex>``).
TRASH_PREFIX = "trash-"
_TRASH_NAME = re.compile(r"^trash-[0-9a-f]{16}$")


async def drop_worktree(root: Path, wt: Worktree, *, proven: bool = False) -> bool:
    """Remove the job's worktree in time independent of its size (issue 17): its directory is renamed to
    ``<base>/trash-<random>`` in its own base directory (deleted later by :func:`empty_trash`), then its
    registration (the private git directory) and sidecar are deleted — what ``git worktree remove`` leaves,
    minus the per-file deletes. Only for one of our job directories whose ``.git`` names its registration;
    returns False (nothing done) otherwise, or when the rename fails: then use :func:`remove_worktree`.
    ``proven``: the caller proved the registration ours another way (the sweep: marker or dead-owner
    sidecar), so a ``.git`` file that a killed ``worktree add`` never wrote is no reason to refuse.
    Never raises."""
    try:
        admin = wt.admin_dir or await _find_admin_dir(root, wt.path)
        if admin is None or not _looks_like_job_dir(wt.path) or not _is_real_dir(wt.path) \
                or not (proven or _points_back(wt.path, admin)):
            return False
        trash = wt.path.parent / (TRASH_PREFIX + secrets.token_hex(8))
        os.rename(wt.path, trash)
        _unlink_sidecar(wt.path)
        await anyio.to_thread.run_sync(_rmtree, admin)
        return True
    except Exception as exc:  # noqa: BLE001 - the caller falls back to remove_worktree
        log.info("could not move a worktree aside: %s", sanitize(str(exc), root, wt.path))
        return False


async def empty_trash(root: Path) -> int:
    """Delete every ``trash-<hex>`` directory in our base directories of ``root`` (see :func:`drop_worktree`);
    returns how many. Slow on a big checkout (per-file deletes), so it runs in a daemon thread: the engine
    runs it in the background after start-up, and an exit never waits for it — a deletion cut short is
    finished by the next start. Never raises."""
    bases = _our_bases(root)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(_empty_trash(bases)), name="spotpatch-trash",
                              daemon=True)
    worker.start()
    while worker.is_alive():
        await anyio.sleep(0.05)
    return result[0] if result else 0


def _empty_trash(bases: list[Path]) -> int:
    removed = 0
    for base in bases:
        try:
            names = [n for n in os.listdir(base) if _TRASH_NAME.match(n)]
        except OSError:
            continue
        for name in names:
            path = base / name
            if not _is_real_dir(path):
                continue
            try:
                _rmtree(path)
                removed += 1
            except OSError:
                log.warning("could not delete a SpotPatch worktree moved aside for deletion")
        try:
            base.rmdir()  # once empty
        except OSError:
            pass
    return removed


def _owner_alive(marker: dict[str, object]) -> bool:
    """Whether another live engine process owns this worktree (never sweep a running job of another
    engine on the same repository). POSIX probe; on Windows ``os.kill(pid, 0)`` is not a probe, so
    the owner is assumed alive unless it is this process."""
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or pid <= 0:
        return False
    return _recorded_process_runs(pid, marker.get("start"))


def _sweep_detached_temp_worktrees() -> int:
    """Delete ``<tempdir>/spotpatch-worktrees/job-*`` whose registration no longer exists (its repository
    was deleted or pruned): nothing can ever sweep them through a repository again."""
    base = _temp_base()
    removed = 0
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith("job-") and p.is_dir() and not p.is_symlink()]
    except OSError:
        return 0
    for path in candidates:
        try:
            text = (path / ".git").read_text("utf-8", "surrogateescape").strip()
        except OSError:
            continue  # still being created, or not ours to judge
        if not text.startswith("gitdir:"):
            continue
        admin = Path(text[len("gitdir:"):].strip())
        if admin.is_absolute() and not os.path.lexists(admin):
            try:  # moved aside in one rename; its files are deleted by empty_trash in the background
                os.rename(path, base / (TRASH_PREFIX + secrets.token_hex(8)))
                _unlink_sidecar(path)
                removed += 1
            except OSError:
                log.warning("could not remove a detached SpotPatch worktree directory")
    return removed


def is_parked(marker: dict[str, object] | None) -> bool:
    """Whether a marker is a warm pool worktree parked idle by an engine's clean shutdown (worktree/pool.py,
    ``WorktreePool.aclose(park=True)``): ``idle`` true, a ``pool-…`` id and the 40/64-hex HEAD it is a clean
    checkout of. Never a job's: a job's marker names ``job_…`` and no ``idle``."""
    if marker is None or marker.get("idle") is not True:
        return False
    job_id, head = marker.get("jobId"), marker.get("head")
    return (isinstance(job_id, str) and job_id.startswith("pool-") and isinstance(head, str)
            and len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head))


async def sweep_orphans(root: Path, *, live_job_ids: frozenset[str] | set[str] = frozenset(),
                        defer_deletes: bool = False, keep_parked: bool = False) -> int:
    """Remove worktrees of ``root`` left by a crashed or failed run; returns how many were removed.

    Only our registrations are touched, in every state a kill or a failed clean-up can leave them
    (docs/security.md §6, *Orphan sweep*):

    - marked (our marker in the private git directory): every one whose job id is not in ``live_job_ids``
      (at start-up: all) and whose owner process is gone (:func:`_recorded_process_runs`: a reused pid
      is not the owner) — also when its directory, or its ``gitdir`` file, is already gone;
    - unmarked, killed between ``git worktree add`` and the marker — the registration may still be locked
      ("initializing") with an ``index.lock`` from the checkout: the registered directory is
      ``job-<random>`` directly inside one of our base directories (``<root>/node_modules/.spotpatch``,
      ``<tempdir>/spotpatch-worktrees``) and its sidecar ``<name>.owner`` names a dead process;
    - unmarked, killed inside ``git worktree add`` before it wrote ``gitdir``: a private git directory named
      ``job-<random>`` with a dead-owner sidecar of that name in one of our base directories;
    - unmarked, whose ``job-<random>`` directory in one of our base locations is gone together with its
      sidecar (a removal cut short, a cleaned temp dir): no live engine has such a worktree, since the
      sidecar outlives the directory.

    Processes the dead engine left working in or on an orphan's directory (its ``git worktree add`` and that
    checkout, a check: they run in their own session and outlive a SIGKILLed engine) are SIGKILLed with
    their process tree first (:func:`~spotpatch_agent.process.kill_processes_inside`: this user's processes
    whose working directory is inside, or a ``git`` naming it; Linux), and removal is retried up to
    :data:`_SWEEP_ATTEMPTS` times.
    Locked registrations are removed too (``worktree remove --force --force``). Other worktrees — the
    user's own, locked or prunable ones included — are never touched, not even pruned, and nothing outside
    our base directories is deleted but a marked registration's own directory. Never raises for cleanup
    failures (logged, see :func:`remove_worktree`); returns 0 when ``root`` is not a repository.

    An orphan in one of our base directories is moved aside in one rename (:func:`drop_worktree`); its files
    are deleted at the end (:func:`empty_trash`) — or, with ``defer_deletes``, left for the caller to delete
    in the background (the engine's start-up: issue 17, nothing proportional to the repository blocks).

    ``keep_parked`` (the engine's start-up): a warm pool worktree a clean shutdown parked (:func:`is_parked`)
    whose directory is one of our job directories naming its registration is left for the new engine's pool,
    which adopts it only after proving it clean at the same HEAD, and otherwise removes it
    (``WorktreePool.warm``, ``drop_parked``). Every other orphan — a job's worktree, a pool worktree that
    was being warmed or recycled — is removed as always.
    """
    removed = _sweep_detached_temp_worktrees()
    bases = _our_bases(root)
    for admin in await _registrations(root):
        marker = _read_marker(admin)
        if marker is not None and (marker.get("jobId") in live_job_ids or _owner_alive(marker)):
            continue
        path = _registered_path(admin)
        if keep_parked and is_parked(marker) and path is not None and _looks_like_job_dir(path) \
                and _is_real_dir(path) and _points_back(path, admin):
            continue
        if marker is None and _claim_in_progress(admin):
            continue  # a live engine's pool is taking over the parked marker this very moment
        if marker is None:
            path = _unmarked_orphan(admin, path, root, bases)
            if path is None:
                continue
        if path is not None and _names_another(path, admin):  # a copied repository's registration: the
            path = None  # directory is another repository's worktree (its .git names that one); ours goes alone
        if path is None:  # marked, but git never wrote (or lost) ``gitdir``: only the registration is left
            await anyio.to_thread.run_sync(_rmtree_quietly, admin)
        else:
            job_id = str(marker.get("jobId")) if marker is not None else path.name
            await _remove_orphan(root, Worktree(path=path, head_oid="", baseline_oid="", job_id=job_id,
                                                admin_dir=admin))
        if not admin.exists():
            removed += 1
    await anyio.to_thread.run_sync(_sweep_stale_sidecars, _our_bases(root))
    if not defer_deletes:
        await empty_trash(root)
        await anyio.to_thread.run_sync(_sweep_stale_sidecars, _our_bases(root))  # each base once empty
    return removed


async def _remove_orphan(root: Path, wt: Worktree) -> None:
    """Remove an orphan's directory and registration: first SIGKILL the processes still working inside its
    directory (a ``git worktree add`` checkout or a check the dead engine started: they run in their own
    session, so the engine's SIGKILL left them running, still writing files), then :func:`remove_worktree`;
    up to :data:`_SWEEP_ATTEMPTS` times while anything is left. Processes are looked for only in a directory
    that is provably ours (one of our job directories, or one whose ``.git`` names this registration)."""
    assert wt.admin_dir is not None
    for _attempt in range(_SWEEP_ATTEMPTS):
        if _looks_like_job_dir(wt.path) or (os.path.lexists(wt.path) and _points_back(wt.path, wt.admin_dir)):
            killed = await anyio.to_thread.run_sync(kill_processes_inside, wt.path)  # in it, or git on it
            if killed:
                log.info("stopped %d process(es) left running in an orphaned worktree", len(killed))
        # One rename into the trash when the directory is one of ours (issue 17: the start-up work never
        # pays per-file deletes); else, or if that fails, git's own removal.
        if not await drop_worktree(root, wt, proven=True):
            await remove_worktree(root, wt)
        if not os.path.lexists(wt.path) and not wt.admin_dir.exists():
            return


def _unmarked_orphan(admin: Path, registered: Path | None, root: Path, bases: list[Path]) -> Path | None:
    """The job directory of an unmarked registration that is provably ours and orphaned (the unmarked cases
    of :func:`sweep_orphans`), else None."""
    if registered is None:
        if not _JOB_NAME.match(admin.name):
            return None
        for base in bases:
            record = _read_sidecar(base / admin.name)
            if record is not None and _sidecar_owner_dead(record):
                return base / admin.name
        return None
    found = _ours_by_sidecar(registered, bases)
    if found is not None:
        return found
    if not _JOB_NAME.match(registered.name) or os.path.lexists(registered) or os.path.lexists(_sidecar(registered)):
        return None
    parent = os.path.realpath(registered.parent)
    locations = (root / "node_modules" / ".spotpatch", _temp_base())
    return registered if any(parent == os.path.realpath(loc) for loc in locations) else None


def _claim_in_progress(admin: Path) -> bool:
    """Whether a running engine renamed this registration's marker to ``<marker>.claim-<pid>-<hex>`` to adopt
    the parked worktree (worktree/pool.py, ``_claim``): for that moment there is no marker to read."""
    try:
        names = [n for n in os.listdir(admin) if n.startswith(MARKER_NAME + CLAIM_INFIX)]
    except OSError:
        return False
    for name in names:
        pid = name[len(MARKER_NAME + CLAIM_INFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and _recorded_process_runs(int(pid), None):
            return True
    return False


def _names_another(path: Path, admin: Path) -> bool:
    """Whether ``<path>/.git`` is a gitfile naming an existing git directory other than ``admin``: the
    registration was copied with its repository (``cp -r``), and the directory belongs to the original's."""
    try:
        text = (path / ".git").read_text("utf-8", "surrogateescape").strip()
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    target = Path(text[len("gitdir:"):].strip())
    target = target if target.is_absolute() else path / target
    return target.is_dir() and not same_path(target, admin)


def _rmtree_quietly(path: Path) -> None:
    try:
        _rmtree(path)
    except OSError:
        log.warning("could not remove an orphaned SpotPatch worktree registration")
