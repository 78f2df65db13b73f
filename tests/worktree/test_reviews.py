"""Saved reviews under ``.git/spotpatch/reviews`` (issue 25; worktree/reviews.py): a record round-trips byte for
byte, is refused when edited, and is never written or read through a symlink, a FIFO or a swapped directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.worktree.images import Image
from spotpatch_agent.worktree.reviews import SavedReview, diff_sha256, load_review, save_review

JOB = "job_00112233445566ff"
SHA = "a" * 64


def review(job_id: str = JOB, state: str = "applied") -> SavedReview:
    one = SavedReview(job_id=job_id, head="b" * 40, diff="diff --git a/x b/x\n+\udcff bytes\n", paths=["x", "n/new"],
                      baseline_hashes={"x": SHA, "n/new": None}, result_hashes={"x": "c" * 64, "n/new": SHA})
    if state == "applied":
        one.state = "applied"
        one.post_hashes = {"x": "c" * 64, "n/new": SHA}
        one.baseline_images = {"x": Image(b"\x00\xffbinary\r\n", 0o755), "n/new": Image(None)}
        one.created_dirs = {"n/new": 1}
    return one


def common(tmp_path: Path) -> Path:
    git_dir = tmp_path / "repo" / ".git"
    git_dir.mkdir(parents=True)
    return git_dir


def test_a_record_round_trips_byte_for_byte_with_owner_only_modes(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    save_review(git_dir, review())
    loaded = load_review(git_dir, JOB)
    assert loaded == review() and loaded.baseline_images == review().baseline_images
    assert loaded.diff_sha256 == diff_sha256(review().diff)
    assert (git_dir / "spotpatch" / "reviews").stat().st_mode & 0o777 == 0o700
    assert (git_dir / "spotpatch" / "reviews" / f"{JOB}.json").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in (git_dir / "spotpatch" / "reviews").iterdir()] == [f"{JOB}.json"]  # no temp left


@pytest.mark.parametrize("edit", ["diff", "image", "state", "hash"])
def test_an_edited_record_is_refused(tmp_path: Path, edit: str) -> None:
    git_dir = common(tmp_path)
    save_review(git_dir, review())
    file = git_dir / "spotpatch" / "reviews" / f"{JOB}.json"
    raw = json.loads(file.read_text())
    if edit == "diff":
        raw["diff"] += "+more\n"
    elif edit == "image":
        raw["applied"]["baselineImages"]["x"]["data"] = "ZXZpbA=="
    elif edit == "state":
        raw["state"] = "review"
    else:
        raw["recordSha256"] = "0" * 64
    file.write_text(json.dumps(raw))
    with pytest.raises(SpotPatchError) as caught:
        load_review(git_dir, JOB)
    assert caught.value.code.value == "CHANGESET_REJECTED" and str(tmp_path) not in caught.value.message


def test_a_symlinked_spotpatch_directory_is_refused_and_nothing_is_written_through_it(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (git_dir / "spotpatch").symlink_to(elsewhere)
    with pytest.raises(SpotPatchError, match="is a symlink or not a directory"):
        save_review(git_dir, review())
    with pytest.raises(SpotPatchError, match="is a symlink or not a directory"):
        load_review(git_dir, JOB)
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_in_the_records_place_is_replaced_never_followed(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    save_review(git_dir, review("job_0000000000000001"))
    reviews = git_dir / "spotpatch" / "reviews"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (reviews / f"{JOB}.json").symlink_to(victim)
    with pytest.raises(SpotPatchError, match="it is a symlink"):
        load_review(git_dir, JOB)
    save_review(git_dir, review())
    assert victim.read_text() == "keep me" and not (reviews / f"{JOB}.json").is_symlink()
    assert load_review(git_dir, JOB).state == "applied"


def test_a_fifo_record_is_refused_without_blocking(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    save_review(git_dir, review("job_0000000000000001"))
    os.mkfifo(git_dir / "spotpatch" / "reviews" / f"{JOB}.json")
    with pytest.raises(SpotPatchError, match="not a regular file"):
        load_review(git_dir, JOB)


def test_missing_records_and_bad_ids_are_not_found(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    for job_id in (JOB, "../../x", "job_0123"):
        with pytest.raises(SpotPatchError) as caught:
            load_review(git_dir, job_id)
        assert caught.value.code.value == "JOB_NOT_FOUND"


def test_only_the_newest_records_are_kept(tmp_path: Path) -> None:
    git_dir = common(tmp_path)
    ids = [f"job_{i:016x}" for i in range(5)]
    for i, job_id in enumerate(ids):
        save_review(git_dir, review(job_id, "review"), keep=3)
        os.utime(git_dir / "spotpatch" / "reviews" / f"{job_id}.json", ns=(i * 10**9, i * 10**9))
    names = sorted(p.name for p in (git_dir / "spotpatch" / "reviews").iterdir())
    assert names == [f"{job_id}.json" for job_id in ids[-3:]]
