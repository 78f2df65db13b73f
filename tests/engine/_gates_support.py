"""A small harness for the validation-order and mode tests: one real job through the in-process
:class:`EngineService`, the real Chat adapter and a real local scripted provider, with real subprocess
checks (``sys.executable -c …``)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.models import (
    DiffResult,
    JobCreateParams,
    JobIdParams,
    JobSnapshot,
    TrustedConfig,
)
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_GATES_TEST_KEY"
APP = 'export const App = () => <button className="a">Go</button>;\n'
OLD = "export const old = true;\n"
PACKAGE = '{\n  "name": "demo",\n  "version": "1.0.0"\n}\n'
FILES = {"src/App.tsx": APP, "src/old.ts": OLD, "package.json": PACKAGE, ".gitignore": "node_modules\n"}
TARGET = annotation(target())
DONE = {"text": "Done.", "finishReason": "stop"}


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def edit(cid: str, old: str = ">Go<", new: str = ">Start<", path: str = "src/App.tsx") -> dict:
    return {"toolCalls": [call(cid, "replace_text", {"path": path, "oldText": old, "newText": new})]}


def run_check(cid: str, check_id: str) -> dict:
    return {"toolCalls": [call(cid, "run_check", {"checkId": check_id})]}


DELETE_OLD = {"toolCalls": [call("del", "apply_patch", {"patch": (
    "diff --git a/src/old.ts b/src/old.ts\ndeleted file mode 100644\n--- a/src/old.ts\n+++ /dev/null\n"
    "@@ -1 +0,0 @@\n-export const old = true;\n")})]}


def py_check(check_id: str, code: str, *, required: bool = True, **extra: Any) -> dict:
    """A trusted check running ``python -c code`` in the worktree."""
    return {"id": check_id, "name": f"Check {check_id}", "command": sys.executable, "args": ["-c", code],
            "required": required, **extra}


#: counter directory → (its bound datagram socket, the runs received so far)
_COUNTERS: dict[Path, list[Any]] = {}


def count_run_code(counter: Path) -> str:
    """Python that tells ``counter`` (see :func:`counting_check`) one more run happened."""
    fifo = str(counter / "f")
    return f"import os; _fd = os.open({fifo!r}, os.O_WRONLY | os.O_NONBLOCK); os.write(_fd, b'r'); os.close(_fd)"


def counting_check(check_id: str, counter: Path, *, fail_if: str | None = None, required: bool = True,
                   code: str = "print('ran')") -> dict:
    """A check that writes one byte per run to a FIFO in ``counter`` and runs ``code``; it fails when
    ``src/App.tsx`` contains ``fail_if``. It runs confined like any check: the host cannot see a file it
    writes outside the worktree, and the sandbox refuses Unix sockets, so it writes to a FIFO in ``counter``,
    a directory the host keeps open for reading and lists in the check's ``readPaths`` (a read-only view
    still lets a FIFO be written: docs/security.md, *What is still not confined*)."""
    counter_socket(counter)
    full = count_run_code(counter) + "\n" + code
    if fail_if is not None:
        full += f"\nimport sys; sys.exit(1 if {fail_if!r} in open('src/App.tsx').read() else 0)"
    return py_check(check_id, full, required=required, readPaths=[str(counter)])


def counter_socket(counter: Path) -> None:
    """Make ``counter``'s FIFO and hold its read end open (non-blocking), once per counter."""
    if counter in _COUNTERS:
        return
    counter.mkdir(parents=True, exist_ok=True)
    os.mkfifo(counter / "f")
    fd = os.open(counter / "f", os.O_RDONLY | os.O_NONBLOCK)
    _COUNTERS[counter] = [fd, 0]


def runs(counter: Path) -> int:
    """How many runs ``counter`` has heard of (all bytes written before this call)."""
    entry = _COUNTERS.get(counter)
    if entry is None:
        return 0
    while True:
        try:
            data = os.read(entry[0], 4096)
        except BlockingIOError:
            return entry[1]
        if not data:
            return entry[1]
        entry[1] += len(data)


def new_repo(template: Path, dest: Path) -> Path:
    """A copy of the one-commit template repository (faster than a fresh ``git init`` + commit)."""
    shutil.copytree(template, dest, symlinks=True)
    return dest


def template_repo(base: Path) -> Path:
    return make_repo(base / "template", FILES)


@dataclass
class JobRun:
    """The outcome of one ``job/create``: the final snapshot and diff, or the refusal."""

    snap: JobSnapshot | None
    diff: DiffResult | None
    events: list[dict]
    server: ScriptedProviderServer
    refused: SpotPatchError | None = None
    statuses: list[str] = field(default_factory=list)

    def kinds(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["kind"] == kind]

    def offered_tools(self) -> list[str]:
        return [t["function"]["name"] for t in self.server.requests[0].get("tools", [])]


async def run_one_job(
    root: Path, turns: Sequence[Any], *, checks: Sequence[dict] = (), modes: dict | None = None,
    request: dict | None = None, before_job: Callable[[EngineService], Awaitable[None]] | None = None,
    sandbox: str | None = None,
) -> JobRun:
    """Configure an engine on ``root``, create one job (``request`` adds e.g. ``applyMode``), wait for its run
    to end (including an automatic Apply) and return what the client would see."""
    events: list[dict] = []
    with ScriptedProviderServer(list(turns)) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
            "checks": list(checks), "modes": modes or {}, **({"sandbox": sandbox} if sandbox else {})})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            if before_job is not None:
                await before_job(service)
            params = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m", **(request or {})})
            try:
                snap = await service.job_create(params)
            except SpotPatchError as exc:
                return JobRun(None, None, events, server, refused=exc)
            await service.wait_job(snap.job_id)
            ids = JobIdParams(job_id=snap.job_id)
            snap, diff = await service.job_get(ids), await service.job_diff(ids)
    statuses = [e["status"] for e in events if e["kind"] == "status"]
    return JobRun(snap, diff, events, server, statuses=statuses)
