"""Part 2 of issue 16: the copy prompt stands on its own (checked locations, excerpts, wording)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotpatch_agent.context import build_prompt_context
from spotpatch_agent.engine.locations import check_tags, lines_reader
from spotpatch_agent.engine.prompt import agent_task
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.models import Limits, PromptRenderParams, SpotAnnotation, TrustedConfig
from spotpatch_agent.tools.context import WorktreeContext
from spotpatch_agent.tools.read_file import ReadFileArgs, read_file
from tests.conftest import make_repo

CANARY = "sk-excerptcanary-5b8e2d41c9"
SOURCE = "".join(f"const line{i} = {i};\n" for i in range(1, 31)).replace("line20 = 20", f"key = '{CANARY}'")
FILES = {"src/App.tsx": SOURCE, ".env": "A=1\n", "src/short.ts": "x\n", ".gitignore": "secret.txt\n"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "proj", FILES)
    (root / "secret.txt").write_text("ignored\n")
    return root


def ann(*sources: tuple[str, int], element: bool = True, page: str = "/cart") -> SpotAnnotation:
    return SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": page, "targets": [
        {"index": i, "instruction": f"Do {i}", "source": {"file": f, "line": line},
         **({"element": {"tagName": "span", "text": "$19.5"}} if element else {})}
        for i, (f, line) in enumerate(sources, start=1)]})


async def render(root: Path, annotation: SpotAnnotation):
    service = EngineService(send_event=lambda e: None)
    async with service.running():
        await service.configure(root, TrustedConfig())
        return await service.prompt_render(PromptRenderParams(annotation=annotation))


@pytest.mark.anyio
async def test_excerpt_numbering_equals_read_file(project: Path) -> None:
    result = await render(project, ann(("src/App.tsx", 12)))
    assert result.warnings is None
    ctx = WorktreeContext(project, Limits())
    tool = await read_file(ctx, ReadFileArgs.model_validate({"path": "src/App.tsx", "startLine": 6, "endLine": 20}))
    rows = tool.output.split("\n")
    assert rows[0] == "src/App.tsx (lines 6-20 of 30)"
    excerpt = "\n".join(r for r in rows if not r.startswith("["))
    assert f"```\n{excerpt}\n```" in result.text  # header and rows exactly as read_file gives them
    assert "   12| const line12 = 12;" in result.text


@pytest.mark.anyio
async def test_a_canary_in_an_excerpt_is_redacted(project: Path) -> None:
    REDACTOR.add_secret(CANARY)  # as the engine does for a provider key
    result = await render(project, ann(("src/App.tsx", 18)))
    assert CANARY not in result.text
    assert "   20| const key = '[REDACTED]';" in result.text


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "code", "says"), [
    (("src/Nope.tsx", 3), "location-missing", "the file does not exist"),
    (("src/App.tsx", 9999), "line-past-end", "line 9999 is past the end of the file (30 lines)"),
    (("/etc/passwd", 1), "location-invalid", "not a relative path inside the project"),
    (("../outside.tsx", 1), "location-invalid", "not a relative path inside the project"),
    ((".env", 1), "location-protected", "protected by SpotPatch's path policy"),
    (("secret.txt", 1), "location-unreadable", "ignored by git"),
])
async def test_each_invalid_location_is_said_plainly_and_warned(project: Path, source, code, says) -> None:
    result = await render(project, ann(source, ("src/App.tsx", 3)))
    assert [(w.index, w.code) for w in result.warnings or []] == [(1, code)]
    assert says in result.warnings[0].message and says in result.text
    block = result.text.split("## Target 2")[0]
    assert "could not be found" in block and "```" not in block  # no contents of that file
    assert "A=1" not in result.text and "root:" not in result.text and "ignored" not in block.replace(
        "ignored by git", "")
    assert "    3| const line3 = 3;" in result.text  # the valid target still gets its excerpt
    dumped = result.model_dump(by_alias=True, exclude_none=True)
    assert dumped["warnings"][0]["code"] == code


@pytest.mark.anyio
async def test_page_wording_vs_terminal_wording(project: Path) -> None:
    page = await render(project, ann(("src/App.tsx", 5), page="/cart"))
    assert 'picked on the page "/cart"' in page.text and "Element: <span>" in page.text
    terminal = await render(project, ann(("src/App.tsx", 5), element=False))
    assert "picked on the page" not in terminal.text and "Element" not in terminal.text
    assert "<unknown>" not in terminal.text and "find it from the element" not in terminal.text
    assert terminal.text.startswith("Change the source code of this Vite project at 1 source location.")


@pytest.mark.anyio
async def test_first_message_is_the_copy_prompt_plus_the_working_rules(project: Path) -> None:
    annotation = ann(("src/App.tsx", 5))
    copy = await render(project, annotation)
    ctx = WorktreeContext(project, Limits())
    context = await build_prompt_context(ctx, annotation)
    tag_checks = await check_tags(lines_reader(ctx), annotation.targets)  # as the job does (engine/job.py)
    task = agent_task(annotation, max_turns=5, max_tool_calls=9, context=context, tag_checks=tag_checks)
    assert task.startswith(copy.text)
    assert "Budget: at most 5 turns" in task[len(copy.text):]


@pytest.mark.anyio
async def test_a_project_that_is_not_a_git_repository_reads_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "src").mkdir(parents=True)
    (plain / "src/App.tsx").write_text(SOURCE)
    (plain / "package.json").write_text('{"dependencies": {"react": "^18.0.0"}}')
    result = await render(plain, ann(("src/App.tsx", 12)))
    assert result.warnings is None and "Source: src/App.tsx:12:1" in result.text
    assert "excerpt" not in result.text and "react" not in result.text  # the ignore policy cannot apply


@pytest.mark.anyio
async def test_a_line_already_shown_is_not_repeated(project: Path) -> None:
    result = await render(project, ann(("src/App.tsx", 12), ("src/App.tsx", 15), ("src/App.tsx", 28)))
    assert result.text.count("   12| const line12 = 12;") == 1
    assert "Source excerpt: line 15 is in Target 1's excerpt above." in result.text
    assert "   28| const line28 = 28;" in result.text.split("## Target 3")[1]  # outside it: its own excerpt


@pytest.mark.anyio
async def test_an_excerpt_never_shows_a_whole_file_alone_or_with_the_excerpts_before_it(project: Path) -> None:
    """No whole source file reaches the browser (the copy prompt is sent to the page): a short file's
    excerpt leaves out the line farthest from the target, two targets' excerpts of one file never add up
    to all of it, and a one-line file gets no excerpt at all (the prompt says so)."""
    (project / "src/ten.ts").write_text("".join(f"const t{i} = {i};\n" for i in range(1, 11)))
    (project / "src/fifteen.ts").write_text("".join(f"const f{i} = {i};\n" for i in range(1, 16)))
    result = await render(project, ann(("src/ten.ts", 5), ("src/fifteen.ts", 1), ("src/fifteen.ts", 15),
                                       ("src/short.ts", 1)))
    assert "(lines 1-9 of 10)" in result.text and "const t10 = 10;" not in result.text
    assert "(lines 1-9 of 15)" in result.text  # line 1: 1..9, the window's own end
    assert "(lines 11-15 of 15)" in result.text and "const f10 = 10;" not in result.text
    assert "src/short.ts (lines" not in result.text
    assert "Source excerpt: not shown (it would show the whole file; read it with read_file)." in result.text
    assert result.warnings is None


@pytest.mark.parametrize(("line", "total", "already", "window"), [
    (5, 10, set(), (1, 9)), (1, 1, set(), None), (2, 2, set(), (2, 2)), (1, 2, {2}, None),
    (12, 30, set(), (6, 20)), (15, 15, set(range(1, 10)), (11, 15)),
])
def test_the_excerpt_window(line: int, total: int, already: set[int], window: tuple[int, int] | None) -> None:
    from spotpatch_agent.context.excerpt import excerpt_window

    assert excerpt_window(line, total, already) == window


def test_an_absolute_location_from_the_page_reaches_neither_the_model_nor_the_clipboard_whole(tmp_path) -> None:
    """Invariant 3: a page may send an absolute source path (a locator or a hostile page); the prompt keeps its last
    segments only (found via the MCP tests of issue 28: the agent's first message echoed it)."""
    from spotpatch_agent.engine.prompt import render_prompt
    from spotpatch_agent.protocol.models import SpotAnnotation

    absolute = str(tmp_path / "secret-home" / "repo" / "src" / "App.tsx")
    annotation = SpotAnnotation.model_validate({"annotationId": "a", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "x", "source": {"file": absolute, "line": 1}}]})
    text = render_prompt(annotation).text
    assert str(tmp_path) not in text and "secret-home" not in text
