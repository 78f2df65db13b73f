"""A journalled write plan and a crash after it, shared by the journal tests."""

from __future__ import annotations

from pathlib import Path

from spotpatch_agent.worktree.image_write import write_image
from spotpatch_agent.worktree.images import ABSENT, Image, new_file_mode, new_tmp_name, read_image
from spotpatch_agent.worktree.journal import (
    DiskJournal,
    PathWrite,
    WritePlan,
)
from tests.conftest import git

FILES = {"a.txt": "alpha\n", "src/b.txt": "beta\n", "gone.txt": "to delete\n", "other.txt": "unrelated\n"}
POST = {"a.txt": b"ALPHA\n", "src/b.txt": b"BETA\n", "gone.txt": None, "src/new dir/ünï.txt": "néw\n".encode()}


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def image_of(root: Path, rel: str) -> Image:
    found = read_image(root, rel)
    assert isinstance(found, Image)
    return found


def apply_plan(root: Path, job_id: str = "job_1") -> WritePlan:
    """The plan an Apply of :data:`POST` on ``root`` would journal."""
    writes = []
    for rel, data in POST.items():
        pre = image_of(root, rel)
        post = ABSENT if data is None else Image(data, pre.mode if pre.data is not None else new_file_mode())
        writes.append(PathWrite(rel, pre, post, new_tmp_name()))
    return WritePlan(job_id, "apply", head(root), writes)


def crash_after(root: Path, plan: WritePlan, written: int) -> None:
    """What a killed engine leaves: the durable journal and the first ``written`` paths replaced."""
    DiskJournal(root / ".git").begin(plan)
    for item in plan.writes[:written]:
        write_image(root, item.path, item.post, item.tmp)
