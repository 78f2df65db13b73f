"""A warm worktree per project: job start without a full checkout (issue 6; docs/architecture.md, "Warm
worktree pool").

A cold job start pays ``git worktree add`` — a checkout of every file, seconds on a 200 MB tree. The pool
keeps one detached worktree of the project ready and brings it to the job's recorded HEAD instead, at a cost
proportional to the files that differ (its index's stat cache is warm)::

    pool = WorktreePool(root, task_group=tg, mode=pool_mode(...))   EngineService.configure
    tg.start_soon(pool.warm)                  background: one detached worktree at HEAD, marker "pool-…"
    await pool.prepare(head)                  job/create: acquire's work starts beside its health check
    path = await pool.acquire(head)           create_worktree: a clean detached checkout at head, or None
    await pool.release(wt)                    end of run_job: recycled in the background, or removed
    await pool.aclose(park=True)              EngineService.stop_all: the idle worktree parked for the next start

**Reset** (``acquire``, and the background recycle after ``release``): the directory must still be a real
directory named like our job directories, placed where a fresh worktree would be placed *now*
(``node_modules`` may have appeared or gone), whose ``.git`` names its private git directory, which is
registered for it and holds our marker with this process's id. Then, always with
``--git-dir=<private dir> --work-tree=<dir>`` so that git can never fall through to the user's
repository: the worktree's HEAD reflog is dropped (no earlier job's baseline commit stays reachable through
it), ``checkout --detach --force <head> --``, ``clean -ffdxq`` (untracked and ignored files, nested
repositories) and HEAD must be ``head``. The user's repository gains nothing but what a fresh ``worktree
add`` writes. ``checkout`` and ``clean`` are skipped when the worktree was last made a clean checkout of
``head`` and :meth:`WorktreePool._untouched` proves nothing changed since (issue 17); a reset is proven the
same way afterwards, and what it cannot clear (a flagged index entry, a ``.git`` in a tracked directory)
discards the worktree.

**Restart** (issue 17): ``aclose(park=True)`` keeps the idle worktree registered with a parked marker
(``idle``, ``head``); the next engine's sweep keeps it (``sweep_orphans(keep_parked=True)``) and its
:meth:`WorktreePool.warm` adopts it when it is a checkout of the current HEAD, else moves it aside
(``_adopt``); ``acquire`` hands it out only when proven untouched, else moves it aside (never resets it); an
engine without a pool removes it (:func:`drop_parked`). Any failure discards the worktree (moved aside in one
rename and its registration deleted; the files go in the background: ``removal.drop_worktree``,
``empty_trash``) and the job falls back to a cold ``git worktree add``; cancellation discards it too, so nothing leaks.

**Ownership**: a pooled worktree is idle in the pool (at most ``capacity``), or being warmed or recycled
under the pool lock, or owned by exactly one job (``acquire`` takes it out under the lock before any
await). Its marker names a ``pool-…`` id and this process, so ``sweep_orphans`` of a later engine removes
it once this one died, and another live engine never does (docs/design.md §8, "only ours").

**When**: :func:`~spotpatch_agent.worktree.pool_state.pool_mode`, never for a sparse checkout
(``worktree/pool_state.py`` holds the pool's state and the checks that need no worktree git command;
``worktree/pool_proof.py`` the read-only proofs about one pooled worktree that a reset and a hand-out combine).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from spotpatch_agent.errors import GitError
from spotpatch_agent.worktree.git import CACHED_DIFF_SUBMODULES, run_git, sanitize
from spotpatch_agent.worktree.marker import (  # the pool shares the job worktrees' placement and marker
    is_parked,
    list_registrations,
    owner_alive,
    points_back,
    private_git_dir,
    read_marker,
    registered_path,
    write_marker,
)
from spotpatch_agent.worktree.placement import Worktree, make_job_dir
from spotpatch_agent.worktree.pool_proof import STEP_TIMEOUT, at_head, index_clean, placed
from spotpatch_agent.worktree.pool_state import (
    MIN_FILES,
    POOL_ENV,
    STAT_RULES,
    PoolMode,
    Prepared,
    Slot,
    check_intact,
    claim_parked,
    pool_mode,
    scoped_args,
    sparse_checkout,
)
from spotpatch_agent.worktree.removal import drop_worktree, empty_trash, remove_worktree
from spotpatch_agent.worktree.repo import resolve_head

__all__ = ["MIN_FILES", "POOL_ENV", "PoolMode", "WorktreePool", "drop_parked", "pool_mode"]

log = logging.getLogger("spotpatch.worktree")

#: Longest ``aclose(park=True)`` waits for a recycle in flight to end parked, in seconds (the engine's
#: shutdown stays within the plugin's 2 s; one cut short is removed as before).
_PARK_WAIT = 0.5

class WorktreePool:
    """Warm detached worktrees of one project root (see the module docstring).

    ``task_group`` runs the background recycles (``None``: ``release`` removes instead). Counters for
    tests and diagnostics: ``hits`` (acquires answered warm), ``misses`` (acquires answered ``None``),
    ``discards`` (pooled worktrees removed because a check or git step failed, or on cancellation).
    """

    def __init__(self, root: Path, *, task_group: TaskGroup | None = None, mode: PoolMode = "auto",
                 min_files: int = MIN_FILES, capacity: int = 1) -> None:
        self.root = root
        self._tg = task_group
        self._mode = mode
        self._min_files = min_files
        self._capacity = capacity
        self._idle: list[Slot] = []
        self._busy = 0  # warms and recycles in flight: each ends with its worktree idle or removed
        self._lock = anyio.Lock()
        self._enabled: bool | None = None
        self._closed = False
        self.hits = self.misses = self.discards = self.untouched = 0
        self._proven: Path | None = None
        self._recycling = 0
        self._parking = False
        self._prepared: Prepared | None = None  # taken out and being proven for a job/create (prepare)

    def proven(self, path: Path) -> bool:
        """Whether the last :meth:`acquire` handed ``path`` over untouched: its ``update-index --refresh``
        had just found every tracked file equal to the index, the index equal to the HEAD asked for and
        nothing untracked or ignored (the baseline commit need not refresh again). Answers once."""
        proven, self._proven = self._proven, None
        return proven is not None and proven == path

    @property
    def idle_paths(self) -> list[Path]:
        """Directories of the idle pooled worktrees (never shown to clients)."""
        return [slot.path for slot in self._idle]

    # ---------------------------------------------------------------- job side

    async def acquire(self, head: str) -> Path | None:
        """A clean detached checkout at ``head``, now owned by the caller — or ``None``: create it cold.

        Waits for a warm or recycle in flight (it is the cheapest source of a checkout), never for more.
        Takes what :meth:`prepare` proved for the same ``head`` (another head: that one goes back idle).
        The caller removes the worktree (:func:`remove_worktree`) or hands it back with :meth:`release`.
        Never raises except on cancellation (the worktree is then removed).
        """
        self._proven = None
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            with anyio.CancelScope(shield=True):  # bounded by the proof's git steps; it then has one owner
                await prepared.done.wait()
            if prepared.slot is not None and prepared.head == head:
                self._proven = prepared.slot.path if prepared.untouched else None
                return prepared.slot.path
            await self._give_back(prepared)
        slot, untouched = await self._take(head)
        self._proven = slot.path if slot is not None and untouched else None
        return slot.path if slot is not None else None

    async def prepare(self, head: str) -> None:
        """Start :meth:`acquire`'s work for a job about to start at ``head`` in the background (job/create, beside
        its health check: issue 17): the idle worktree is taken out of the pool and proven (or reset) now, and
        the job's :meth:`acquire` takes the result. :meth:`unprepare` gives it back when no job takes it; an
        earlier preparation nobody took is given back first, so a proof is never used long after it was made.
        Never raises but on cancellation."""
        await self.unprepare()
        if self._closed or self._tg is None or not (self._idle or self._busy):  # nothing idle, nor on its way
            return
        prepared = self._prepared = Prepared(head)
        try:
            self._tg.start_soon(self._prepare, prepared)
        except RuntimeError:  # the task group is closed
            self._prepared = None

    async def unprepare(self) -> None:
        """Give back what :meth:`prepare` took when no :meth:`acquire` did (job/create failed): idle again (it
        is proven again at the next hand-out). Never raises."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            with anyio.CancelScope(shield=True):
                await prepared.done.wait()
                await self._give_back(prepared)

    async def _prepare(self, prepared: Prepared) -> None:
        try:
            prepared.slot, prepared.untouched = await self._take(prepared.head)
        finally:
            prepared.done.set()

    async def _take(self, head: str) -> tuple[Slot | None, bool]:
        async with self._lock:
            slot = self._idle.pop() if not self._closed and await self._is_enabled() and self._idle else None
        if slot is None:
            self.misses += 1
            return None, False
        try:
            untouched = await self._reset(slot, head, skip_if_untouched=True)
        except BaseException as exc:
            await self._discard(slot, exc)
            if not isinstance(exc, Exception):
                raise
            self.misses += 1
            return None, False
        self.hits += 1
        self.untouched += untouched
        return slot, untouched

    async def _give_back(self, prepared: Prepared) -> None:
        slot, prepared.slot = prepared.slot, None
        if slot is None:
            return
        self.hits -= 1  # not handed out after all
        self.untouched -= prepared.untouched
        async with self._lock:
            if not self._closed and len(self._idle) < self._capacity:
                self._idle.append(slot)
                return
            if self._closed and self._parking and slot.head is not None and self._park(slot):
                return
        await self._discard(slot, None, count=False)

    async def release(self, wt: Worktree) -> None:
        """Take back a job's worktree (docs/design.md §8 clean-up). Never raises.

        Recycled in the background when the pool has room (reset to the job's HEAD, then idle);
        otherwise — pool off or closed, full, no task group, unknown private git directory — removed now.
        """
        keep = (not self._closed and self._enabled and self._tg is not None and wt.admin_dir is not None
                and len(self._idle) + self._busy < self._capacity)
        if keep:
            assert self._tg is not None and wt.admin_dir is not None
            self._busy += 1
            try:
                self._tg.start_soon(self._recycle, wt.path, wt.admin_dir, wt.head_oid)
                return
            except RuntimeError:  # the task group is closed
                self._busy -= 1
        if self._closed:  # the engine stops: one rename now, the files are deleted by the next start
            with anyio.CancelScope(shield=True):
                if await drop_worktree(self.root, wt):
                    return
        await remove_worktree(self.root, wt)

    # ---------------------------------------------------------------- background

    async def warm(self) -> None:
        """Create one pooled worktree at the current HEAD unless one is idle (background; never raises).

        Cancellation removes whatever was created.
        """
        if self._closed:
            return
        self._busy += 1
        try:
            async with self._lock:  # mypy keeps `_closed` narrowed across this await; close() may set it
                if self._closed or len(self._idle) >= self._capacity:  # type: ignore[redundant-expr]
                    return
                if not await self._is_enabled():
                    await self._adopt(None)  # no pool here: what an earlier engine parked goes
                    return
                slot = await self._adopt(await resolve_head(self.root)) or await self._create()
                if self._closed:
                    await self._discard(slot, None, count=False)
                else:
                    self._idle.append(slot)
        except Exception as exc:  # noqa: BLE001 - the next job simply starts cold
            log.info("could not warm a worktree: %s", sanitize(str(exc), self.root))
        finally:
            self._busy -= 1

    async def aclose(self, *, park: bool = False) -> None:
        """Remove every idle pooled worktree; a warm or recycle in flight removes its own when it ends (or
        is cancelled). Later ``release`` calls remove instead of recycling.

        ``park`` (the engine's shutdown): an idle worktree known to be a clean checkout stays registered
        instead, its marker saying so (``idle``, the ``head`` it is a checkout of; its HEAD reflog dropped),
        for the next engine's :meth:`warm` to adopt (:meth:`_adopt`) — a marker write, no file of the
        checkout touched. A job's worktree is never parked (``release`` after close removes it).

        Time independent of the repository (issue 17, the engine's shutdown): each idle worktree is moved
        aside in one rename and its registration deleted (:func:`drop_worktree`); its files are deleted by
        the next engine's start-up, in the background. Never waits for a warm or recycle in flight: a
        ``worktree add`` cut short by the engine's exit is swept by the next start (its sidecar names this
        process).
        """
        self._closed = True
        self._parking = park
        if park and self._recycling:  # a job's worktree just handed back: briefly, its reset ends parked
            with anyio.move_on_after(_PARK_WAIT):
                while self._recycling:
                    await anyio.sleep(0.02)
        await self.unprepare()  # a job/create's preparation nobody took: parked or removed with the idle ones
        idle, self._idle = self._idle, []
        for slot in idle:
            if park and slot.head is not None and self._park(slot):
                continue
            await self._discard(slot, None, count=False)

    def _park(self, slot: Slot) -> bool:
        try:
            check_intact(slot)
            try:
                os.unlink(slot.admin_dir / "logs" / "HEAD")  # no earlier job's baseline stays reachable
            except FileNotFoundError:
                pass
            write_marker(slot.admin_dir, slot.pool_id, idle=True, head=slot.head)
            return True
        except (OSError, GitError) as exc:
            log.info("could not keep the warm worktree for the next start: %s", sanitize(str(exc), self.root))
            return False

    async def _adopt(self, head: str | None) -> Slot | None:
        """The worktree an earlier engine parked at shutdown (:func:`~spotpatch_agent.worktree.marker.is_parked`)
        when it is ours, idle and a checkout of ``head``, claimed and re-marked for this process (``adopted``:
        :meth:`acquire` hands it out only when :meth:`_untouched` proves it clean, else moves it aside); every
        other parked worktree whose owner is gone is removed (moved aside).
        ``head`` None: remove them all. A parked worktree of a live engine is left alone. Never raises but
        on cancellation."""
        found: Slot | None = None
        for admin in await list_registrations(self.root):
            marker = read_marker(admin)
            if not is_parked(marker) or owner_alive(marker):  # type: ignore[arg-type]
                continue
            path = registered_path(admin)
            if path is None or not points_back(path, admin):
                continue  # no directory, or another repository's (a copied registration): the sweep's case
            slot = Slot(path, admin, "pool-" + secrets.token_hex(6))
            parked_head = claim_parked(admin, slot.pool_id)
            if parked_head is None:
                continue  # another engine took it
            try:
                if found is None and head is not None and parked_head == head:
                    check_intact(slot)
                    await placed(self.root, slot)
                    # Proven at hand-out (acquire's _untouched, one pass over the tree instead of two); if that
                    # fails it is moved aside there and the job starts cold.
                    slot.head, slot.adopted = head, True
                    found = slot
                    continue
            except GitError:
                pass
            except BaseException as exc:
                await self._discard(slot, exc, count=False)
                raise
            await self._discard(slot, None, count=False)
        return found

    async def _recycle(self, path: Path, admin_dir: Path, head: str) -> None:
        slot = Slot(path, admin_dir, "pool-" + secrets.token_hex(6))
        self._recycling += 1
        try:
            async with self._lock:
                check_intact(slot, job_marker=True)
                write_marker(admin_dir, slot.pool_id)
                await self._reset(slot, head)
                if await self._refresh(slot, check=False) != 0:  # acquire then resets it again
                    slot.head = None
                if not self._closed:
                    self._idle.append(slot)
                elif not (self._parking and slot.head is not None and self._park(slot)):
                    await self._discard(slot, None, count=False)
        except BaseException as exc:
            await self._discard(slot, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._busy -= 1
            self._recycling -= 1

    async def _create(self) -> Slot:
        head = await resolve_head(self.root)
        if head is None:
            raise GitError("HEAD cannot be resolved")
        pool_id = "pool-" + secrets.token_hex(6)
        path = await make_job_dir(self.root)
        try:
            # Not shielded (a job's add is): the engine's stop must not wait for a full checkout. Cancelled,
            # git is killed (run_git) and what it wrote is moved aside below.
            await run_git(["worktree", "add", "--detach", "--quiet", str(path), head], cwd=self.root,
                          redact=[path], timeout=STEP_TIMEOUT)
            admin = await private_git_dir(path)
            write_marker(admin, pool_id)
            slot = Slot(path, admin, pool_id)
            if await self._refresh(slot, check=False) == 0:  # else acquire resets it first
                slot.head = head
            return slot
        except BaseException:
            wt = Worktree(path=path, head_oid=head, baseline_oid="", job_id=pool_id)
            with anyio.CancelScope(shield=True):  # our own directory (sidecar): one rename, else git's removal
                if not await drop_worktree(self.root, wt, proven=True):
                    await remove_worktree(self.root, wt)
            raise

    # ---------------------------------------------------------------- reset and checks

    async def _is_enabled(self) -> bool:
        if self._enabled is None:
            if self._mode != "auto":
                self._enabled = self._mode == "on"
            else:
                try:
                    out = await run_git(["ls-files", "-z"], cwd=self.root, check=False, read_only=True)
                except GitError:  # git could not run: no pool, jobs start cold
                    self._enabled = False
                else:
                    self._enabled = out.returncode == 0 and out.stdout.count(b"\0") >= self._min_files
            if self._enabled and await sparse_checkout(self.root):
                self._enabled = False
        return self._enabled

    async def _reset(self, slot: Slot, head: str, *, skip_if_untouched: bool = False) -> bool:
        """Bring ``slot`` to a clean detached checkout of ``head`` (module docstring). Raises on any doubt.

        ``skip_if_untouched`` (``acquire``): when the slot was last made a clean checkout of ``head`` and
        :meth:`_untouched` proves nothing changed since, ``checkout --force`` and ``clean`` are not run;
        returns whether they were skipped."""
        check_intact(slot)
        await placed(self.root, slot)
        scoped = scoped_args(slot)
        try:
            os.unlink(slot.admin_dir / "logs" / "HEAD")
        except FileNotFoundError:
            pass
        if skip_if_untouched and slot.head == head and await self._untouched(slot, head):
            return True
        if slot.adopted:  # kept from the last start: used only when provably clean at this HEAD
            raise GitError("the worktree kept from the last start is not a clean checkout of HEAD")
        slot.head = None  # until the reset below succeeded
        # Twice when the first pass did not give a clean checkout: a tracked directory swapped for a symlink
        # to a copy looks up to date to checkout, and only clean removes the symlink, leaving the files gone.
        # What neither clears (a .git in a tracked directory, a flagged index entry) means no reset: the job
        # starts cold. Tracked files that still differ from the index after two checkouts (a non-idempotent
        # checkout filter) are the baseline's to commit, as after a cold worktree add.
        for final in (False, True):
            for args in ([*STAT_RULES, "checkout", "--detach", "--force", "--quiet", head, "--"], ["clean", "-ffdxq"]):
                await run_git([*scoped, *args], cwd=slot.path, redact=[slot.path], timeout=STEP_TIMEOUT)
            if await self._untouched(slot, head, files=not final):
                break
            if final:
                raise GitError("the pooled worktree is not a clean checkout of HEAD after a reset")
        slot.head = head
        return False

    async def _untouched(self, slot: Slot, head: str, *, files: bool = True) -> bool:
        """Whether ``slot`` is still exactly the clean checkout of ``head`` it was made: HEAD is ``head``,
        the index equals ``head``'s tree (``diff-index --cached``), every tracked file equals the index
        (``update-index --refresh`` under :data:`STAT_RULES`: stat data, and the content of any file whose
        stat changed — a write, a chmod, a delete, a type change), no index entry tells git to look away and
        no ``.git`` hides in a tracked directory (``pool_proof.index_clean``), and nothing else is in the directory,
        ignored files, empty directories and nested repositories included (``ls-files --others --directory``
        without excludes: the set ``clean -ffdxq`` would delete). The five run side by side (each only reads
        the worktree; the refresh rewrites the index's stat data, never an entry). Any doubt, or a git
        failure, is False: the caller resets. ``files`` False (after a reset): all but the refresh."""
        scoped = scoped_args(slot)
        verdicts: list[bool] = []

        async def index_is_head() -> bool:
            out = await run_git([*scoped, "diff-index", "--cached", "--quiet", *CACHED_DIFF_SUBMODULES, head, "--"],
                                cwd=slot.path, check=False, read_only=True, redact=[slot.path], timeout=STEP_TIMEOUT)
            return out.returncode == 0

        async def files_are_index() -> bool:
            return await self._refresh(slot, check=False) == 0

        async def nothing_else() -> bool:
            out = await run_git([*scoped, "ls-files", "-z", "--others", "--directory"], cwd=slot.path,
                                check=False, read_only=True, redact=[slot.path], timeout=STEP_TIMEOUT)
            return out.returncode == 0 and out.stdout == b""

        async def judge(proof: Callable[[], Awaitable[bool]]) -> None:
            try:
                verdicts.append(await proof())
            except GitError:
                verdicts.append(False)

        proofs: list[Callable[[], Awaitable[bool]]] = [partial(at_head, slot, head), index_is_head,
                                                       partial(index_clean, slot, head), nothing_else]
        if files:
            proofs.append(files_are_index)
        async with anyio.create_task_group() as tg:
            for proof in proofs:
                tg.start_soon(judge, proof)
        return len(verdicts) == len(proofs) and all(verdicts)

    async def _refresh(self, slot: Slot, *, check: bool = True) -> int:
        """``update-index --refresh`` of the worktree's own index (stat data brought up to date, so the next
        one is a pass of ``lstat`` calls); its exit code (non-zero: a file differs from the index)."""
        out = await run_git([*STAT_RULES, *scoped_args(slot), "update-index", "--refresh"], cwd=slot.path, check=check,
                            redact=[slot.path], timeout=STEP_TIMEOUT)
        return out.returncode

    async def _discard(self, slot: Slot, why: BaseException | None, *, count: bool = True) -> None:
        """Remove ``slot`` like a job's worktree — unless its marker now names another process: then it is
        only forgotten (never remove what another engine owns; the sweep judges it once that one died)."""
        if count:
            self.discards += 1
        if isinstance(why, Exception):
            log.info("discarding a pooled worktree: %s", sanitize(str(why), self.root, slot.path))
        marker = read_marker(slot.admin_dir)
        if marker is not None and marker.get("pid") != os.getpid():
            return
        wt = Worktree(path=slot.path, head_oid="", baseline_oid="", job_id=slot.pool_id, admin_dir=slot.admin_dir)
        with anyio.CancelScope(shield=True):  # one rename and a small delete (issue 17); else git's removal
            dropped = await drop_worktree(self.root, wt)
            if not dropped:
                await remove_worktree(self.root, wt)
        if dropped and not self._closed and self._tg is not None:
            try:  # its files, in the background (the engine's next start finishes what an exit cut short)
                self._tg.start_soon(empty_trash, self.root)
            except RuntimeError:  # the task group is closed
                pass


async def drop_parked(root: Path) -> None:
    """Remove every worktree of ``root`` parked by an engine that is gone (the start-up of an engine that
    opens no pool: a blocked repository). Never raises but on cancellation."""
    await WorktreePool(root, mode="off")._adopt(None)
