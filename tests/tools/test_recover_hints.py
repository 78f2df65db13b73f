"""Errors a small model can recover from (issue 27, part 3): a ``replace_text`` miss shows the closest lines
of the named file, page text used as ``oldText`` is recognised and the element's source named, a no-op edit
says why, narrow reads get a hint to read a range. The mistakes are the ones Qwen2.5-Coder-1.5B made."""

from __future__ import annotations

import pytest

from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.models import Target
from spotpatch_agent.tools.hints import nearest_window, page_texts
from tests.tools.conftest import call

pytestmark = pytest.mark.anyio

CARD = """type ProductCardProps = {
  name: string;
  price: number;
  onSave: () => void;
};

export function ProductCard({ name, price, onSave }: ProductCardProps) {
  return (
    <section className="card">
      <h2>{name}</h2>
      <span className="price">${price}</span>
      <button className="btn btn-secondary" onClick={onSave}>Save</button>
    </section>
  );
}
"""
CARD_PATH = "src/components/ProductCard.tsx"
#: Another file with a line as close to the model's oldText as the card's: never shown for a call on the card.
OTHER = 'export const Other = () => <button className="btn btn-secondary" onClick={onSave}>Save it</button>;\n'
TARGETS = [
    Target.model_validate({"index": 1, "instruction": "make the Save button primary",
                           "source": {"file": CARD_PATH, "line": 12, "column": 7},
                           "element": {"tagName": "button", "text": "Save"}}),
    Target.model_validate({"index": 2, "instruction": "show the price with two decimals",
                           "source": {"file": CARD_PATH, "line": 11, "column": 7},
                           "element": {"tagName": "span", "text": "$19.5"}}),
]


def replace(old: str, new: str, path: str = CARD_PATH) -> str:
    return call(path=path, oldText=old, newText=new)


def card_executor(make_executor, **files: str):
    root, executor = make_executor({CARD_PATH: CARD, "src/Other.tsx": OTHER, **files})
    executor.context.page_texts = page_texts(TARGETS)
    return root, executor


async def test_a_miss_shows_the_closest_lines_of_the_named_file_numbered(make_executor) -> None:
    root, executor = card_executor(make_executor)
    wrong = '      <button className="btn btn-secondary" onClick={handleSave}>Save</button>'  # the handler is onSave
    result = await executor.execute("replace_text", replace(wrong, wrong.replace("secondary", "primary")))
    assert (result.ok, result.code, result.retryable, result.wrote) == (False, "PATCH_REJECTED", True, False)
    assert "was not found in src/components/ProductCard.tsx" in result.output
    assert "The closest lines in src/components/ProductCard.tsx" in result.output
    assert f"{CARD_PATH} (lines 11-13 of 15)" in result.output
    assert '   12|       <button className="btn btn-secondary" onClick={onSave}>Save</button>' in result.output
    assert "Save it" not in result.output and "Other" not in result.output  # only the named file
    assert "   14|" not in result.output and "    9|" not in result.output  # bounded to the window
    assert str(root) not in result.output
    assert (root / CARD_PATH).read_text() == CARD and executor.version == 0


async def test_a_miss_with_nothing_close_says_to_read_first(make_executor) -> None:
    _, executor = card_executor(make_executor)
    result = await executor.execute("replace_text", replace("qqqq zzzz wwww", "x"))
    assert result.code == "PATCH_REJECTED"
    assert "No line of src/components/ProductCard.tsx comes close to it" in result.output
    assert "|" not in result.output.split("comes close")[1]  # no file line shown


async def test_the_closest_lines_are_redacted_like_read_file(make_executor) -> None:
    secret = "sk-hint-" + "Qz7" * 8
    REDACTOR.add_secret(secret)
    source = f'const headers = {{ auth: "{secret}" }};\nconst url = "/api";\n'
    _, executor = make_executor({"src/api.ts": source})
    result = await executor.execute("replace_text", replace('const headers = { auth: "x" };', "y", "src/api.ts"))
    assert result.code == "PATCH_REJECTED" and "    1| const headers" in result.output
    assert secret not in result.output and secret[:12] not in result.output


async def test_line_number_prefixes_copied_into_old_text_are_named(make_executor) -> None:
    _, executor = card_executor(make_executor)
    old = '   11|       <span className="price">${price}</span>'
    result = await executor.execute("replace_text", replace(old, "x"))
    assert result.code == "PATCH_REJECTED"
    assert "oldText starts with read_file's line-number prefixes" in result.output
    assert '   11|       <span className="price">${price}</span>' in result.output  # the closest line, as it is


async def test_page_text_as_old_text_names_the_elements_source_line(make_executor) -> None:
    _, executor = card_executor(make_executor)
    result = await executor.execute("replace_text", replace("$19.5", "$19.50"))
    assert result.code == "PATCH_REJECTED" and result.retryable
    assert "Target 2's element shows \"$19.5\" on the page" in result.output
    assert "its source is at src/components/ProductCard.tsx:11:" in result.output
    assert '   11|       <span className="price">${price}</span>' in result.output


async def test_page_text_inside_source_like_old_text_is_recognised(make_executor) -> None:
    _, executor = card_executor(make_executor)
    old = '<span className="price">$19.5</span>'  # half source, half page
    result = await executor.execute("replace_text", replace(old, '<span className="price">$19.50</span>'))
    assert "Target 2's element shows \"$19.5\"" in result.output
    assert "its source is at src/components/ProductCard.tsx:11:" in result.output


