"""What the reader and retention do with files planted in ``<git-common-dir>/spotpatch/audit/`` under a
ledger's name (docs/design.md §13): a FIFO, a symlink out of the directory, a directory, a file bigger than
any ledger, lines that are JSON but not ledger records. ``spotpatch-agent audit`` never hangs, never
crashes, never shows what lies outside; retention never follows a link and is not stopped by one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.audit import sink
from tests.conftest import make_repo

GOOD = "job_00000000000000aa"
CODE = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"


def cli(*args: str) -> subprocess.CompletedProcess:
    """``spotpatch-agent ARGS`` in a child process; a hang fails the test (timeout) instead of the run."""
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=60)


def record(seq: int, **fields) -> str:
    return json.dumps({"seq": seq, "recordedAtMs": 1, **fields})


START = record(1, type="job_start", jobId=GOOD, providerId="p", modelProfileId="m", mode="review", limits={},
               localChangesIncluded=False, targets=[{"index": 1, "path": "src/App.tsx", "line": 3,
                                                     "instructionChars": 1, "instructionSha256": "0" * 64}],
               contextFiles=[])


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": "x\n"})
    directory = root / ".git" / "spotpatch" / "audit"
    directory.mkdir(parents=True)
    outside = tmp_path / "outside.jsonl"
    outside.write_text(record(1, type="limit", limit="OUTSIDE-MARKER") + "\n")
    os.symlink(outside, directory / "job_00000000000000b1.jsonl")
    os.mkfifo(directory / "job_00000000000000b2.jsonl")
    (directory / "job_00000000000000b3.jsonl").mkdir()
    with (directory / "job_00000000000000b4.jsonl").open("wb") as big:  # sparse: cheap on disk
        big.truncate(getattr(sink, "MAX_LEDGER_BYTES", 16 << 20) + 1)
    # JSON lines of the wrong shape among good ones: no tool, a string range, a non-object, a missing limit.
    (directory / f"{GOOD}.jsonl").write_text("\n".join([
        START,
        record(2, type="tool_call", turn=1, callId="c", ok=True, durationMs=1),
        record(3, type="tool_call", turn=1, callId="c", tool="read_file", path="src/App.tsx", ok=True, durationMs=1,
               servedLines="1-9"),
        "[1, 2]", '"text"', record(4, type="limit"), record(5, type="nonsense"),
        record(6, type="tool_call", turn=1, callId="c", tool="read_file", path="src/App.tsx", ok=True, durationMs=1,
               servedLines={"start": 1, "end": 5}),
    ]) + "\n")
    return root, outside


def test_the_reader_never_hangs_crashes_or_follows_a_planted_file(planted) -> None:
    root, outside = planted
    listed = cli("audit", "--json", "--project", str(root))
    assert listed.returncode == 0, listed.stderr
    rows = {r["jobId"]: r for r in json.loads(listed.stdout)["ledgers"]}
    assert sorted(rows) == [GOOD, "job_00000000000000b4"]  # regular files only; the big one is not read
    assert rows["job_00000000000000b4"]["records"] == 0 and rows[GOOD]["records"] == 2
    shown = cli("audit", GOOD, "--project", str(root))
    assert shown.returncode == 0, shown.stderr
    assert "Target 1: read `src/App.tsx` lines 1–5 before the first write" in shown.stdout
    assert "6 unreadable line(s) skipped" in shown.stdout
    as_json = json.loads(cli("audit", GOOD, "--json", "--project", str(root)).stdout)
    assert [r["seq"] for r in as_json["records"]] == [1, 6] and as_json["skippedLines"] == 6
    for planted_id in ("job_00000000000000b1", "job_00000000000000b2", "job_00000000000000b3", "job_00000000000000b4"):
        done = cli("audit", planted_id, "--project", str(root))
        assert done.returncode == 1 and "OUTSIDE-MARKER" not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
    assert outside.read_text().count("OUTSIDE-MARKER") == 1


def test_read_ledger_refuses_what_is_not_a_regular_ledger_file(planted) -> None:
    root, _ = planted
    directory = root / ".git" / "spotpatch" / "audit"
    for name in ("b1", "b2", "b3", "b4"):
        with pytest.raises(OSError):
            sink.read_ledger(directory / f"job_00000000000000{name}.jsonl")
    records, skipped = sink.read_ledger(directory / f"{GOOD}.jsonl")
    assert [r["seq"] for r in records] == [1, 6] and skipped == 6


def test_the_table_never_prints_terminal_escapes_from_a_planted_ledger(planted) -> None:
    root, _ = planted
    directory = root / ".git" / "spotpatch" / "audit"
    (directory / "job_00000000000000cc.jsonl").write_text("\n".join([
        START, record(2, type="limit", limit="\x1b]52;c;cm0gLXJmIH4=\x07\x9b2J\u202e"),
        record(3, type="tool_call", turn=1, callId="c", tool="\x1b[2J", ok=True, durationMs=1),
    ]) + "\n")
    for args in (("audit", "job_00000000000000cc"), ("audit",)):
        out = cli(*args, "--project", str(root)).stdout
        assert "]52;" not in out and "[2J" not in out
        assert [c for c in out if c != "\n" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c == "\u202e")] == []
