"""The in-process HEAD reader (worktree/refs.py): every ref layout git uses, and "ask git" on anything else."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree import changes as changes_module
from spotpatch_agent.worktree.refs import (
    head_is,
    parse_config,
    read_git_dir,
    read_repo_state,
)
from spotpatch_agent.worktree.repo import locate, resolve_head
from tests.conftest import git

pytestmark = pytest.mark.anyio


def rev_parse(cwd: Path, what: str = "HEAD") -> str:
    return git(cwd, "rev-parse", "--verify", what).strip()


async def assert_matches_git(root: Path) -> None:
    """The reader's layout and HEAD are exactly what ``git rev-parse`` says."""
    state = read_repo_state(root)
    assert state is not None
    assert state.head == await resolve_head(root)
    assert state.layout == await locate(root)


@pytest.fixture
def repo(repo_factory) -> Path:
    root = repo_factory({"a.txt": "a\n"})
    git(root, "commit", "-q", "--allow-empty", "-m", "second")
    return root


async def test_loose_ref(repo: Path) -> None:
    assert (repo / ".git" / "refs" / "heads" / "main").is_file()
    assert not (repo / ".git" / "packed-refs").exists()
    state = read_repo_state(repo)
    assert state is not None and state.head == rev_parse(repo)
    await assert_matches_git(repo)


async def test_packed_ref(repo: Path) -> None:
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert "refs/heads/main" in (repo / ".git" / "packed-refs").read_text()
    state = read_repo_state(repo)
    assert state is not None and state.head == rev_parse(repo)
    await assert_matches_git(repo)


async def test_loose_ref_wins_over_a_stale_packed_one(repo: Path) -> None:
    git(repo, "pack-refs", "--all")
    git(repo, "commit", "-q", "--allow-empty", "-m", "third")  # the loose ref is newer than packed-refs
    state = read_repo_state(repo)
    assert state is not None and state.head == rev_parse(repo) != rev_parse(repo, "HEAD~1")
    await assert_matches_git(repo)


async def test_detached_head(repo: Path) -> None:
    first = rev_parse(repo, "HEAD~1")
    git(repo, "checkout", "-q", "--detach", first)
    state = read_repo_state(repo)
    assert state is not None and state.head == first
    await assert_matches_git(repo)


async def test_linked_worktree_reads_its_own_head_and_the_common_refs(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked), "HEAD~1")
    git(linked, "commit", "-q", "--allow-empty", "-m", "on side")
    state = read_repo_state(linked)
    assert state is not None and state.head == rev_parse(linked) != rev_parse(repo)
    assert state.layout.git_dir.parent.name == "worktrees"
    assert state.layout.common_dir == Path(os.path.realpath(repo / ".git"))
    assert read_git_dir(linked) == state.layout.git_dir
    await assert_matches_git(linked)
    git(repo, "pack-refs", "--all")  # the branch now lives in the common packed-refs
    await assert_matches_git(linked)
    git(linked, "checkout", "-q", "--detach")
    await assert_matches_git(linked)
    await assert_matches_git(repo)  # the main worktree is unaffected


async def test_symbolic_ref_to_a_missing_branch_is_unborn(repo: Path) -> None:
    git(repo, "symbolic-ref", "HEAD", "refs/heads/nowhere")
    state = read_repo_state(repo)
    assert state is not None and state.head is None
    assert await resolve_head(repo) is None
    git(repo, "pack-refs", "--all")  # also with a packed-refs file that lacks it
    state = read_repo_state(repo)
    assert state is not None and state.head is None
    assert not await head_is(repo, rev_parse(repo, "main"))


