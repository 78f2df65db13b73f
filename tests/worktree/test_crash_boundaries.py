"""Fault injection at every step boundary (issue 12 acceptance 2; docs/security.md §7
"Crash safety"): a process running the engine's journalled write of an Apply or a Revert is SIGKILLed
after each step that changes the disk — the journal's temp file synced, the journal durable, per path
each write, exchange/placement/move and unlink, the verification, the journal removed — in turn, then
recovery runs as at the next start; with ``renameat2`` (Linux) and without it (the hard-link and
rename fallbacks other systems use).

At the kill: every touched path is wholly its pre- or post-image exactly as far as the write got,
nothing else changed, and no image is lost (the pre-image is on disk: the path, its temp file or the
journal; once the journal is durable, the post-image too). After recovery: every path holds the
image the journal rules name (no journal yet → untouched; journal → the no-change state: an Apply
rolled back, a Revert completed; journal removed → the operation's result), no temp file, journal or
empty directory is left, the index, HEAD and refs never changed. Recovery is itself killed at each of
its own boundaries and the next recovery finishes the job (idempotence).

The boundaries are enumerated by ``write_steps`` (spotpatch_agent/worktree/journal.py) and checked
against the ones a run actually passes, so a new step cannot go untested.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.journal import (
    DiskJournal,
    journal_dir,
    set_fault_hook,
    write_journalled_sync,
    write_steps,
)
from spotpatch_agent.worktree.recovery import recover_pending
from tests.worktree._crash import FILES as CRASH_FILES
from tests.worktree._crash import (
    Driver,
    Scenario,
    assert_no_image_lost,
    plan_file,
    repo_bits,
    scenario,
    tmp_rel,
    tree_with,
)
from tests.worktree._util import files

pytestmark = pytest.mark.anyio

OPERATIONS = ["apply", "revert"]


def boundaries(operation: str, tmp_path: Path) -> list[str]:
    from tests.conftest import make_repo

    sc = scenario(make_repo(tmp_path / f"probe-{operation}", CRASH_FILES), operation)
    return write_steps(sc.plan)


def written_paths(sc: Scenario, point: str) -> tuple[int, bool]:
    """(k, whether path k already holds its new image) at ``point``; k = 0 before the first path."""
    step = point.split(":", 1)[1]
    if not step.startswith("file-"):
        n = len(sc.plan.writes)
        return (0, False) if step.startswith("journal:synced") or step == "journal:durable" else (n, True)
    label, name = step.split(":")
    return int(label.removeprefix("file-")), name != "written"


def check_killed_state(sc: Scenario, point: str) -> None:
    k, kth_new = written_paths(sc, point)
    steps = write_steps(sc.plan)
    journalled = steps.index(f"{sc.plan.operation}:journal:durable") <= steps.index(point) < len(steps) - 1
    finished = point == steps[-1]  # the journal is gone: the operation is complete, its result on disk
    now = files(sc.root)
    for number, w in enumerate(sc.plan.writes, start=1):
        new = number < k or (number == k and kth_new)
        image = w.post if new else w.pre
        assert now.get(w.path) == image.data, f"{w.path} is not wholly its {'post' if new else 'pre'}-image"
    allowed = {w.path for w in sc.plan.writes} | {tmp_rel(w) for w in sc.plan.writes} | {"new dir"}
    assert {p: v for p, v in now.items() if p not in allowed} == \
        {p: v for p, v in sc.start.items() if p not in allowed}, "a path outside the plan changed"
    if not finished:  # before the journal is durable the post-image is only in the engine's memory
        assert_no_image_lost(sc.root, sc.plan, which=("pre", "post") if journalled else ("pre",))
    assert repo_bits(sc.root) == sc.repo


def expected_after_recovery(sc: Scenario, point: str) -> tuple[dict[str, bytes | str], list[str]]:
    """(tree, outcomes) the journal rules give after a kill at ``point``."""
    steps = write_steps(sc.plan)
    op = sc.plan.operation
    if steps.index(point) < steps.index(f"{op}:journal:durable"):
        return tree_with(sc.start, sc.plan.writes, "pre"), []  # no journal: nothing was written
    if point == f"{op}:journal:removed":
        return tree_with(sc.start, sc.plan.writes, "post"), []  # finished
    no_change = "pre" if op == "apply" else "post"
    return tree_with(sc.start, sc.plan.writes, no_change), ["rolled-back" if op == "apply" else "completed"]


async def assert_recovered(sc: Scenario, point: str) -> None:
    tree, outcomes = expected_after_recovery(sc, point)
    reports = await recover_pending(sc.root)
    assert [r.outcome for r in reports] == outcomes
    assert all(r.unresolved_paths == [] for r in reports)
    assert files(sc.root) == tree  # every path its image; no temp file, no empty directory left
    assert repo_bits(sc.root) == sc.repo
    jdir = journal_dir(sc.root / ".git")
    assert not jdir.exists() or list(jdir.iterdir()) == []
    assert not (jdir.parent / "quarantine").exists()
    assert await recover_pending(sc.root) == []  # nothing left to do


@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_enumerated_boundaries_are_the_ones_a_write_passes(repo_factory, operation: str) -> None:
    sc = scenario(repo_factory(CRASH_FILES), operation)
    seen: list[str] = []
    previous = set_fault_hook(seen.append)
    try:
        write_journalled_sync(sc.root, sc.plan, DiskJournal(sc.root / ".git"), ErrorCode.APPLY_CONFLICT)
    finally:
        set_fault_hook(previous)
    assert seen == write_steps(sc.plan)
    kinds = {name.rsplit(":", 1)[1] for name in seen}
    assert {"synced", "durable", "written", "exchanged", "placed", "moved", "unlinked", "verified", "removed"} <= kinds


@pytest.fixture
def driver() -> object:
    proc = Driver()
    yield proc
    proc.close()


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "fallbacks"])
@pytest.mark.parametrize("operation", OPERATIONS)
async def test_sigkill_at_every_step_boundary_then_recovery_follows_the_journal_rules(
    repo_factory, tmp_path: Path, operation: str, exchange: bool
) -> None:
    driver = Driver(no_exchange=not exchange)  # fallbacks: hard links and renames, as without renameat2
    try:
        await _kill_at_every_boundary(repo_factory, tmp_path, driver, operation)
    finally:
        driver.close()


async def _kill_at_every_boundary(repo_factory, tmp_path: Path, driver: Driver, operation: str) -> None:
    points = boundaries(operation, tmp_path)
    for number, point in enumerate(points):
        sc = scenario(repo_factory(CRASH_FILES, name=f"repo-{number}"), operation)
        driver.kill_at(["write", str(sc.root), str(plan_file(sc, tmp_path / f"plan-{number}"))], point)
        check_killed_state(sc, point)
        await assert_recovered(sc, point)


#: Kill points whose recovery has the most steps (a path exchanged but its temp file not yet unlinked,
#: one path still to write, one written and verified): recovery is killed at each of its boundaries there.
RECOVERY_CASES = ["apply:file-2:exchanged", "apply:file-3:moved", "revert:file-1:exchanged", "revert:file-4:moved"]


@pytest.mark.parametrize("point", RECOVERY_CASES)
async def test_sigkill_during_recovery_at_each_of_its_boundaries_is_finished_by_the_next_start(
    repo_factory, tmp_path: Path, driver: Driver, point: str
) -> None:
    operation = point.split(":", 1)[0]
    crashed = scenario(repo_factory(CRASH_FILES, name="crashed"), operation)
    driver.kill_at(["write", str(crashed.root), str(plan_file(crashed, tmp_path / "plan"))], point)

    probe = tmp_path / "probe"
    shutil.copytree(crashed.root, probe, symlinks=True)
    seen: list[str] = []
    previous = set_fault_hook(seen.append)
    try:
        await recover_pending(probe)
    finally:
        set_fault_hook(previous)
    recovery_points = [p for p in seen if p.startswith("recover:")]
    assert len(recovery_points) >= 2 and recovery_points[-1] == "recover:journal:removed", recovery_points

    for number, rpoint in enumerate(recovery_points):
        copy = tmp_path / f"copy-{number}"
        shutil.copytree(crashed.root, copy, symlinks=True)
        sc = Scenario(copy, crashed.plan, crashed.start, repo_bits(copy))
        driver.kill_at(["recover", str(copy)], rpoint)
        # recovery may discard the image it moves away from, never the no-change one
        assert_no_image_lost(copy, sc.plan, which=("pre",) if operation == "apply" else ("post",))
        tree, outcomes = expected_after_recovery(sc, point)
        if rpoint == "recover:journal:removed":
            outcomes = []  # that recovery finished before the kill
        reports = await recover_pending(copy)
        assert [r.outcome for r in reports] == outcomes, rpoint
        assert files(copy) == tree, rpoint
        assert repo_bits(copy) == sc.repo
