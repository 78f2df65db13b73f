"""patch_parse: the strict, pure parser behind apply_patch (no file system, no git)."""

from __future__ import annotations

import pytest

from spotpatch_agent.tools.patch_parse import ParsedPatch, PatchRejection, parse_patch

UPDATE = (
    "diff --git a/src/a.ts b/src/a.ts\n"
    "index 1234567..89abcde 100644\n"
    "--- a/src/a.ts\n"
    "+++ b/src/a.ts\n"
    "@@ -1,3 +1,3 @@ function f() {\n"
    " one\n"
    "-two\n"
    "+TWO\n"
    " three\n"
)


def ok(text: str) -> ParsedPatch:
    parsed = parse_patch(text)
    assert isinstance(parsed, ParsedPatch), parsed
    return parsed


def rejected(text: str, *, terminal: bool = False) -> PatchRejection:
    parsed = parse_patch(text)
    assert isinstance(parsed, PatchRejection), parsed
    assert parsed.terminal is terminal, parsed.message
    return parsed


def test_update_parses() -> None:
    parsed = ok(UPDATE)
    (file,) = parsed.files
    assert (file.path, file.kind, len(file.hunks)) == ("src/a.ts", "update", 1)
    hunk = file.hunks[0]
    assert (hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count) == (1, 3, 1, 3)
    assert hunk.lines == (" one", "-two", "+TWO", " three")
    assert parsed.text == UPDATE


def test_missing_final_newline_and_trailing_blank_lines_are_tolerated() -> None:
    assert ok(UPDATE.rstrip("\n")).text == UPDATE
    assert ok(UPDATE + "\n\n").text == UPDATE


def test_create_and_delete() -> None:
    parsed = ok(
        "diff --git a/n.txt b/n.txt\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/n.txt\n"
        "@@ -0,0 +1 @@\n+hi\n"
        "diff --git a/o.txt b/o.txt\ndeleted file mode 100644\n--- a/o.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
    )
    assert [(f.path, f.kind) for f in parsed.files] == [("n.txt", "create"), ("o.txt", "delete")]


@pytest.mark.parametrize(
    "text",
    [
        "diff --git a/../../x b/../../x\n--- a/../../x\n+++ b/../../x\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/f b/f\n--- /etc/hosts\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a//etc/passwd b//etc/passwd\n--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/src/%2e%2e/x b/src/%2e%2e/x\n--- a/src/%2e%2e/x\n+++ b/src/%2e%2e/x\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/src\\x b/src\\x\n--- a/src\\x\n+++ b/src\\x\n@@ -1 +1 @@\n-a\n+b\n",
        'diff --git "a/x\\000y" "b/x\\000y"\n--- "a/x\\000y"\n+++ "b/x\\000y"\n@@ -1 +1 @@\n-a\n+b\n',
        "diff --git a/C:/x b/C:/x\n--- a/C:/x\n+++ b/C:/x\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git x y\n--- x\n+++ y\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n",
        (
            "diff --git a/app/.env.example b/app/.env.example\n--- a/app/.env.example\n+++ b/app/.env.example\n"
            "@@ -1 +1 @@\n-a\n+b\n"
        ),
        (
            "diff --git a/package-lock.json b/package-lock.json\n--- a/package-lock.json\n"
            "+++ b/package-lock.json\n@@ -1 +1 @@\n-a\n+b\n"
        ),
    ],
    ids=["dotdot", "absolute-header", "absolute", "percent", "backslash", "nul", "drive", "no-prefix", "git-dir",
         "env-example", "lockfile"],
)
def test_unsafe_or_protected_paths_are_terminal(text: str) -> None:
    rejected(text, terminal=True)


