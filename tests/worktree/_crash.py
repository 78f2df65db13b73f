"""Crash scenarios of one journalled Apply/Revert, shared by the every-boundary kill test
(tests/worktree/test_crash_boundaries.py) and the seeded random-kill run (tests/worktree/test_random_kills.py).

The scenario touches four paths of every kind: a modified text file, a modified binary file, a deleted
file and a file created in a new directory (Revert: the two modified back, the deleted one created, the
created one deleted with its directory). :func:`kill_at` runs the write in a child process
(tests/worktree/_write_driver.py) and SIGKILLs it at a named step boundary.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.images import ABSENT, Image, missing_parents, new_file_mode, new_tmp_name, read_image
from spotpatch_agent.worktree.journal import (
    FAULT_ENV,
    PathWrite,
    WritePlan,
    decode_plan,
    journal_dir,
    write_journalled_sync,
)
from tests.conftest import git
from tests.worktree._util import files

FILES: dict[str, str | bytes] = {
    "a.txt": "alpha\nbeta\n",
    "b.bin": bytes(range(256)) * 4,
    "gone.txt": "to delete\n",
    "other.txt": "unrelated\n",
}
POST: dict[str, bytes | None] = {
    "a.txt": b"alpha\nBETA\n",
    "b.bin": bytes(reversed(range(256))) * 4,
    "gone.txt": None,
    "new dir/\u00fcn\u00ef.txt": "n\u00e9w\n".encode(),
}
PROJECT = Path(__file__).resolve().parents[2]


@dataclass
class Scenario:
    """A repository about to run ``plan``; ``start``: its files before, ``applied``: the Apply plan."""

    root: Path
    plan: WritePlan
    start: dict[str, bytes | str]
    repo: dict[str, str]


def apply_plan(root: Path, job_id: str = "job_1") -> WritePlan:
    writes = []
    for rel, data in POST.items():
        pre = read_image(root, rel)
        assert isinstance(pre, Image)
        post = ABSENT if data is None else Image(data, pre.mode if pre.data is not None else new_file_mode())
        parents = missing_parents(root, rel) if pre.data is None else None
        writes.append(PathWrite(rel, pre, post, new_tmp_name(), parents))
    return WritePlan(job_id, "apply", git(root, "rev-parse", "HEAD").strip(), writes)


class _NoJournal:
    """A journal that records nothing: the set-up Apply of a revert scenario is not the write under test."""

    def begin(self, plan: WritePlan) -> None:
        return None

    def end(self, plan: WritePlan) -> None:
        return None


def scenario(root: Path, operation: str) -> Scenario:
    """``root`` (a fresh repo of :data:`FILES`) ready for the Apply, or applied and ready for the Revert."""
    plan = apply_plan(root)
    if operation == "revert":
        write_journalled_sync(root, plan, _NoJournal(), ErrorCode.APPLY_CONFLICT)
        plan = WritePlan(plan.job_id, "revert", plan.head,
                         [PathWrite(w.path, w.post, w.pre, new_tmp_name(),
                                    w.dirs or 0 if w.post.data is not None else missing_parents(root, w.path))
                          for w in plan.writes])
    return Scenario(root, plan, files(root), repo_bits(root))


def repo_bits(root: Path) -> dict[str, str]:
    """Index bytes, HEAD and refs: never changed by a write or a recovery."""
    return {"index": (root / ".git" / "index").read_bytes().hex(), "head": git(root, "rev-parse", "HEAD"),
            "refs": git(root, "for-each-ref")}


def tree_with(start: dict[str, bytes | str], writes: list[PathWrite], which: str) -> dict[str, bytes | str]:
    """``start`` with every written path at its ``pre`` or ``post`` image (directories recomputed)."""
    tree = {k: v for k, v in start.items() if v != "dir"}
    for w in writes:
        image = w.pre if which == "pre" else w.post
        if image.data is None:
            tree.pop(w.path, None)
        else:
            tree[w.path] = image.data
    for rel in list(tree):
        parts = rel.split("/")
        for n in range(1, len(parts)):
            tree["/".join(parts[:n])] = "dir"
    return tree


def tmp_rel(w: PathWrite) -> str:
    return "/".join([*w.path.split("/")[:-1], w.tmp])


class Driver:
    """The long-lived driver process (tests/worktree/_write_driver.py): each command runs in a forked child
    that :meth:`kill_at` SIGKILLs at a step boundary."""

    def __init__(self, *, no_exchange: bool = False) -> None:
        self.no_exchange = no_exchange
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.worktree._write_driver"], cwd=PROJECT,
            env={k: v for k, v in os.environ.items() if k != FAULT_ENV},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self._err = b""
        self._out = b""

    def _send(self, args: list[str], point: str | None, mark: str | None = None) -> int:
        assert self.proc.stdin is not None
        command = {"args": args, "point": point, "mark": mark, "noExchange": self.no_exchange}
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()
        return int(json.loads(self._line())["pid"])

    def _read(self, timeout: float = 60) -> None:
        """Read whatever the driver wrote next (stdout into its buffer, stderr into its own)."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        ready, _, _ = select.select([self.proc.stdout, self.proc.stderr], [], [], timeout)
        assert ready, "the driver does not answer: " + self._drain()
        for stream in ready:
            data = os.read(stream.fileno(), 65536)
            assert data, "the driver died: " + self._drain()
            if stream is self.proc.stdout:
                self._out += data
            else:
                self._err += data

    def _line(self) -> bytes:
        while b"\n" not in self._out:
            self._read()
        line, self._out = self._out.split(b"\n", 1)
        return line

    def _drain(self) -> str:
        return self._err.decode(errors="replace")[-2000:]

    def _status(self, pid: int) -> int:
        answer = json.loads(self._line())
        assert answer["pid"] == pid
        return int(answer["status"])

    def kill_at(self, args: list[str], point: str) -> None:
        """Run ``args`` in a child until it pauses at ``point``, then SIGKILL it (no cleanup runs)."""
        pid = self._send(args, point)
        marker = f"SPOTPATCH-TEST-PAUSED {point}".encode()
        while marker not in self._err:
            if b"\n" in self._out:  # the child ended
                raise AssertionError(f"ended without pausing at {point}: {self._drain()}")
            self._read()
        self._err = self._err.split(marker, 1)[1]
        os.kill(pid, signal.SIGKILL)
        assert os.WIFSIGNALED(status := self._status(pid)) and os.WTERMSIG(status) == signal.SIGKILL

    def _wait_mark(self, mark: str) -> bool:
        """Wait until the child passed ``mark``; False when it ended first."""
        marker = f"SPOTPATCH-TEST-MARK {mark}".encode()
        while marker not in self._err:
            if b"\n" in self._out:
                return False
            self._read()
        self._err = self._err.split(marker, 1)[1]
        return True

    def timed(self, args: list[str], mark: str) -> tuple[float, float]:
        """Run ``args`` unkilled: (seconds from start to ``mark``, seconds from ``mark`` to the end)."""
        started = time.perf_counter()
        pid = self._send(args, None, mark)
        assert self._wait_mark(mark), f"never passed {mark}: {self._drain()}"
        marked = time.perf_counter()
        assert os.WIFEXITED(self._status(pid))
        return marked - started, time.perf_counter() - marked

    def kill_after(self, args: list[str], delay: float, *, mark: str | None = None) -> bool:
        """Run ``args`` in a child and SIGKILL it ``delay`` seconds after it started (or after it passed the
        boundary ``mark``); False when it had already finished (then it exited cleanly)."""
        pid = self._send(args, None, mark)
        if mark is None or self._wait_mark(mark):
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        status = self._status(pid)
        if os.WIFSIGNALED(status):
            return True
        assert os.WEXITSTATUS(status) in (0, 1), self._drain()
        return False

    def run(self, args: list[str]) -> int:
        """Run ``args`` in a child to the end; its exit code (0 done, 1 conflict)."""
        status = self._status(self._send(args, None))
        assert os.WIFEXITED(status), self._drain()
        return os.WEXITSTATUS(status)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def plan_file(sc: Scenario, where: Path) -> Path:
    from spotpatch_agent.worktree.journal import encode_plan

    where.write_bytes(encode_plan(sc.plan))
    return where


