"""Issue 12, defects 1 and 7 at the worktree level: validation (worktree/validate.py, checkout_form.py) lets a
change through only when the bytes Apply writes are the bytes the diff shows (or exactly those with every LF
as CRLF), whichever source the checkout conversion comes from: a ``.gitattributes`` file, ``info/attributes``,
``core.attributesFile``, the repository's own config or a global config (``GIT_CONFIG_GLOBAL``)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree.changes import apply_change
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.patch_images import parse_sections
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.validate import Changeset, validate_changeset
from tests.conftest import git

pytestmark = pytest.mark.anyio

MARKER = b"<!--INJECTED-->"


@pytest.fixture
async def make_wt(repo_factory) -> AsyncIterator[Callable[..., object]]:
    made: list[tuple[Path, Worktree]] = []

    async def factory(files: dict[str, str | bytes], setup: Callable[[Path], None] = lambda root: None):
        root = repo_factory(files)
        setup(root)
        wt = await create_worktree(root, "job-form")
        made.append((root, wt))
        return root, wt

    yield factory
    for root, wt in made:
        await remove_worktree(root, wt)


def marker_filter(tmp: Path) -> str:
    """``clean`` passes content through, ``smudge`` prepends :data:`MARKER`; returns the driver command."""
    driver = tmp / "marker.py"
    driver.write_text("import sys\nd = sys.stdin.buffer.read()\n"
                      f"sys.stdout.buffer.write(d if sys.argv[1] == 'clean' else {MARKER!r} + d)\n")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(driver))}"


def global_config(tmp: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    config = tmp / "global.gitconfig"
    config.write_text(text)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))


async def rejected(wt: Worktree) -> str:
    with pytest.raises(JobFailure) as info:
        await validate_changeset(wt, Limits())
    assert info.value.code is ErrorCode.CHANGESET_REJECTED
    assert str(wt.path) not in info.value.message
    return info.value.message


def shown_blobs(root: Path, cs: Changeset) -> dict[str, bytes]:
    """path → the result blob each diff section names (``index old..new``): what the review shows."""
    blobs = {}
    for stat, section in zip(cs.files, parse_sections(cs.diff.encode("utf-8", "surrogateescape")), strict=True):
        if section.new_oid is not None:
            blobs[stat.path] = subprocess.run(["git", "cat-file", "blob", section.new_oid], cwd=root,
                                              capture_output=True, check=True).stdout
    return blobs


def test_form_difference() -> None:
    from spotpatch_agent.worktree.checkout_form import form_difference

    assert form_difference(b"a\nb\n", b"a\nb\n") == "same"
    assert form_difference(b"a\nb\n", b"a\r\nb\r\n") == "crlf"
    assert form_difference(b"a\r\nb\n", b"a\r\r\nb\r\n") == "other"  # the blob had a CR: never assumed
    assert form_difference(b"a\nb\n", b"a\r\nb\n") == "other"
    assert form_difference(b"$Id$\n", b"$Id: 0123 $\n") == "other"


# ---------------------------------------------------------------- a smudge filter, from every source


ATTRIBUTE_SOURCES = ["gitattributes", "info-attributes", "global-attributes-file"]
DRIVER_SOURCES = ["global-config", "repo-config"]


@pytest.mark.parametrize("attribute_source", ATTRIBUTE_SOURCES)
@pytest.mark.parametrize("driver_source", DRIVER_SOURCES)
async def test_smudge_filter_from_any_source_is_rejected(make_wt, tmp_path: Path, monkeypatch, attribute_source: str,
                                                         driver_source: str) -> None:
    command = marker_filter(tmp_path)
    driver = f'[filter "mark"]\n\tclean = {command} clean\n\tsmudge = {command} smudge\n'
    rule = "*.html filter=mark\n"
    global_text = driver if driver_source == "global-config" else ""
    if attribute_source == "global-attributes-file":
        (tmp_path / "attributes").write_text(rule)
        global_text += f"[core]\n\tattributesFile = {tmp_path / 'attributes'}\n"
    global_config(tmp_path, monkeypatch, global_text)
    files = {"a.txt": "a\n", **({".gitattributes": rule} if attribute_source == "gitattributes" else {})}

    def setup(root: Path) -> None:
        if driver_source == "repo-config":
            git(root, "config", "filter.mark.clean", f"{command} clean")
            git(root, "config", "filter.mark.smudge", f"{command} smudge")
        if attribute_source == "info-attributes":
            (root / ".git" / "info").mkdir(exist_ok=True)
            (root / ".git" / "info" / "attributes").write_text(rule)

    root, wt = await make_wt(files, setup)
    (wt.path / "page.html").write_bytes(b"<p>hello</p>\n")
    message = await rejected(wt)
    assert "'page.html'" in message and "filter=mark" in message, message
    assert "other bytes than the diff shows" in message


async def test_lfs_pointer_edit_is_rejected_naming_the_filter(make_wt, tmp_path: Path, monkeypatch) -> None:
    """The edit form of defect 1: a tracked file stored through a filter; the diff shows stored bytes."""
    command = marker_filter(tmp_path)
    global_config(tmp_path, monkeypatch, f'[filter "lfs"]\n\tclean = {command} clean\n\tsmudge = {command} smudge\n'
                                         "\trequired = true\n")
    root, wt = await make_wt({".gitattributes": "*.svg filter=lfs -text\n", "logo.svg": "<svg/>\n"})
    assert (wt.path / "logo.svg").read_bytes() == MARKER + b"<svg/>\n"
    (wt.path / "logo.svg").write_bytes(b"<svg><script>alert(1)</script></svg>\n")
    message = await rejected(wt)
    assert "'logo.svg'" in message and "filter=lfs" in message, message


async def test_ident_is_rejected_naming_ident(make_wt) -> None:
    root, wt = await make_wt({".gitattributes": "*.txt ident\n", "v.txt": "$Id$\nversion 1\n"})
    (wt.path / "v.txt").write_bytes((wt.path / "v.txt").read_bytes().replace(b"version 1", b"version 2"))
    message = await rejected(wt)
    assert "'v.txt'" in message and "ident" in message, message


async def test_working_tree_encoding_is_rejected_naming_it(make_wt) -> None:
    root, wt = await make_wt({".gitattributes": "*.txt working-tree-encoding=UTF-16LE\n",
                              "u.txt": "hello\n".encode("utf-16-le")})
    (wt.path / "u.txt").write_bytes("hello\nworld\n".encode("utf-16-le"))
    message = await rejected(wt)
    assert "'u.txt'" in message and "working-tree-encoding=UTF-16LE" in message, message


# ---------------------------------------------------------------- line endings: the one allowed difference


async def test_eol_crlf_writes_the_shown_text_with_crlf_and_nothing_else(make_wt) -> None:
    root, wt = await make_wt({".gitattributes": "*.txt text eol=crlf\n", "w.txt": "one\ntwo\n"})
    (root / "w.txt").unlink()
    git(root, "checkout", "--", "w.txt")
    (wt.path / "w.txt").write_bytes(b"one\r\nTWO\r\n")
    (wt.path / "n.txt").write_bytes(b"new\r\n")
    cs = await validate_changeset(wt, Limits())
    shown = shown_blobs(root, cs)
    assert shown == {"n.txt": b"new\n", "w.txt": b"one\nTWO\n"}
    await apply_change(root, cs.diff, cs.baseline_hashes, expected_head=wt.head_oid, result_hashes=cs.result_hashes)
    for path, blob in shown.items():
        assert (root / path).read_bytes() == blob.replace(b"\n", b"\r\n")


async def test_plain_change_writes_exactly_the_shown_blobs(make_wt) -> None:
    root, wt = await make_wt({".gitattributes": "* text=auto\n", "a.txt": "a\nb\n", "c.txt": "keep\r\nme\r\n"})
    (wt.path / "a.txt").write_bytes(b"a\nB\n")
    (wt.path / "new.md").write_bytes(b"# new\n")
    cs = await validate_changeset(wt, Limits())
    shown = shown_blobs(root, cs)
    await apply_change(root, cs.diff, cs.baseline_hashes, expected_head=wt.head_oid, result_hashes=cs.result_hashes)
    assert shown and all((root / path).read_bytes() == blob for path, blob in shown.items())


# ---------------------------------------------------------------- defect 7: the change alters its own attributes


async def test_removing_an_eol_rule_with_an_edit_of_its_file_is_rejected(make_wt) -> None:
    root, wt = await make_wt({".gitattributes": "*.txt text eol=crlf\n", "w.txt": "one\ntwo\n"})
    (wt.path / ".gitattributes").write_text("# none\n")
    (wt.path / "w.txt").write_bytes(b"one\nTWO\n")
    message = await rejected(wt)
    assert "'w.txt'" in message and "eol=crlf" in message and "job of its own" in message, message


async def test_adding_an_encoding_rule_with_its_file_is_rejected(make_wt) -> None:
    root, wt = await make_wt({"a.txt": "a\n"})
    (wt.path / ".gitattributes").write_text("*.txt working-tree-encoding=UTF-16LE\n")
    (wt.path / "u.txt").write_bytes("hi\n".encode("utf-16-le"))
    message = await rejected(wt)
    # a.txt may be named first: racily clean in the worktree's index, git re-reads it under the new rule.
    assert ("'u.txt'" in message or "'a.txt'" in message) and "working-tree-encoding=UTF-16LE" in message, message
    assert ".gitattributes" in message and "job of its own" in message


async def test_a_gitattributes_change_that_leaves_changed_paths_alone_passes(make_wt) -> None:
    root, wt = await make_wt({"a.txt": "a\n", "b.svg": "<svg/>\n"})
    (wt.path / ".gitattributes").write_text("*.png binary\n")
    (wt.path / "a.txt").write_text("A\n")
    cs = await validate_changeset(wt, Limits())
    assert [f.path for f in cs.files] == [".gitattributes", "a.txt"]


async def test_failing_smudge_filter_is_rejected_naming_path_and_filter(make_wt, tmp_path: Path, monkeypatch) -> None:
    global_config(tmp_path, monkeypatch, '[filter "broken"]\n\tclean = cat\n\tsmudge = false\n\trequired = true\n')
    root, wt = await make_wt({".gitattributes": "*.html filter=broken\n", "a.txt": "a\n"})
    (wt.path / "page.html").write_bytes(b"<p>hello</p>\n")
    message = await rejected(wt)
    assert "'page.html'" in message and "filter=broken" in message and "failed" in message, message