async def test_fresh_repository_without_commits_is_unborn(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    state = read_repo_state(root)
    assert state is not None and state.head is None and await resolve_head(root) is None


async def test_sha256_repository(tmp_path: Path) -> None:
    root = tmp_path / "sha256"
    root.mkdir()
    git(root, "init", "-q", "-b", "main", "--object-format=sha256")
    (root / "f").write_text("x\n")
    git(root, "add", "f")
    git(root, "commit", "-q", "-m", "one")
    state = read_repo_state(root)
    assert state is not None and state.head is not None and len(state.head) == 64
    await assert_matches_git(root)


@pytest.mark.parametrize(
    "config",
    [
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n",
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n",
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tsomethingNew = yes\n",
        "[core]\n\trepositoryformatversion = 2\n",
        "[core]\n\tbare = true\n",
        "[core]\n\tworktree = /elsewhere\n",
        '[include]\n\tpath = other.config\n',
        '[includeIf "gitdir:/x/"]\n\tpath = other.config\n',
        "[core]\n\tbare = \\\nfalse\n",
    ],
    ids=["reftable", "worktree-config", "unknown-extension", "format-2", "bare", "core-worktree", "include",
         "include-if", "continuation"],
)
async def test_unusual_configuration_falls_back_to_git(repo: Path, config: str) -> None:
    head = rev_parse(repo)
    cfg = repo / ".git" / "config"
    cfg.write_text(cfg.read_text(encoding="utf-8") + config, encoding="utf-8")
    assert read_repo_state(repo) is None
    # head_is then asks git, whatever git says (it refuses a reftable repository in git < 2.45: False)
    assert await head_is(repo, head) == (await resolve_head(repo) == head)


async def test_unusual_refs_fall_back_to_git(repo: Path) -> None:
    head = rev_parse(repo)
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")  # a symbolic ref chain
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert read_repo_state(repo) is None
    assert await head_is(repo, head)
    git(repo, "update-ref", "refs/bisect/x", head)  # outside refs/heads/ (per-worktree or unusual)
    (repo / ".git" / "HEAD").write_text("ref: refs/bisect/x\n")
    assert read_repo_state(repo) is None
    (repo / ".git" / "HEAD").write_text("garbage\n")
    assert read_repo_state(repo) is None
    assert not await head_is(repo, head)


async def test_symlinked_dotgit_and_missing_dotgit_fall_back(repo: Path, tmp_path: Path) -> None:
    assert read_repo_state(tmp_path / "nowhere") is None
    moved = tmp_path / "moved.git"
    os.rename(repo / ".git", moved)
    os.symlink(moved, repo / ".git")
    assert read_repo_state(repo) is None
    assert await head_is(repo, rev_parse(repo))  # git follows the symlink; so does the fallback


async def test_a_tag_peeled_by_git_is_never_a_false_mismatch(repo: Path) -> None:
    head = rev_parse(repo)
    git(repo, "tag", "-a", "-m", "t", "v1")
    tag = rev_parse(repo, "v1")
    (repo / ".git" / "refs" / "heads" / "main").write_text(tag + "\n")  # the branch names a tag object
    state = read_repo_state(repo)
    assert state is not None and state.head == tag  # the raw ref …
    assert await head_is(repo, head)  # … but git peels HEAD^{commit} to the same commit: confirmed by git


def test_parse_config_syntax() -> None:
    text = '[core]\n\tbare = false ; comment\n[Extensions] objectFormat = "sha1"\n# x\n[remote "o"]\n\turl = a#b\n'
    settings = parse_config(text)
    assert settings == {("core", "bare"): "false", ("extensions", "objectformat"): "sha1",
                        ("remote", "url"): "a"}
    assert parse_config("[core\n") is None
    assert parse_config("[core]\n\tflag\n") == {("core", "flag"): "true"}


async def test_apply_guard_without_any_git_process_and_a_head_move_before_the_journal(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Apply's guard reads HEAD in process; a HEAD move between the guard and the first write refuses."""
    head = rev_parse(repo)
    (repo / "a.txt").write_text("b\n")
    diff = git(repo, "diff", "--full-index")
    git(repo, "checkout", "-q", "--", "a.txt")
    real, commands = changes_module.write_journalled_sync, []

    async def counting(args, **kw):  # type: ignore[no-untyped-def]
        commands.append(args[0])
        raise AssertionError("no git process expected")

    monkeypatch.setattr(changes_module, "run_git", counting)

    def moving(root, plan, journal, conflict, *, before=None):  # type: ignore[no-untyped-def]
        git(repo, "commit", "-q", "--allow-empty", "-m", "moved meanwhile")
        return real(root, plan, journal, conflict, before=before)

    monkeypatch.setattr(changes_module, "write_journalled_sync", moving)
    with pytest.raises(SpotPatchError) as info:
        await changes_module.apply_change(repo, diff, {"a.txt": changes_module.file_hash(repo, "a.txt")},
                                          expected_head=head,
                                          result_hashes={"a.txt": hashlib.sha256(b"b\n").hexdigest()})
    assert commands == []
    assert info.value.code is ErrorCode.APPLY_CONFLICT and "HEAD moved" in info.value.message
    assert (repo / "a.txt").read_text() == "a\n"
    assert not list((repo / ".git").glob("spotpatch/journal/*"))
