"""Crash recovery over every state a kill (or a kill during a recovery) can leave per path (issue 12 defect 2;
docs/security.md §7 "Crash safety"): the journal names the path; the path holds its pre-image, its
post-image or the user's bytes; its temp file is absent, holds either image or the user's bytes (a save a
killed write had swapped out) — also a save that is a prefix of an image or empty (breaker 12 F1: such a
save was once taken for a write cut short and deleted); a write cut short (a prefix of either image) is
under the ``.part`` name. For every combination, for each kind of path (modified text, modified binary,
deleted, created in a new directory), for Apply and Revert:

- the user's bytes are on disk afterwards (at the path, or — when the path holds bytes of its own — at
  the temp name), and the no-change image is never lost (at the path, or in the journal kept aside);
- a path holding an image with no foreign temp file ends at its no-change image, no temp file left;
- a second recovery finds nothing to do and changes nothing (idempotent);
- with HEAD moved, no file is written: only temp files holding our own bytes go, the journal is kept aside.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spotpatch_agent.worktree.images import Image, part_name
from spotpatch_agent.worktree.journal import DiskJournal, PathWrite, journal_dir
from spotpatch_agent.worktree.recovery import recover_pending
from tests.conftest import git, make_repo
from tests.worktree._crash import FILES, Scenario, assert_no_image_lost, scenario, tmp_rel, tree_with
from tests.worktree._util import files

pytestmark = pytest.mark.anyio

USER = b"the user's own bytes\n"
PATH_STATES = ["pre", "post", "user"]
TMP_STATES = ["absent", "pre", "post", "pre-part", "post-part", "user", "user-prefix", "user-empty"]


def bytes_for(w: PathWrite, state: str) -> bytes | None:
    if state == "user":
        return USER
    if state == "user-empty":
        return b""
    if state == "user-prefix":  # e.g. the last lines deleted and saved
        whole = w.pre.data or w.post.data
        assert whole
        return whole[: len(whole) // 2]
    image: Image = w.pre if state.startswith("pre") else w.post
    if image.data is None or not state.endswith("part"):
        return image.data
    return image.data[: len(image.data) // 2]


def tmp_state_rel(w: PathWrite, state: str) -> str:
    """Where a temp-file state lives: a write cut short under the ``.part`` name, the rest under the temp name."""
    return part_rel(w) if state.endswith("-part") else tmp_rel(w)


def part_rel(w: PathWrite) -> str:
    return "/".join([*w.path.split("/")[:-1], part_name(w.tmp)])


def put(root: Path, rel: str, data: bytes | None) -> None:
    path = root / rel
    if data is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def reset(sc: Scenario) -> None:
    """Back to the scenario's start: touched paths at their start bytes, no temp file, no journal."""
    for w in sc.plan.writes:
        put(sc.root, tmp_rel(w), None)
        put(sc.root, w.path, sc.start.get(w.path) if isinstance(sc.start.get(w.path), bytes) else None)  # type: ignore[arg-type]
    for rel, value in sorted(files(sc.root).items(), key=lambda kv: -len(kv[0])):
        if value == "dir" and rel not in sc.start and not any((sc.root / rel).iterdir()):
            (sc.root / rel).rmdir()
    spot = journal_dir(sc.root / ".git").parent
    if spot.exists():
        shutil.rmtree(spot)
    assert files(sc.root) == sc.start


@pytest.mark.parametrize("head_moved", [False, True])
@pytest.mark.parametrize("operation", ["apply", "revert"])
async def test_recovery_of_every_path_and_temp_file_state(tmp_path: Path, operation: str, head_moved: bool) -> None:
    sc = scenario(make_repo(tmp_path / "repo", FILES), operation)
    target_of = "pre" if operation == "apply" else "post"
    cases = 0
    for w in sc.plan.writes:
        for path_state in PATH_STATES:
            for tmp_state in TMP_STATES:
                if not tmp_state.startswith("user") and bytes_for(w, tmp_state) in (None, b"") \
                        and tmp_state != "absent":
                    continue  # an absent image has no temp-file form
                reset(sc)
                if head_moved:
                    sc.plan = type(sc.plan)(sc.plan.job_id, sc.plan.operation, "0" * 40, sc.plan.writes)
                DiskJournal(sc.root / ".git").begin(sc.plan)
                put(sc.root, w.path, bytes_for(w, path_state))
                if tmp_state != "absent":
                    put(sc.root, tmp_state_rel(w, tmp_state), bytes_for(w, tmp_state))
                where = f"{w.path}: path {path_state}, temp {tmp_state}"
                user_at_path = path_state == "user"
                user_in_tmp = tmp_state.startswith("user")
                saved = bytes_for(w, tmp_state)

                [report] = await recover_pending(sc.root)
                after = files(sc.root)
                if user_at_path:
                    assert after.get(w.path) == USER, where
                if user_in_tmp:  # the save is never deleted, whatever its bytes
                    assert saved in (after.get(w.path), after.get(tmp_rel(w))), where
                assert part_rel(w) not in after, where  # a write cut short is always ours: removed
                assert_no_image_lost(sc.root, sc.plan, which=(target_of,))
                resolvable = not head_moved and not user_at_path and not user_in_tmp
                if resolvable:
                    assert (report.outcome, report.unresolved_paths) == (
                        "rolled-back" if operation == "apply" else "completed", []), where
                    assert after == tree_with(sc.start, sc.plan.writes, target_of), where
                else:
                    assert report.outcome == "needs-attention" and w.path in report.unresolved_paths, where
                    if not user_in_tmp:
                        assert tmp_rel(w) not in after, where  # only our own bytes were in it
                    if head_moved:  # nothing written
                        assert after.get(w.path) == bytes_for(w, path_state) or user_in_tmp, where
                # idempotent: the next start has nothing to do and changes nothing
                assert await recover_pending(sc.root) == [], where
                assert files(sc.root) == after, where
                jdir = journal_dir(sc.root / ".git")
                assert not jdir.exists() or list(jdir.iterdir()) == [], where
                cases += 1
                if head_moved:
                    moved_head = git(sc.root, "rev-parse", "HEAD").strip()
                    sc.plan = type(sc.plan)(sc.plan.job_id, sc.plan.operation, moved_head, sc.plan.writes)
    assert cases >= 80
