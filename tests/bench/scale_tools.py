"""Per-call tool costs on one generated repository, for the scale benchmark (issue 17).

``tool_rows(repo, label)`` creates a real job worktree of ``repo`` (``create_worktree``, as a job does), drives
the tools through :class:`ToolExecutor` on it and returns one row per measurement:

- ``list_files {glob: "**"}`` vs ``git ls-files -z --cached --others --exclude-standard`` (baseline);
- ``search_text {query: SEARCH_NEEDLE}`` vs ``git grep -F -n -I -z --untracked --exclude-standard`` (baseline);
- one ``replace_text`` on ``EDIT_PATH`` and one ``apply_patch`` on it (raw ms, no baseline: the runner compares
  the largest repository with the smallest).

Each figure is the median of ``runs`` runs; tool and git runs alternate. Listing and search drop the executor's
cached listing before each run (as a write would), so every run lists the worktree again. Each edit is undone by
the next run (A→B, B→A, …), so every run edits the same file the same way. ``python -m tests.bench.scale_tools
REPO`` prints the rows for one repository.
"""

from __future__ import annotations

import json
import secrets
import statistics
import sys
import time
from pathlib import Path

import anyio

from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.removal import remove_worktree
from tests.bench.scale_repo import EDIT_NEEDLE, EDIT_PATH, SEARCH_NEEDLE

_LS = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
_GREP = ("grep", "-F", "-n", "-I", "-z", "--untracked", "--exclude-standard", "-e", SEARCH_NEEDLE)


def tool_rows(repo: Path, label: str, *, runs: int = 7) -> list[dict]:
    """Rows ``{"metric", "value_ms", "baseline_ms", "ratio"}`` for ``repo`` (metric names carry ``label``)."""
    return anyio.run(_rows, Path(repo), label, runs)


async def _rows(repo: Path, label: str, runs: int) -> list[dict]:
    wt = await create_worktree(repo, f"bench-{secrets.token_hex(4)}")
    try:
        executor = ToolExecutor(wt.path, Limits())
        rows = [
            await _versus(executor, wt.path, f"list_files '**' vs git ls-files ({label})", "list_files",
                          {"glob": "**", "maxResults": 2000}, _LS, runs),
            await _versus(executor, wt.path, f"search_text vs git grep -F -n ({label})", "search_text",
                          {"query": SEARCH_NEEDLE, "glob": None, "maxResults": 200}, _GREP, runs),
        ]
        rows.append(_row(f"one replace_text ({label})", await _replace_times(executor, runs), None))
        rows.append(_row(f"one apply_patch ({label})", await _patch_times(executor, wt.path, runs), None))
        return rows
    finally:
        await remove_worktree(repo, wt)


def _row(metric: str, times: list[float], baseline: list[float] | None) -> dict:
    value = statistics.median(times) * 1000
    base = statistics.median(baseline) * 1000 if baseline else None
    return {"metric": metric, "value_ms": round(value, 1), "baseline_ms": None if base is None else round(base, 1),
            "ratio": None if not base else round(value / base, 2)}


async def _tool(executor: ToolExecutor, name: str, args: dict, *, fresh: bool = True) -> float:
    if fresh:
        executor.invalidate()  # no cached listing or read: measure the real work
    started = time.perf_counter()
    result = await executor.execute(name, json.dumps(args))
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"{name} failed in the benchmark: {result.output[:200]}")
    return elapsed


async def _git(root: Path, args: tuple[str, ...]) -> float:
    started = time.perf_counter()
    out = await anyio.run_process(["git", "-c", "core.fsmonitor=false", *args], cwd=root, check=False)
    elapsed = time.perf_counter() - started
    if out.returncode not in (0, 1):
        raise RuntimeError(f"git {args[0]} failed in the benchmark")
    return elapsed


async def _versus(executor: ToolExecutor, root: Path, metric: str, name: str, args: dict,
                  git_args: tuple[str, ...], runs: int) -> dict:
    await _tool(executor, name, args)  # warm-up (page cache, git index)
    await _git(root, git_args)
    tool_times: list[float] = []
    git_times: list[float] = []
    for i in range(runs):
        if i % 2:
            git_times.append(await _git(root, git_args))
            tool_times.append(await _tool(executor, name, args))
        else:
            tool_times.append(await _tool(executor, name, args))
            git_times.append(await _git(root, git_args))
    return _row(metric, tool_times, git_times)


async def _replace_times(executor: ToolExecutor, runs: int) -> list[float]:
    texts = (EDIT_NEEDLE, EDIT_NEEDLE + " (edited)")
    times: list[float] = []
    for i in range(runs + 1):  # the first run is a warm-up
        old, new = texts[i % 2], texts[(i + 1) % 2]
        elapsed = await _tool(executor, "replace_text", {"path": EDIT_PATH, "oldText": old, "newText": new},
                              fresh=False)
        if i:
            times.append(elapsed)
    if (runs + 1) % 2:
        await _tool(executor, "replace_text", {"path": EDIT_PATH, "oldText": texts[1], "newText": texts[0]},
                    fresh=False)
    return times


def _patch(before: str, after: str) -> str:
    old = f"      <h1>{before}</h1>"
    new = f"      <h1>{after}</h1>"
    return (f"diff --git a/{EDIT_PATH} b/{EDIT_PATH}\n--- a/{EDIT_PATH}\n+++ b/{EDIT_PATH}\n"
            f"@@ -5,3 +5,3 @@\n     <main>\n-{old}\n+{new}\n       <Card title=\"first\" />\n")


async def _patch_times(executor: ToolExecutor, root: Path, runs: int) -> list[float]:
    texts = (EDIT_NEEDLE, EDIT_NEEDLE + " (patched)")
    times: list[float] = []
    for i in range(runs + 1):  # the first run is a warm-up
        patch = _patch(texts[i % 2], texts[(i + 1) % 2])
        elapsed = await _tool(executor, "apply_patch", {"patch": patch}, fresh=False)
        if i:
            times.append(elapsed)
    if (runs + 1) % 2:
        await _tool(executor, "apply_patch", {"patch": _patch(texts[1], texts[0])}, fresh=False)
    return times


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    runs = int(argv[1]) if len(argv) > 1 else 7
    for row in tool_rows(repo, repo.name, runs=runs):
        ratio = "" if row["ratio"] is None else f"{row['ratio']:6.2f}x"
        base = "" if row["baseline_ms"] is None else f"{row['baseline_ms']:9.1f}"
        print(f"{row['metric']:<52} {row['value_ms']:9.1f} {base:>9} {ratio}")
    return 0


if __name__ == "__main__":  # pragma: no cover - manual use
    sys.exit(main(sys.argv[1:]))