def journal_images(root: Path) -> dict[str, set[str | None]]:
    """path -> SHA-256 of every image some journal (pending or kept aside) holds for it."""
    held: dict[str, set[str | None]] = {}
    base = journal_dir(root / ".git").parent
    for sub in ("journal", "quarantine"):
        directory = base / sub
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            if entry.name.startswith("."):
                continue
            try:
                plan = decode_plan(entry.read_bytes())
            except ValueError:
                continue
            for w in plan.writes:
                held.setdefault(w.path, set()).update({w.pre.sha256, w.post.sha256})
    return held


def images_on_disk(root: Path, w: PathWrite) -> set[str | None]:
    """SHA-256 of what the path and its temp file hold (``None``: the path is absent)."""
    found: set[str | None] = set()
    for rel in (w.path, tmp_rel(w)):
        image = read_image(root, rel)
        if isinstance(image, Image) and (image.data is not None or rel == w.path):
            found.add(image.sha256)
    return found


def assert_no_image_lost(root: Path, plan: WritePlan, *, which: tuple[str, ...] = ("pre", "post")) -> None:
    """Each image named by ``which`` (``pre``/``post``) of every path exists somewhere on disk: the path,
    its temp file or a journal (pending or kept aside)."""
    held = journal_images(root)
    for w in plan.writes:
        have = images_on_disk(root, w) | held.get(w.path, set())
        for name in which:
            image = w.pre if name == "pre" else w.post
            assert image.sha256 in have, f"the {name}-image of {w.path} is lost"
