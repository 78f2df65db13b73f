"""``python -m tests.bench.bench_tools``: file-tool overhead on a 20,000-file repository (issue 5).

Generates a git repository of ``--files`` small text files in nested directories (one commit) in a temp
directory, then times, in the same run and in alternating order:

- ``list_files {glob: "**", maxResults: 2000}`` through :class:`ToolExecutor` (cache dropped before each
  run, so every run lists the worktree again) vs ``git ls-files -z --cached --others --exclude-standard``;
- ``search_text {query: "needle", glob: null, maxResults: 200}`` through the executor (cache dropped) vs
  ``git grep -F -n -I -z --untracked --exclude-standard -e needle``.

Prints the median of ``--runs`` runs of each, and the overhead ratio (target < 1.5×). ``--strict`` exits 1
when a target is missed. Not collected by pytest (see ``conftest.py``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools.executor import ToolExecutor

TARGET_RATIO = 1.5


def make_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for i in range(files):
        rel = Path(f"pkg{i % 40:02d}/mod{(i // 40) % 25:02d}/part{(i // 1000) % 4}/file{i:05d}.ts")
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f"// file {i}\nexport const value{i} = {i};\n"
        if i % 67 == 0:
            body += f"export const needle{i} = 'needle';\n"
        path.write_text(body + f"export function f() {{\n  return value{i};\n}}\n")
    (root / ".gitignore").write_text("node_modules\n")
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x",
           "PATH": "/usr/bin:/bin:/usr/local/bin"}
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "bench"], cwd=root, check=True, env=env)


async def _timed_tool(executor: ToolExecutor, name: str, args: str) -> tuple[float, str]:
    executor.invalidate()  # no cached listing or read: measure the real work
    started = time.perf_counter()
    result = await executor.execute(name, args)
    elapsed = time.perf_counter() - started
    assert result.ok, result.output
    return elapsed, result.output.splitlines()[0]


async def _timed_git(root: Path, *args: str) -> float:
    started = time.perf_counter()
    out = await anyio.run_process(["git", *args], cwd=root, check=False)
    elapsed = time.perf_counter() - started
    assert out.returncode in (0, 1)
    return elapsed


async def bench(root: Path, runs: int) -> list[tuple[str, float, float, str]]:
    executor = ToolExecutor(root, Limits(), tools=("list_files", "search_text"))
    cases = [
        ("list_files", '{"glob": "**", "maxResults": 2000}',
         ("ls-files", "-z", "--cached", "--others", "--exclude-standard")),
        ("search_text", '{"query": "needle", "glob": null, "maxResults": 200}',
         ("grep", "-F", "-n", "-I", "-z", "--untracked", "--exclude-standard", "-e", "needle")),
    ]
    rows = []
    for name, args, git_args in cases:
        await _timed_tool(executor, name, args)  # warm-up (page cache, git index)
        await _timed_git(root, *git_args)
        tool_times: list[float] = []
        git_times: list[float] = []
        header = ""
        for i in range(runs):
            if i % 2:
                git_times.append(await _timed_git(root, *git_args))
                t, header = await _timed_tool(executor, name, args)
                tool_times.append(t)
            else:
                t, header = await _timed_tool(executor, name, args)
                tool_times.append(t)
                git_times.append(await _timed_git(root, *git_args))
        rows.append((name, statistics.median(tool_times), statistics.median(git_times), header))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_tools", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spotpatch-bench-tools-") as tmp:
        root = Path(tmp) / "repo"
        started = time.perf_counter()
        make_repo(root, ns.files)
        print(f"repository: {ns.files} files, generated and committed in {time.perf_counter() - started:.1f} s")
        rows = anyio.run(bench, root, ns.runs)
    missed = False
    print(f"{'tool':<12} {'tool ms':>9} {'git ms':>9} {'ratio':>7}  target  result   (median of {ns.runs})")
    for name, tool_s, git_s, header in rows:
        ratio = tool_s / git_s if git_s else float("inf")
        ok = ratio < TARGET_RATIO
        missed = missed or not ok
        print(f"{name:<12} {tool_s * 1000:9.1f} {git_s * 1000:9.1f} {ratio:6.2f}x  <{TARGET_RATIO}x  "
              f"{'PASS' if ok else 'FAIL'}    {header}")
    return 1 if (missed and ns.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