async def test_page_text_found_in_the_file_is_not_called_page_text(make_executor) -> None:
    _, executor = card_executor(make_executor)
    result = await executor.execute("replace_text", replace(">Save</button >", ">Go</button>"))
    assert result.code == "PATCH_REJECTED"
    assert "looks like text the page shows" not in result.output  # "Save" is in the source as it is
    assert "   12|" in result.output


async def test_page_text_in_another_file_still_points_to_the_elements_source(make_executor) -> None:
    _, executor = card_executor(make_executor, **{"src/App.tsx": "export const price = 19.5;\n"})
    result = await executor.execute("replace_text", replace("$19.5", "$19.50", "src/App.tsx"))
    assert "its source is at src/components/ProductCard.tsx:11:" in result.output


async def test_a_no_op_edit_says_why_and_where_the_text_really_is(make_executor) -> None:
    # The 1.5B model's second mistake: oldText "$19.50" -> newText "$19.50" after reading the right lines.
    root, executor = card_executor(make_executor)
    result = await executor.execute("replace_text", replace("$19.50", "$19.50"))
    assert (result.ok, result.code, result.retryable) == (False, "PATCH_REJECTED", True)
    assert "newText is identical to oldText, so this edit would change nothing" in result.output
    assert "Besides, oldText does not occur in src/components/ProductCard.tsx" in result.output
    assert "its source is at src/components/ProductCard.tsx:11:" in result.output
    assert (root / CARD_PATH).read_text() == CARD and executor.version == 0


async def test_a_no_op_edit_of_text_that_is_there_says_only_why(make_executor) -> None:
    _, executor = card_executor(make_executor)
    result = await executor.execute("replace_text", replace(">Save<", ">Save<"))
    assert result.code == "PATCH_REJECTED"
    assert "it may ask to change something else than this text (a class name" in result.output
    assert "Besides" not in result.output and "|" not in result.output


async def test_a_no_op_edit_of_a_denied_file_reveals_nothing_of_it(make_executor) -> None:
    files = {".gitignore": "secret.ts\n", "secret.ts": "export const token = 'zzzz-secret-line';\n"}
    _, executor = card_executor(make_executor, **files)
    for path in ("secret.ts", ".env", "../outside.ts", "src/missing.ts"):
        result = await executor.execute("replace_text", replace("token = 'x'", "token = 'x'", path))
        assert result.code == "PATCH_REJECTED"
        assert "zzzz" not in result.output and "Besides" not in result.output and "|" not in result.output[-200:]


def test_nearest_window_is_bounded_for_a_long_old_text() -> None:
    lines = [f"const value{i} = compute({i}, 'label {i}');" for i in range(1, 401)]
    old = "\n".join(lines[199:259]).replace("compute", "calc")  # 60 lines, each close to its original
    first, last = nearest_window(lines, old)
    assert last - first + 1 <= 12 and 195 <= first <= last <= 265  # around the changed lines 200-259


async def test_repeated_narrow_reads_get_a_hint_to_read_more_at_once(make_executor) -> None:
    _, executor = card_executor(make_executor)
    first = await executor.execute("read_file", call(path=CARD_PATH, startLine=11, endLine=11))
    assert first.ok and "narrow read" not in first.output
    second = await executor.execute("read_file", call(path=CARD_PATH, startLine=12, endLine=12))
    assert second.ok and "   12|" in second.output
    assert "This is narrow read 2 of src/components/ProductCard.tsx" in second.output
    assert "read the whole file in one call: startLine 1 and endLine 15" in second.output
    third = await executor.execute("read_file", call(path=CARD_PATH, startLine=10, endLine=12))
    assert "narrow read 3" in third.output
    wide = await executor.execute("read_file", call(path=CARD_PATH, startLine=1, endLine=15))
    assert "narrow read" not in wide.output


async def test_narrow_reads_of_a_long_file_suggest_a_range(make_executor) -> None:
    long = "".join(f"line {i}\n" for i in range(1, 1001))
    _, executor = make_executor({"src/long.ts": long})
    await executor.execute("read_file", call(path="src/long.ts", startLine=500, endLine=500))
    result = await executor.execute("read_file", call(path="src/long.ts", startLine=501, endLine=502))
    assert "read a range in one call, e.g. startLine 461 and endLine 560" in result.output


async def test_page_text_in_a_hint_carries_no_raw_bidi_or_invisible_character(make_executor) -> None:
    _, executor = make_executor({CARD_PATH: CARD})
    sneaky = "Pay\u202e now\U000e0041"  # an override and a tag character ("ASCII smuggling"), as a page may render
    executor.context.page_texts = page_texts([Target.model_validate({
        "index": 1, "instruction": "x", "source": {"file": CARD_PATH, "line": 12},
        "element": {"tagName": "button", "text": sneaky}})])
    result = await executor.execute("replace_text", replace(sneaky, "Pay now"))
    assert "Target 1's element shows \"Pay\\u202e now\\udb40\\udc41\" on the page" in result.output
    assert "\u202e" not in result.output and "\U000e0041" not in result.output
