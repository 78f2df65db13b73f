"""Default limits of docs/design.md §4 and their hard caps (trusted config may only lower, never exceed a cap)."""

from __future__ import annotations

#: name -> (default, hard cap). Units are in the name: *Sec seconds, *Bytes bytes, *Lines lines.
LIMITS: dict[str, tuple[int, int]] = {
    "maxTargets": (8, 8),
    "maxInstructionChars": (2000, 2000),
    "maxTurns": (24, 64),
    "maxToolCalls": (80, 200),
    #: Repeats of an identical failed tool call (same tool and arguments, files unchanged) answered without
    #: running it; one more ends the job (the stuck-call guard, engine/loop.py).
    "maxRepeatedFailedCalls": (1, 3),
    "jobTimeoutSec": (600, 3600),
    "toolTimeoutSec": (30, 120),
    "checkTimeoutSec": (300, 1800),
    "readMaxLines": (400, 2000),
    "readMaxBytes": (64 * 1024, 256 * 1024),
    "listMaxResults": (2000, 10000),
    "searchMaxResults": (200, 1000),
    "editableFileMaxBytes": (1024 * 1024, 4 * 1024 * 1024),
    "maxChangedFiles": (20, 100),
    "maxDiffBytes": (256 * 1024, 2 * 1024 * 1024),
    "localSnapshotMaxFiles": (200, 2000),
    "localSnapshotMaxBytes": (8 * 1024 * 1024, 64 * 1024 * 1024),
    "checkOutputMaxBytes": (64 * 1024, 1024 * 1024),
    "writeJobsPerProject": (1, 1),
}

#: Largest JSON-RPC frame body the engine accepts, in bytes.
MAX_FRAME_BYTES = 8 * 1024 * 1024
