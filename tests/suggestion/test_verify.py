"""The suggestion's checks on their own (spotpatch_agent/suggestion/verify.py): which ``path:line`` forms
count as citations and when they are verified, and the in-memory diff check against excerpt lines."""

from __future__ import annotations

from spotpatch_agent.suggestion.excerpts import Excerpt
from spotpatch_agent.suggestion.verify import check_citations, check_diff, extract_diff

ROWS = {n: f"line {n}" for n in range(5, 16)}
EXCERPT = Excerpt(1, "src/App.tsx", 5, 15, "0" * 64, "src/App.tsx (lines 5-15 of 40)", ROWS)


def refs(text: str) -> list[tuple[str, int, int, bool]]:
    return [(c.path, c.start_line, c.end_line, c.verified) for c in check_citations(text, [EXCERPT])[0]]


def test_citation_forms_and_their_check() -> None:
    text = ("See src/App.tsx:5, ./src/App.tsx:7:3, src/App.tsx:14–15, src/App.tsx:15-16, src/App.tsx:4, "
            "src/Other.tsx:6, http://127.0.0.1:5173 and localhost:5173, and src/App.tsx:5 again.")
    assert refs(text) == [
        ("src/App.tsx", 5, 5, True), ("src/App.tsx", 7, 7, True), ("src/App.tsx", 14, 15, True),
        ("src/App.tsx", 15, 16, False), ("src/App.tsx", 4, 4, False), ("src/Other.tsx", 6, 6, False)]
    assert check_citations(text, [EXCERPT])[1:] == (3, 3)


def test_an_absolute_or_escaping_path_is_never_verified() -> None:
    assert [r[3] for r in refs("/home/me/app/src/App.tsx:6 and ../src/App.tsx:6")] == [False, False]


def test_no_diff_is_none_and_a_bare_diff_is_found() -> None:
    assert check_diff("Just change line 6.", [EXCERPT]) is None
    bare = ("Do this:\ndiff --git a/src/App.tsx b/src/App.tsx\n--- a/src/App.tsx\n+++ b/src/App.tsx\n"
            "@@ -6 +6 @@\n-line 6\n+LINE 6\n")
    assert extract_diff(bare) is not None
    result = check_diff(bare, [EXCERPT])
    assert result is not None and result.applies and result.summary == "applies cleanly to the excerpts"


def test_a_diff_that_does_not_match_the_excerpt_does_not_apply() -> None:
    wrong = ("```diff\ndiff --git a/src/App.tsx b/src/App.tsx\n--- a/src/App.tsx\n+++ b/src/App.tsx\n"
             "@@ -6 +6 @@\n-line 60\n+x\n```")
    result = check_diff(wrong, [EXCERPT])
    assert result is not None and not result.applies and result.summary == "does not apply"
    assert result.reason == "hunk 1 of src/App.tsx does not match line 6 of the excerpt"


def test_a_malformed_or_new_file_diff_does_not_apply() -> None:
    malformed = "```diff\n--- a/src/App.tsx\n+++ b/src/App.tsx\n@@ -6 +6 @@\n-line 6\n+x\n```"
    result = check_diff(malformed, [EXCERPT])
    assert result is not None and not result.applies and "diff --git" in (result.reason or "")
    created = ("```diff\ndiff --git a/src/new.ts b/src/new.ts\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.ts\n"
               "@@ -0,0 +1 @@\n+x\n```")
    result = check_diff(created, [EXCERPT])
    assert result is not None and not result.applies and "creates src/new.ts" in (result.reason or "")
    elsewhere = "```diff\ndiff --git a/src/b.ts b/src/b.ts\n--- a/src/b.ts\n+++ b/src/b.ts\n@@ -1 +1 @@\n-a\n+b\n```"
    result = check_diff(elsewhere, [EXCERPT])
    assert result is not None and result.reason == "src/b.ts was not among the excerpts"