@pytest.mark.parametrize(
    ("mode_lines", "word"),
    [
        ("old mode 100644\nnew mode 100755\n", "mode"),
        ("new file mode 100755\n", "mode"),
        ("new file mode 120000\n", "symbolic"),
        ("new file mode 160000\n", "submodule"),
        ("index 1234567..89abcde 120000\n", "symbolic"),
    ],
)
def test_modes_other_than_plain_files_are_terminal(mode_lines: str, word: str) -> None:
    text = f"diff --git a/x b/x\n{mode_lines}--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    assert word in rejected(text, terminal=True).message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("```diff\n" + UPDATE + "```\n", "Markdown"),
        (UPDATE + "```\n", "Markdown"),
        ("*** Begin Patch\n*** Update File: a\n@@\n-a\n+b\n*** End Patch\n", "Begin Patch"),
        ("Here is the patch:\n" + UPDATE, "no text before"),
        (UPDATE + "\nDone.\n", "no text may follow"),
        (UPDATE + "Done.\n", "not part of a diff"),
        ("$ git apply <<EOF\n" + UPDATE + "EOF\n", "no text before"),
        ("--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1 +1 @@\n-a\n+b\n", "diff --git"),
        ("@@ -1 +1 @@\n-a\n+b\n", "diff --git"),
        ("diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n", "'--- '"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n", "no '@@'"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -2 +2 @@\n-b\n+x\n y\n", "corrupt"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "corrupt"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n\n-b\n+c\n", "empty"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n@@ -1 +1 @@\n-a\n+b\n", "out of order"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,0 +2 @@\n+b\n", "no context"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 @@\n-a\n+b\n", "hunk header"),
        ("diff --git a/x b/y\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "Renames"),
        ("diff --git a/x b/x\nsimilarity index 90%\nrename from x\nrename to y\n", "delete"),
        ("diff --git a/x b/x\ncopy from x\ncopy to y\n", "delete"),
        ("diff --git a/x b/x\n--- a/y\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "do not match"),
        ("diff --git a/x b/x\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+a\n", "do not match"),
        ("diff --git a/x b/x\nnew file mode 100644\n--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+a\n", "do not match"),
        ("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -1 +1 @@\n-a\n+a\n", "@@ -0,0 +1,N @@"),
        ("diff --git a/x b/x\nGIT binary patch\nliteral 0\n", "binary"),
        ("diff --git a/x b/x\nBinary files a/x and b/x differ\n", "binary"),
        (UPDATE + UPDATE, "twice"),
        ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\0\n", "NUL"),
        ("diff --git a/x b/x\r\n--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n", "diff"),
    ],
)
def test_format_problems_are_retryable(text: str, fragment: str) -> None:
    assert fragment in rejected(text).message


@pytest.mark.parametrize(
    "body",
    [
        "\\ No newline at end of file\n-a\n+b\n",  # marker first
        "-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n",  # twice
        "-a\n\\ No newline at end of file\n a\n+b\n",  # a line follows the old side's end
    ],
)
def test_misplaced_no_newline_marker(body: str) -> None:
    counts = "-1,2 +1,2" if " a" in body else "-1 +1"
    rejected(f"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ {counts} @@\n{body}")


def test_valid_no_newline_markers() -> None:
    hunk = ok("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n"
              "\\ No newline at end of file\n").files[0].hunks[0]
    assert (hunk.no_eol_old, hunk.no_eol_new, hunk.lines) == (True, True, ("-a", "+b"))
    hunk = ok("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n\\ No newline at end of file\n"
              ).files[0].hunks[0]
    assert (hunk.no_eol_old, hunk.no_eol_new) == (True, True)
    # only the last hunk may end without a newline
    rejected("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n"
             "@@ -5 +5 @@\n-e\n+f\n")


def test_quoted_octal_and_tab_terminated_paths() -> None:
    parsed = ok(
        'diff --git "a/caf\\303\\251 \\"x\\".md" "b/caf\\303\\251 \\"x\\".md"\n'
        '--- "a/caf\\303\\251 \\"x\\".md"\n+++ "b/caf\\303\\251 \\"x\\".md"\n@@ -1 +1 @@\n-a\n+b\n'
        "diff --git a/my notes.md b/my notes.md\n--- a/my notes.md\t\n+++ b/my notes.md\t2024-01-01\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert parsed.paths == ('café "x".md', "my notes.md")


def test_crlf_body_lines_keep_their_cr() -> None:
    hunk = ok("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\r\n+b\r\n").files[0].hunks[0]
    assert hunk.lines == ("-a\r", "+b\r")


def test_rejections_never_echo_patch_text() -> None:
    secret = "sk-live-SECRET"
    # only normalised paths and line numbers are named, never other patch text
    for text in (f"{secret}\n{UPDATE}", UPDATE + f"{secret}\n", UPDATE.replace("+TWO", "+TWO\n" + secret)):
        assert secret not in rejected(text).message


def test_crlf_header_lines_are_a_retryable_format_rejection() -> None:
    from spotpatch_agent.tools.patch_parse import PatchRejection, parse_patch

    body = "@@ -1 +1 @@\n-a\n+b\n"
    for patch in ("diff --git a/x.txt b/x.txt\r\n--- a/x.txt\n+++ b/x.txt\n" + body,
                  "diff --git a/x.txt b/x.txt\n--- a/x.txt\r\n+++ b/x.txt\r\n" + body):
        result = parse_patch(patch)
        assert isinstance(result, PatchRejection) and not result.terminal
        assert "CRLF" in result.message
