"""edit_lines and line anchors (issue 27 part 2; docs/design.md §6 "Edit formats"): an inclusive line range
named by two anchors verified against the current bytes, through replace_text's path policy and checked write."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools import ToolExecutor
from spotpatch_agent.tools.anchors import anchor, line_hash, parse_anchor
from tests.conftest import git
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

APP = "import x from 'y';\n\nexport function App() {\n  return <p>{price}</p>;\n}\n"


def lines(text: str) -> list[str]:
    return text.removeprefix("\ufeff").split("\n")


def a(text: str, number: int) -> str:
    """The anchor of line ``number`` of ``text`` (what read_file shows for it)."""
    return anchor(number, lines(text)[number - 1].removesuffix("\r"))


def edit(path: str, start: str, end: str, new: str) -> str:
    return call(path=path, startAnchor=start, endAnchor=end, newText=new)


@pytest.fixture
def anchored(repo_factory):
    def factory(files: dict[str, str | bytes], **limits: int) -> tuple[Path, ToolExecutor]:
        root = repo_factory(files)
        return root, ToolExecutor(root, Limits(**limits), edit_format="anchors")
    return factory


def test_anchor_format() -> None:
    assert re.fullmatch(r"12#[A-Z2-7]{2}", anchor(12, "  return x;"))
    assert line_hash("a") != line_hash("b") and line_hash("a") == line_hash("a")
    assert parse_anchor(" 12#kt ") == (12, "KT")
    assert parse_anchor("   12#KT|   return x;") == (12, "KT")  # a copied read_file row
    for bad in ("12", "#KT", "12#K", "12#K1", "12:KT", "x12#KT", "12#KTX"):  # "12": see the bare-number test
        assert parse_anchor(bad) is None, bad


async def test_read_file_and_search_text_show_anchors(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    read = await executor.execute("read_file", call(path="src/App.tsx", startLine=None, endLine=None))
    assert read.ok
    assert f"    {a(APP, 4)}|   return <p>{{price}}</p>;" in read.output.split("\n")
    assert read.output.startswith("src/App.tsx (lines 1-5 of 5)")  # the header the ledger parses is unchanged
    found = await executor.execute("search_text", call(query="price", glob=None, maxResults=5))
    assert found.output.split("\n")[1] == f"src/App.tsx:{a(APP, 4)}:   return <p>{{price}}</p>;"


async def test_replace_format_shows_no_anchors(make_executor) -> None:
    root, executor = make_executor({"src/App.tsx": APP})
    read = await executor.execute("read_file", call(path="src/App.tsx", startLine=4, endLine=4))
    assert "    4|   return <p>{price}</p>;" in read.output and "#" not in read.output


async def test_exact_range_is_replaced_and_the_version_bumps(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    new = "export function App() {\n  return <p>{price.toFixed(2)}</p>;\n}\n"
    result = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 3), a(APP, 5), new))
    assert (result.ok, result.wrote, result.path) == (True, True, "src/App.tsx")
    after = APP.replace("{price}", "{price.toFixed(2)}")
    assert (root / "src/App.tsx").read_text() == after
    assert executor.version == 1
    assert result.output.startswith("Replaced lines 3-5 of src/App.tsx with 3 line(s), now lines 3-5.")
    assert f"{a(after, 4)}|   return <p>{{price.toFixed(2)}}</p>;" in result.output
    assert "diff --git a/src/App.tsx" in git(root, "diff")


async def test_single_line_insert_and_delete_and_shift_note(anchored) -> None:
    root, executor = anchored({"src/a.ts": "one\ntwo\nthree\n"})
    text = "one\ntwo\nthree\n"
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 2), a(text, 2), "two\ntwo and a half"))
    assert result.ok and (root / "src/a.ts").read_text() == "one\ntwo\ntwo and a half\nthree\n"
    assert "Lines after line 2 moved by +1" in result.output
    text = (root / "src/a.ts").read_text()
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 1), a(text, 2), ""))
    assert result.ok and (root / "src/a.ts").read_text() == "two and a half\nthree\n"
    assert result.output.startswith("Removed lines 1-2 of src/a.ts. Lines after line 2 moved by -2")


async def test_stale_hash_is_refused_with_the_current_anchors(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    stale = anchor(4, "  return <p>{cost}</p>;")  # what the line held before someone changed it
    result = await executor.execute("edit_lines", edit("src/App.tsx", stale, stale, "  return null;"))
    assert (result.ok, result.code, result.retryable, result.wrote) == (False, "PATCH_REJECTED", True, False)
    assert f"startAnchor {stale} is stale: line 4 of src/App.tsx is now {a(APP, 4)}" in result.output
    assert f"    {a(APP, 3)}| export function App() {{" in result.output  # the lines around it, anchored
    assert result.output.endswith("Nothing was changed.")
    assert (root / "src/App.tsx").read_text() == APP and executor.version == 0


async def test_a_stale_end_anchor_is_refused_even_when_the_start_matches(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    end = anchor(5, "};")
    result = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 3), end, "x"))
    assert result.code == "PATCH_REJECTED" and f"endAnchor {end} is stale" in result.output
    assert (root / "src/App.tsx").read_text() == APP


@pytest.mark.parametrize("number", [0, 6, 999])
async def test_a_line_past_the_end_is_refused(anchored, number: int) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    result = await executor.execute("edit_lines", edit("src/App.tsx", f"{number}#AA", f"{max(number, 6)}#AA", "x"))
    assert result.code == "PATCH_REJECTED"
    assert f"names line {number}, but src/App.tsx has 5 lines" in result.output
    assert (root / "src/App.tsx").read_text() == APP


@pytest.mark.parametrize(("start", "end"), [("4#A", "4#AA"), ("4#AA", "four"), ("5#AA", "4#AA"), ("", "4#AA")])
async def test_malformed_or_reversed_anchors_are_invalid_arguments(anchored, start: str, end: str) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    result = await executor.execute("edit_lines", edit("src/App.tsx", start, end, "x"))
    assert (result.code, result.retryable) == ("TOOL_ARGUMENTS_INVALID", True)
    assert "must be one anchor exactly as read_file shows it" in result.output or (
        "endAnchor must not name a line before startAnchor" in result.output)
    assert "four" not in result.output  # fixed guidance, never the model's text
    assert (root / "src/App.tsx").read_text() == APP


@pytest.mark.parametrize("bare", ["4", " 4 ", "    4|   return <p>{price}</p>;"])
async def test_a_bare_line_number_is_refused_with_its_anchor(anchored, bare: str) -> None:
    """A weak model may copy the plain numbering of the first message's excerpt: it is told the anchor, and
    nothing is written from a line number alone."""
    root, executor = anchored({"src/App.tsx": APP})
    result = await executor.execute("edit_lines", edit("src/App.tsx", bare, a(APP, 4), "  return null;"))
    assert (result.code, result.retryable) == ("PATCH_REJECTED", True)
    assert f"startAnchor must be an anchor, not a bare line number: line 4 of src/App.tsx is {a(APP, 4)}" in (
        result.output)
    assert f"    {a(APP, 5)}| }}" in result.output
    assert (root / "src/App.tsx").read_text() == APP and executor.version == 0


async def test_no_op_edit_is_refused(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    result = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 4), a(APP, 4),
                                                       "  return <p>{price}</p>;\n"))
    assert result.code == "PATCH_REJECTED" and "exactly what lines 4-4 of src/App.tsx hold now" in result.output
    assert executor.version == 0


async def test_crlf_file_stays_crlf(anchored) -> None:
    text = "a\r\nb\r\nc\r\n"
    root, executor = anchored({"src/a.ts": text.encode()})
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 2), a(text, 2), "B1\nB2\n"))
    assert result.ok
    assert (root / "src/a.ts").read_bytes() == b"a\r\nB1\r\nB2\r\nc\r\n"


async def test_last_line_without_newline_keeps_none(anchored) -> None:
    text = "first\nlast"
    root, executor = anchored({"src/a.ts": text})
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 2), a(text, 2), "LAST\n"))
    assert result.ok and (root / "src/a.ts").read_bytes() == b"first\nLAST"
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 1), a(text, 1), "FIRST"))
    assert result.ok and (root / "src/a.ts").read_bytes() == b"FIRST\nLAST"


async def test_bom_is_kept_and_line_one_hashes_without_it(anchored) -> None:
    text = "\ufeffconst a = 1;\n"
    root, executor = anchored({"src/a.ts": text.encode()})
    assert a(text, 1) == anchor(1, "const a = 1;")
    result = await executor.execute("edit_lines", edit("src/a.ts", a(text, 1), a(text, 1), "const a = 2;"))
    assert result.ok and (root / "src/a.ts").read_bytes() == "\ufeffconst a = 2;\n".encode()


async def test_whitespace_problem_is_undone(anchored) -> None:
    root, executor = anchored({"src/App.tsx": APP})
    result = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 4), a(APP, 4), "  return 1;   "))
    assert result.code == "PATCH_REJECTED" and "The edit was undone" in result.output
    assert (root / "src/App.tsx").read_text() == APP


@pytest.mark.parametrize("path", [".env", ".env.example", "../outside.txt", "src/link.ts", "srclink/a.ts",
                                  "logo.png", "debug.log", "src/missing.ts", "node_modules/x/index.js"])
async def test_write_path_failures_are_terminal(anchored, tmp_path: Path, path: str) -> None:
    files: dict[str, str | bytes] = {"src/a.ts": "old\n", ".env": "old\n", ".env.example": "old\n",
                                     ".gitignore": "*.log\n", "logo.png": b"\x89PNG\0old\n",
                                     "node_modules/x/index.js": "old\n"}
    root, executor = anchored(files)
    outside = tmp_path / "outside.txt"
    outside.write_text("old\n")
    os.symlink(outside, root / "src" / "link.ts")
    os.symlink("src", root / "srclink")
    (root / "debug.log").write_text("old\n")
    before = {p: p.read_bytes() for p in [outside, *root.rglob("*")] if p.is_file() and ".git" not in p.parts}
    anchor_1 = anchor(1, "old")
    with pytest.raises(JobFailure) as info:
        await executor.execute("edit_lines", edit(path, anchor_1, anchor_1, "new"))
    assert info.value.code is ErrorCode.CHANGESET_REJECTED
    assert info.value.message.startswith("edit_lines refused: the path")
    assert str(root) not in info.value.message and str(tmp_path) not in info.value.message
    assert {p: p.read_bytes() for p in before} == before


async def test_result_over_size_limit_is_terminal(anchored) -> None:
    text = "x" * 900 + "\nMARK\n"
    root, executor = anchored({"src/a.ts": text}, editable_file_max_bytes=1000)
    with pytest.raises(JobFailure) as info:
        await executor.execute("edit_lines", edit("src/a.ts", a(text, 2), a(text, 2), "y" * 200))
    assert info.value.code is ErrorCode.LIMIT_EXCEEDED
    assert (root / "src/a.ts").read_text() == text


async def test_edit_lines_is_not_offered_under_replace(make_executor) -> None:
    from spotpatch_agent.tools.registry import offered_tools

    root = make_executor({"src/App.tsx": APP})[0]
    executor = ToolExecutor(root, Limits(), tools=offered_tools(has_checks=False))
    result = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 4), a(APP, 4), "x"))
    assert result.code == "TOOL_ARGUMENTS_INVALID" and "Unknown tool" in result.output
    assert (root / "src/App.tsx").read_text() == APP


async def test_a_canary_key_never_reaches_the_model_through_anchored_output(anchored) -> None:
    from spotpatch_agent.policy.redact import REDACTOR

    key = "sk-canary-anchor-" + "7f3a9c1e5b2d4680"
    REDACTOR.add_secret(key)
    text = f"const a = 1;\nconst key = \"{key}\";\nconst b = 2;\n"
    root, executor = anchored({"src/cfg.ts": text})
    outputs = [
        (await executor.execute("read_file", call(path="src/cfg.ts", startLine=None, endLine=None))).output,
        (await executor.execute("search_text", call(query="const key", glob=None, maxResults=5))).output,
        (await executor.execute("edit_lines", edit("src/cfg.ts", anchor(2, "stale"), a(text, 2), "x"))).output,
    ]
    done = await executor.execute("edit_lines", edit("src/cfg.ts", a(text, 3), a(text, 3), "const b = 3;"))
    assert done.ok
    outputs.append(done.output)
    assert all(key not in out and "sk-canary-anchor" not in out for out in outputs), outputs
    assert f"{a(text, 2)}| const key = " in outputs[0]  # the anchor is of the real bytes; the text is redacted


async def test_the_first_message_excerpt_carries_anchors_under_anchors(anchored) -> None:
    """The prompt's source excerpt shows what read_file would: anchors under ``anchors`` (so the first
    edit_lines needs no read), bare numbers under ``replace``; an anchor taken from it edits."""
    from spotpatch_agent.context.build import build_prompt_context
    from spotpatch_agent.protocol.annotation import SourceLocation, SpotAnnotation, Target

    annotation = SpotAnnotation(annotation_id="a1", targets=[Target(index=1, instruction="x", source=SourceLocation(
        file="src/App.tsx", line=4, column=3))])
    root, executor = anchored({"src/App.tsx": APP})
    excerpt = (await build_prompt_context(executor.context, annotation)).locations[1].excerpt
    assert excerpt is not None and f"    {a(APP, 4)}|   return <p>{{price}}</p>;" in excerpt.split("\n")
    plain = ToolExecutor(root, Limits())
    excerpt = (await build_prompt_context(plain.context, annotation)).locations[1].excerpt
    assert excerpt is not None and "    4|   return <p>{price}</p>;" in excerpt.split("\n")
    done = await executor.execute("edit_lines", edit("src/App.tsx", a(APP, 4), a(APP, 4), "  return <b/>;"))
    assert done.ok, done.output
