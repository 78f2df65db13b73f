"""Changeset validation (docs/design.md §8): one named test per violation, each made by writing directly into a
real job worktree; plus the positive cases (edit/add/delete stats, non-ASCII and space names round-trip)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import FileStat, Limits
from spotpatch_agent.worktree.changes import apply_change, revert_change
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import RawEntry, result_diff
from spotpatch_agent.worktree.validate import Changeset, check_entry, validate_changeset
from tests.conftest import git
from tests.worktree._util import sha, snapshot

pytestmark = pytest.mark.anyio

FILES: dict[str, str | bytes] = {
    "a.txt": "alpha\nbeta\ngamma\n",
    "old.txt": "to be deleted\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    "docs/my file ü.md": "# Títle\n",
    ".gitignore": "cache/\n",
}


@pytest.fixture
async def make_wt(repo_factory) -> AsyncIterator[Callable[..., object]]:
    """``await make_wt(files=FILES, executable=("run.sh",))`` -> (root, worktree) of a fresh repository."""
    made: list[tuple[Path, Worktree]] = []

    async def factory(files: dict[str, str | bytes] = FILES, executable: tuple[str, ...] = ("run.sh",)):
        root = repo_factory(files)
        for rel in executable:
            (root / rel).chmod(0o755)
            git(root, "add", rel)
            git(root, "commit", "-q", "-m", f"{rel} is executable")
        wt = await create_worktree(root, "job-validate")
        made.append((root, wt))
        return root, wt

    yield factory
    for root, wt in made:
        await remove_worktree(root, wt)


async def rejected(wt: Worktree, limits: Limits | None = None, **kw: object) -> str:
    """Validate ``wt``, expect ``CHANGESET_REJECTED``; returns the message (checked to hold no absolute path)."""
    with pytest.raises(JobFailure) as info:
        await validate_changeset(wt, limits or Limits(), **kw)  # type: ignore[arg-type]
    assert info.value.code is ErrorCode.CHANGESET_REJECTED
    message = info.value.message
    assert str(wt.path) not in message and os.path.realpath(wt.path) not in message
    assert len(message) < 600
    return message


def limits(**values: int) -> Limits:
    return Limits.model_validate(values)


# ---------------------------------------------------------------- positive


async def test_edit_add_delete_passes_with_correct_stats_and_hashes(make_wt) -> None:
    root, wt = await make_wt()
    (wt.path / "a.txt").write_text("alpha\nBETA\ngamma\n")
    (wt.path / "new.txt").write_text("one\ntwo\n")
    (wt.path / "old.txt").unlink()
    cs = await validate_changeset(wt, Limits())
    assert isinstance(cs, Changeset)
    assert cs.files == [
        FileStat(path="a.txt", added=1, removed=1, status="modified"),
        FileStat(path="new.txt", added=2, removed=0, status="added"),
        FileStat(path="old.txt", added=0, removed=1, status="deleted"),
    ]
    assert cs.baseline_hashes == {"a.txt": sha(b"alpha\nbeta\ngamma\n"), "new.txt": None,
                                  "old.txt": sha(b"to be deleted\n")}
    assert cs.result_hashes == {"a.txt": sha(b"alpha\nBETA\ngamma\n"), "new.txt": sha(b"one\ntwo\n"), "old.txt": None}
    assert "+BETA" in cs.diff and "deleted file mode 100644" in cs.diff and "new file mode 100644" in cs.diff
    assert cs.diff == (await result_diff(wt))[0]


async def test_nothing_changed_is_an_empty_changeset(make_wt) -> None:
    _, wt = await make_wt()
    assert await validate_changeset(wt, Limits()) == Changeset("", [], {}, {})


async def test_non_ascii_and_space_names_round_trip(make_wt) -> None:
    root, wt = await make_wt()
    new = "src/new dir/ünï côde.txt"
    (wt.path / "src" / "new dir").mkdir(parents=True)
    (wt.path / new).write_text("héllo wörld\n", encoding="utf-8")
    (wt.path / "docs/my file ü.md").write_text("# Title ü\n", encoding="utf-8")
    quoted = 'say "hi".txt'  # git C-quotes this name in diff headers and in --stdin-paths input
    (wt.path / quoted).write_text("hi\n")
    cs = await validate_changeset(wt, Limits())
    assert [f.path for f in cs.files] == ["docs/my file ü.md", quoted, new]
    assert cs.result_hashes == {new: sha("héllo wörld\n".encode()), "docs/my file ü.md": sha("# Title ü\n".encode()),
                                quoted: sha(b"hi\n")}
    assert cs.baseline_hashes == {new: None, "docs/my file ü.md": sha("# Títle\n".encode()), quoted: None}
    before = snapshot(root)
    applied = await apply_change(root, cs.diff, cs.baseline_hashes, expected_head=wt.head_oid,
                                 result_hashes=cs.result_hashes)
    assert (root / new).read_text("utf-8") == "héllo wörld\n"
    assert applied.post_hashes == cs.result_hashes
    await revert_change(root, applied, expected_head=wt.head_oid)
    assert snapshot(root)["files"] == before["files"]


async def test_edit_of_an_executable_file_keeping_its_mode_passes(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "run.sh").write_text("#!/bin/sh\necho hello\n")
    cs = await validate_changeset(wt, Limits())
    assert [(f.path, f.status) for f in cs.files] == [("run.sh", "modified")]


async def test_a_rename_is_a_delete_plus_an_add(make_wt) -> None:
    _, wt = await make_wt()
    os.rename(wt.path / "a.txt", wt.path / "b.txt")
    cs = await validate_changeset(wt, Limits())
    assert [(f.path, f.status) for f in cs.files] == [("a.txt", "deleted"), ("b.txt", "added")]
    assert "rename from" not in cs.diff and "similarity index" not in cs.diff


# ---------------------------------------------------------------- one test per violation


async def test_rejects_protected_path(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "a.txt").write_text("fine\n")
    (wt.path / ".env").write_text("SECRET=1\n")
    message = await rejected(wt)
    assert "'.env'" in message and "protected" in message and "agent's change" in message


async def test_rejects_path_not_in_canonical_form(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "back\\slash.txt").write_text("x\n")
    assert "'back\\slash.txt'" in await rejected(wt)


async def test_rejects_symlink(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "link.txt").symlink_to("a.txt")
    message = await rejected(wt)
    assert "'link.txt'" in message and "symbolic link" in message


async def test_rejects_gitlink_submodule(make_wt) -> None:
    _, wt = await make_wt()
    nested = wt.path / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "x.txt").write_text("x\n")
    git(nested, "add", "x.txt")
    git(nested, "commit", "-q", "-m", "nested")
    message = await rejected(wt)
    assert "'vendor/lib'" in message and "submodule" in message


async def test_rejects_nested_repository_git_cannot_stage(make_wt) -> None:
    _, wt = await make_wt()
    git(wt.path, "init", "-q", "empty-repo")  # no commit: `git add --all` fails on it
    message = await rejected(wt)  # refused before any git command reads it (issue 25: worktree/scan.py)
    assert "'empty-repo' holds a git repository (.git)" in message


async def test_rejects_binary(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "logo.png").write_bytes(bytes(range(256)))
    message = await rejected(wt)
    assert "'logo.png'" in message and "binary" in message


async def test_rejects_non_utf8_text(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "latin1.txt").write_bytes(b"caf\xe9\n")  # git counts it as text; it is not UTF-8
    message = await rejected(wt)
    assert "'latin1.txt'" in message and "UTF-8" in message


async def test_rejects_oversized_file(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "big.txt").write_text("x" * 2000 + "\n")
    message = await rejected(wt, limits(editableFileMaxBytes=1024))
    assert "'big.txt'" in message and "2001 bytes" in message and "editableFileMaxBytes" in message


async def test_rejects_too_many_files(make_wt) -> None:
    _, wt = await make_wt()
    for i in range(3):
        (wt.path / f"f{i}.txt").write_text(f"{i}\n")
    message = await rejected(wt, limits(maxChangedFiles=2))
    assert "3 files" in message and "maxChangedFiles = 2" in message


async def test_rejects_diff_over_limit(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "long.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    message = await rejected(wt, limits(maxDiffBytes=200))
    assert "maxDiffBytes = 200" in message


async def test_rejects_new_executable_bit(make_wt) -> None:
    _, wt = await make_wt()
    script = wt.path / "tool.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    message = await rejected(wt)
    assert "'tool.sh'" in message and "100755" in message


async def test_rejects_mode_change_on_existing_file(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "a.txt").chmod(0o755)
    message = await rejected(wt)
    assert "'a.txt'" in message and "executable bit" in message
    run = wt.path / "run.sh"
    (wt.path / "a.txt").chmod(0o644)
    run.chmod(stat.S_IMODE(run.stat().st_mode) & ~0o111)  # losing the bit is a mode change too
    message = await rejected(wt)
    assert "'run.sh'" in message and "changes its file mode" in message


async def test_rejects_deleting_an_executable_file(make_wt) -> None:
    _, wt = await make_wt()
    (wt.path / "run.sh").unlink()
    assert "'run.sh'" in await rejected(wt)


async def test_rejects_git_metadata_path(make_wt) -> None:
    _, wt = await make_wt()
    # A `.git` below the root, repository or not, is refused before git reads the tree (issue 25).
    (wt.path / "pkg" / ".git").mkdir(parents=True)
    (wt.path / "pkg" / ".git" / "config").write_text("[core]\n")
    (wt.path / "a.txt").write_text("edited\n")
    assert "'pkg' holds a git repository (.git)" in await rejected(wt)
    shutil.rmtree(wt.path / "pkg")
    assert [f.path for f in (await validate_changeset(wt, Limits())).files] == ["a.txt"]
    (wt.path / ".gitmodules").write_text('[submodule "x"]\n\tpath = x\n\turl = https://example.invalid/x\n')
    message = await rejected(wt)
    assert "'.gitmodules'" in message and "git metadata" in message
    # git itself refuses to stage a `.git` segment; the rule holds for any spelling all the same.
    for path in (".git/config", "a/.GIT/hooks/pre-commit", "sub/.gitmodules"):
        with pytest.raises(JobFailure, match="git metadata"):
            check_entry(RawEntry("000000", "100644", None, "1" * 40, "added", path))


async def test_rejects_ignored_path(make_wt) -> None:
    _, wt = await make_wt()
    # Decision: an ignored file that is merely written (a check's cache or build output) is never staged,
    # so it never reaches the diff and the change passes; one that got into the index anyway is rejected.
    (wt.path / "cache").mkdir()
    (wt.path / "cache" / "out.txt").write_text("generated\n")
    (wt.path / "a.txt").write_text("edited\n")
    cs = await validate_changeset(wt, Limits())
    assert [f.path for f in cs.files] == ["a.txt"] and "cache/out.txt" not in cs.diff
    git(wt.path, "add", "-f", "cache/out.txt")  # e.g. a check that runs `git add -f`
    message = await rejected(wt)
    assert "'cache/out.txt'" in message and "ignored" in message


def _drop_last_section(diff: str) -> str:
    return diff[: diff.rindex("diff --git ")]


def _change_a_line(diff: str) -> str:
    return diff.replace("+BETA\n", "+BETO\n")


def _wrong_blob_id(diff: str) -> str:
    head, _, rest = diff.partition("index ")
    return head + "index " + rest[:40].replace(rest[0], "0" if rest[0] != "0" else "1") + rest[40:]


@pytest.mark.parametrize(
    "tamper",
    [_drop_last_section, _change_a_line, _wrong_blob_id, "worktree-changed-after-diff"],
    ids=["dropped-file", "changed-line", "wrong-blob-id", "worktree-changed-after-diff"],
)
async def test_rejects_when_reparse_disagrees(make_wt, tamper) -> None:
    _, wt = await make_wt()
    (wt.path / "a.txt").write_text("alpha\nBETA\ngamma\n")
    (wt.path / "new.txt").write_text("one\n")

    async def diff_source(w: Worktree) -> tuple[str, list[FileStat]]:
        diff, files = await result_diff(w)
        if tamper == "worktree-changed-after-diff":
            (w.path / "new.txt").write_text("two\n")  # a writer racing the validation
            return diff, files
        return tamper(diff), files

    message = await rejected(wt, diff_source=diff_source)
    assert "does not match the worktree" in message and "consistency failure" in message
