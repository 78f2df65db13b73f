"""Project context (issue 16, part 1): size and build time, and the discovery calls it saves a careful model.

``python -m tests.bench.bench_context [--files 20000] [--runs 7]`` prints one row per project:

- ``demo``: the demo app (``spotpatch_agent/demo/app``) with the demo's two targets;
- ``multi-file``: the nested fixture of ``tests/context/_fixture.py`` (a package with its own configs);
- ``N files``: a generated repository of ``--files`` components in 100-file directories plus root configs.

For each: the bytes of the conventions summary, the samples and the excerpts, and the build time of
``build_prompt_context`` (median and max of ``--runs`` fresh builds, each with a new ``WorktreeContext`` so
nothing is cached), next to one ``git check-ignore`` process run the same way (the one git process a build
spawns; on a loaded machine process start-up dominates both). Then the discovery calls
(``list_files``/``search_text``) and ``read_file`` calls a scripted *careful model* makes before its first
edit: it looks up each fact its first message lacks (:func:`careful_model_calls`). This shows which facts
the message carries, not how a real model behaves.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from spotpatch_agent.context import PromptContext, build_prompt_context
from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import DEMO_TARGETS
from spotpatch_agent.engine.prompt import agent_task
from spotpatch_agent.protocol.models import Limits, SpotAnnotation
from spotpatch_agent.tools._git import tool_git
from spotpatch_agent.tools.context import WorktreeContext


def careful_model_calls(first_message: str, annotation: SpotAnnotation) -> dict[str, int]:
    """The calls a careful scripted model makes before editing, given ``first_message``: per distinct target
    directory, ``list_files`` for the formatter/linter configs, the tsconfig and the libraries (package.json)
    unless the message names them, and one for a sibling sample unless one is shown; per target without an
    excerpt, a ``read_file`` of its file (and a ``search_text`` when it has no usable source at all)."""
    discovery = reads = 0
    dirs = {t.source.file.rpartition("/")[0] if t.source else "" for t in annotation.targets}
    for _ in dirs:
        discovery += not any(k in first_message for k in (".editorconfig", "(Prettier)", "(ESLint)", "(Biome)",
                                                            "No formatter or linter configuration"))
        discovery += "compiler options that shape the code" not in first_message
        discovery += "libraries in use" not in first_message
        discovery += "## Same-directory samples" not in first_message
    for t in annotation.targets:
        block = first_message.split(f"## Target {t.index}\n", 1)[1].split("\n## ", 1)[0]
        if "Source excerpt" not in block:
            reads += 1
            discovery += t.source is None or "could not be found" in block
    return {"discovery": int(discovery), "read_file": reads}


def _make_big(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    for i in range(files // 100):
        d = root / "src" / f"m{i:04d}"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"F{j:03d}.tsx").write_text(f"// {i}\n// {j}\nexport const F{j} = () => <b>{i}</b>;\n")
    (root / "package.json").write_text('{"dependencies": {"react": "^18.3.1"}, "scripts": {"t": "tsc"}}\n')
    (root / "tsconfig.json").write_text('{"compilerOptions": {"jsx": "react-jsx", "strict": true}}\n')
    (root / ".editorconfig").write_text("root = true\n[*]\nindent_size = 2\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "big"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


def _annotation(targets: list[dict]) -> SpotAnnotation:
    return SpotAnnotation.model_validate({"annotationId": "bench", "pageUrl": "/", "targets": targets})


async def _measure(name: str, root: Path, annotation: SpotAnnotation, runs: int) -> None:
    times: list[float] = []
    git_times: list[float] = []
    context: PromptContext | None = None
    for _ in range(runs):  # alternating with the baseline: one git process of the same runner
        started = time.perf_counter()
        context = await build_prompt_context(WorktreeContext(root, Limits()), annotation)
        times.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await tool_git(root, "check-ignore", "--", "package.json", ok_codes=(0, 1))
        git_times.append((time.perf_counter() - started) * 1000)
    assert context is not None
    excerpts = sum(len((c.excerpt or "").encode()) for c in context.locations.values())
    summary, samples = len(context.conventions.summary.encode()), len(context.conventions.samples.encode())
    with_ctx = agent_task(annotation, max_turns=24, max_tool_calls=48, context=context)
    without = agent_task(annotation, max_turns=24, max_tool_calls=48)
    a, b = careful_model_calls(without, annotation), careful_model_calls(with_ctx, annotation)
    print(f"| {name} | {len(context.files)} | {summary:,} | {samples:,} | {excerpts:,} | "
          f"{len(with_ctx.encode()):,} vs {len(without.encode()):,} | "
          f"{statistics.median(times):.1f} / {max(times):.1f} | {statistics.median(git_times):.1f} | "
          f"{a['discovery']} + {a['read_file']} → {b['discovery']} + {b['read_file']} |")


async def _main(files: int, runs: int) -> None:
    from tests.context._fixture import make_project

    print("| project | files offered | summary B | samples B | excerpts B | first message B (with vs without) "
          "| build ms (median / max) | one `git check-ignore` ms (median) "
          "| careful model: discovery + read_file calls (without → with) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        demo = make_demo_project(Path(tmp) / "demo")
        await _measure("demo", demo, _annotation(DEMO_TARGETS), runs)
        multi = make_project(Path(tmp) / "multi")
        await _measure("multi-file", multi, _annotation([
            {"index": 1, "instruction": "a", "source": {"file": "packages/app/src/components/Button.tsx", "line": 5},
             "element": {"tagName": "button"}},
            {"index": 2, "instruction": "b", "source": {"file": "packages/app/src/components/Card.tsx", "line": 2},
             "element": {"tagName": "div"}}]), runs)
        big = _make_big(Path(tmp) / "big", files)
        await _measure(f"{files:,} files", big, _annotation([
            {"index": 1, "instruction": "a", "source": {"file": "src/m0100/F050.tsx", "line": 3},
             "element": {"tagName": "b"}}]), runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    anyio.run(_main, args.files, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
