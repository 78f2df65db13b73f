"""A scripted multi-file job on the demo app (crash-recovery and apply-concurrency tests, issue 6).

The model modifies two files (``replace_text``), creates one whose name has non-ASCII characters and a
space, and deletes one (``apply_patch``), in one turn; then it stops. ``TOUCHED`` lists the four paths in
git's order (the order Apply and Revert write them, so ``after-file-<k>`` names a known file).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import GIT_IDENTITY
from tests.engine_client import EngineProcess
from tests.support.serve import config_for, create_job

HEADER = "src/components/Header.tsx"
ITEMS = "src/components/ItemList.tsx"
README = "README.md"
NOTES = "src/notes/ünï côde.md"
#: Every path the job touches, in git's (byte) order.
TOUCHED = [README, HEADER, ITEMS, NOTES]
NOTES_TEXT = "# Nötes\nprice shown with two decimals\n"

_PATCH = (
    f"diff --git a/{NOTES} b/{NOTES}\nnew file mode 100644\n--- /dev/null\n+++ b/{NOTES}\n"
    "@@ -0,0 +1,2 @@\n+# Nötes\n+price shown with two decimals\n"
    f"diff --git a/{README} b/{README}\ndeleted file mode 100644\n--- a/{README}\n+++ /dev/null\n"
    "@@ -1,2 +0,0 @@\n-# SpotPatch demo\n"
    "-A tiny Vite + React shop page used by `spotpatch-agent demo`; run `npm install && npm run dev` to see it.\n"
)


def multi_file_turns(*, before_edit: Callable[[], None] | None = None) -> list[Any]:
    """The scripted turns; ``before_edit`` runs when the editing turn is requested (the job is running)."""
    edit_turn = {
        "text": "Editing the header, the list, adding notes and removing the README.",
        "toolCalls": [
            {"id": "call_h", "name": "replace_text",
             "arguments": {"path": HEADER, "oldText": "<h1>{title}</h1>",
                           "newText": '<h1 className="title">{title}</h1>'}},
            {"id": "call_i", "name": "replace_text",
             "arguments": {"path": ITEMS, "oldText": '<ul className="items">',
                           "newText": '<ul className="items list">'}},
            {"id": "call_p", "name": "apply_patch", "arguments": {"patch": _PATCH}},
        ],
    }

    def edit(_body: dict[str, Any]) -> dict[str, Any]:
        if before_edit is not None:
            before_edit()
        return edit_turn

    return [edit, {"text": "Done: four files changed.", "finishReason": "stop"}]


def expected_after(root: Path) -> dict[str, str | None]:
    """SHA-256 of each touched path once the job is applied to ``root`` as it is now (``None`` = absent)."""
    header = (root / HEADER).read_text("utf-8").replace("<h1>{title}</h1>", '<h1 className="title">{title}</h1>')
    items = (root / ITEMS).read_text("utf-8").replace('<ul className="items">', '<ul className="items list">')
    return {README: None, HEADER: sha(header.encode()), ITEMS: sha(items.encode()), NOTES: sha(NOTES_TEXT.encode())}


def run_to_review(eng: EngineProcess, project: Path, server: Any, *, consent: bool = False) -> str:
    """initialize, job/create (with ``localChangesConsent`` when ``consent``) and wait for awaiting-review."""
    eng.initialize(project, config_for(server))
    if consent:
        from tests.support.annotations import demo_annotation

        job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1",
                                         "localChangesConsent": True})["jobId"]
    else:
        job_id = create_job(eng)
    final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
    assert final["status"] == "awaiting-review", eng.events(job_id)
    return job_id


def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def path_hashes(root: Path, paths: list[str] = TOUCHED) -> dict[str, str | None]:
    """SHA-256 of each path's bytes (``None`` = absent)."""
    return {p: sha((root / p).read_bytes()) if (root / p).is_file() else None for p in paths}


def quiet_git(root: Path, *args: str) -> bytes:
    """``git args`` that never refreshes (writes) the index: ``GIT_OPTIONAL_LOCKS=0``."""
    env = {**os.environ, **GIT_IDENTITY, "GIT_OPTIONAL_LOCKS": "0"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True).stdout


def repo_state(root: Path) -> dict[str, Any]:
    """Index bytes, staged diff, HEAD and refs: what Apply, Revert and recovery must never change."""
    return {
        "index": (root / ".git" / "index").read_bytes(),
        "cached": quiet_git(root, "diff", "--cached", "--binary"),
        "head": quiet_git(root, "rev-parse", "HEAD"),
        "refs": quiet_git(root, "for-each-ref"),
    }


def tree_files(root: Path) -> dict[str, bytes]:
    """Every working file (``.git`` excluded): relative POSIX path → bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(root).parts}
