"""Issue 25 (CRITICAL): nothing a check leaves in a job worktree makes the engine's host-side git run code.

The break: a project with a submodule; the job worktree holds the gitlink as an empty directory; a confined
check ``git init``-s it, sets ``filter.x.clean`` there, adds ``* filter=x`` and leaves a same-size modified
file. The engine's host ``git status`` after the check (the fingerprint) recursed into it and ran the filter,
unconfined. Proven here, each through the real engine pieces (a real job worktree, the tool executor's
``run_check`` under bubblewrap, the final check stage, the result diff):

- the gitlink directory is an empty read-only view inside the sandbox: the plant fails in the check;
- the same plant made on the host (as if a check got past the mount), with a user config that asks git to
  recurse (``submodule.recurse``, ``diff.ignoreSubmodules=none``, ``status.submoduleSummary``,
  ``diff.submodule=diff``): no engine git call runs the planted filter;
- the scan after every check (worktree/scan.py): a nested ``.git``, a FIFO ``.gitattributes``, a new file
  over ``editableFileMaxBytes`` are named to the model (run_check) or fail the job (final checks), and are
  removed before any host git command reads the tree;
- a filter the *user* configured (an LFS-style ``filter.lfs.*`` in their global config) on a file the check
  chose: it runs, as the user's own git would run it, with the git runner's allowlisted environment (no
  provider key) — the decision docs/security.md §6 records.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.checks.sandbox import detect
from spotpatch_agent.engine.gates import run_final_checks
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from spotpatch_agent.worktree.scan import oversized_to_stage
from spotpatch_agent.worktree.validate import validate_changeset
from tests.conftest import git

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the confinement proven here is Linux's"),
]

KEY_ENV = "SPOTPATCH_ESCAPE_PROVIDER_KEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Setup:
    project: Path
    wt: Worktree
    home: Path
    marker: Path  # written by a planted repository's filter: must never exist

    def executor(self, *checks: CheckConfig, sandbox: str = "required") -> ToolExecutor:
        return ToolExecutor(self.wt.path, Limits(), tools=["run_check"], checks=checks,
                            sandbox=sandbox, project_root=self.project)  # type: ignore[arg-type]


def _project(base: Path) -> Path:
    lib = base / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "x.txt").write_text("x\n")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    project = base / "project"
    (project / "src").mkdir(parents=True)
    git(project, "init", "-q", "-b", "main")
    (project / "src" / "a.ts").write_text("export const a = 1;\n")
    (project / "assets").mkdir()
    (project / "assets" / "big.bin").write_bytes(b"\x00" * (2 * 1024 * 1024))  # tracked, over the size cap
    (project / ".gitignore").write_text("node_modules\n")
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "project with a submodule")
    return project


@pytest.fixture
async def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(KEY_ENV, "sk-escape-" + secrets.token_hex(12))
    project = _project(tmp_path)
    wt = await create_worktree(project, "job-escape")
    try:
        yield Setup(project=project, wt=wt, home=home, marker=tmp_path / "PLANTED-FILTER-RAN")
    finally:
        await remove_worktree(project, wt)


def py_check(check_id: str, script: str, **fields: object) -> CheckConfig:
    return CheckConfig(id=check_id, name=check_id.title(), command=sys.executable, args=["-c", script], **fields)


def plant_script(repo_dir: str, marker: Path) -> str:
    """A check's Python: make ``repo_dir`` a repository whose clean filter writes ``marker`` on whoever runs
    it, with a committed file then modified at the same size (git must run the filter to hash it)."""
    return f'''
import os, subprocess, sys
d = {repo_dir!r}
G = ["git", "-c", "user.name=x", "-c", "user.email=x@x"]
try:
    os.makedirs(d, exist_ok=True)
    subprocess.run(G + ["init", "-q", d], check=True, capture_output=True)
    subprocess.run(G + ["-C", d, "config", "filter.x.clean", "echo ran > {marker}; cat"], check=True)
    open(d + "/.gitattributes", "w").write("* filter=x\\n")
    open(d + "/f.txt", "w").write("aaaa\\n")
    subprocess.run(G + ["-C", d, "add", "-A"], check=True, capture_output=True)
    subprocess.run(G + ["-C", d, "commit", "-qm", "i"], check=True, capture_output=True)
    open(d + "/f.txt", "w").write("bbbb\\n")
except (OSError, subprocess.CalledProcessError) as exc:
    print("PLANT DENIED:", type(exc).__name__, getattr(exc, "stderr", b"") or exc)
    sys.exit(1)
print("PLANTED", d)
'''


def plant_on_host(repo_dir: Path, marker: Path) -> None:
    """The same plant made by the test itself (a check that got past the sandbox's mount)."""
    git(repo_dir, "init", "-q")
    git(repo_dir, "config", "filter.x.clean", f"echo ran > {marker}; cat")
    (repo_dir / ".gitattributes").write_text("* filter=x\n")
    (repo_dir / "f.txt").write_text("aaaa\n")
    git(repo_dir, "add", "-A")
    git(repo_dir, "commit", "-qm", "planted")
    (repo_dir / "f.txt").write_text("bbbb\n")
    marker.unlink()  # the plant's own `git add` ran the filter; from here on, only the engine's git could


async def needs_bwrap() -> None:
    if (await detect()).confinement is None:
        pytest.skip("bubblewrap cannot confine a check here")


# ---------------------------------------------------------------- the submodule escape


async def test_a_check_cannot_plant_a_repository_in_a_gitlink_directory(setup: Setup) -> None:
    """The break attempt itself, 3 of 3 before the fix: now the gitlink directory is an empty read-only
    view in the sandbox, and whatever happens, no host git call runs a filter of the check's making."""
    await needs_bwrap()
    ex = setup.executor(py_check("plant", plant_script("vendor/lib", setup.marker)))
    result = await ex.execute("run_check", '{"checkId": "plant"}')
    await ex.fingerprint()
    assert not setup.marker.exists(), "a host git call ran the filter a check planted"
    assert "PLANT DENIED" in result.output and "PLANTED" not in result.output.replace("PLANT DENIED", "")
    assert os.listdir(setup.wt.path / "vendor" / "lib") == []


async def test_host_git_never_runs_a_filter_of_a_repository_in_a_gitlink_directory(setup: Setup) -> None:
    """Defence in depth: the plant made on the host, and the user's global config asking git to look into
    submodules every way it can. The fingerprint, the staging and the result diff run no planted filter."""
    (setup.home / ".gitconfig").write_text(
        "[submodule]\n\trecurse = true\n[diff]\n\tignoreSubmodules = none\n\tsubmodule = diff\n"
        "[status]\n\tsubmoduleSummary = true\n"
    )
    plant_on_host(setup.wt.path / "vendor" / "lib", setup.marker)
    ex = setup.executor()
    await ex.fingerprint()
    await ex.context.diff_check("src/a.ts")
    await result_diff(setup.wt)
    assert not setup.marker.exists(), "a host git call ran the filter of a repository inside the worktree"


async def test_unconfined_the_plant_succeeds_and_still_nothing_runs(setup: Setup,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``sandbox: "warn"`` on a machine without a sandbox: nothing stops the check writing the gitlink's
    directory, so the plant succeeds. The host's git still runs none of it, and the scan removes the
    repository and tells the model before the fingerprint."""
    monkeypatch.setenv("SPOTPATCH_SIMULATE_NO_SANDBOX", "1")
    ex = setup.executor(py_check("plant", plant_script("vendor/lib", setup.marker)), sandbox="warn")
    result = await ex.execute("run_check", '{"checkId": "plant"}')
    assert "PLANTED vendor/lib" in result.output and "UNCONFINED" in result.output.upper()
    assert setup.marker.exists()  # the check's own `git add` inside its repository ran the filter, in the check
    setup.marker.unlink()
    assert not result.ok and "vendor/lib/.git (a git repository (.git) inside the worktree)" in result.output
    assert not (setup.wt.path / "vendor" / "lib" / ".git").exists()
    await ex.fingerprint()
    await result_diff(setup.wt)
    assert not setup.marker.exists(), "a host git call ran a filter a check planted"


# ---------------------------------------------------------------- the scan after a check (run_check)


async def test_a_nested_repository_left_by_run_check_is_named_and_removed(setup: Setup) -> None:
    await needs_bwrap()
    ex = setup.executor(py_check("nest", plant_script("tools/planted", setup.marker)))
    result = await ex.execute("run_check", '{"checkId": "nest"}')
    assert not result.ok and result.retryable and result.code is None
    assert "tools/planted/.git (a git repository (.git) inside the worktree)" in result.output, result.output
    assert "SpotPatch removed it" in result.output and "PLANTED tools/planted" in result.output
    assert str(setup.wt.path) not in result.output
    assert not (setup.wt.path / "tools" / "planted" / ".git").exists()
    assert ex.checks_changed_files  # its other files stay, as a check's writes (auto never applies them)
    await result_diff(setup.wt)
    assert not setup.marker.exists()


async def test_a_fifo_gitattributes_left_by_run_check_does_not_stall_the_job(setup: Setup) -> None:
    """Issue 25 LOW: a FIFO .gitattributes (or .gitignore) blocked the next git status until its timeout."""
    await needs_bwrap()
    script = "import os; os.mkfifo('src/.gitattributes'); os.mkfifo('.gitignore.d'); print('made')"
    ex = setup.executor(py_check("fifo", script))
    started = time.monotonic()
    with anyio.fail_after(30):
        result = await ex.execute("run_check", '{"checkId": "fifo"}')
        await ex.fingerprint()
    assert time.monotonic() - started < 30
    assert not result.ok
    assert "src/.gitattributes (a FIFO (named pipe): git would block reading it)" in result.output, result.output
    assert not os.path.lexists(setup.wt.path / "src" / ".gitattributes")
    assert not os.path.lexists(setup.wt.path / ".gitignore.d")


async def test_a_large_file_left_by_run_check_never_reaches_the_object_store(setup: Setup) -> None:
    """Issue 25 LOW: a check's big file was staged by ``git add --all`` into the user's object store. Now the
    model is told, the file stays (it could be a tracked file of the user's), and validation refuses the
    change before staging: no blob of it is ever written. Growing the tracked 2 MiB asset is refused the same
    way; the asset itself (over the cap, but the baseline's) is never reported."""
    await needs_bwrap()
    size = Limits().get("editableFileMaxBytes") + 1
    ex = setup.executor(py_check("big", f"open('dump.bin', 'wb').write(b'\\x01' * {size}); print('dumped')"))
    objects_before = _object_files(setup.project)
    result = await ex.execute("run_check", '{"checkId": "big"}')
    assert not result.ok and f"dump.bin (a file of {size} bytes, over editableFileMaxBytes" in result.output
    assert "dump.bin stays, but a change that holds such a file is rejected" in result.output, result.output
    assert "assets/big.bin" not in result.output and "dumped" in result.output
    with pytest.raises(JobFailure) as caught:
        await validate_changeset(setup.wt, Limits())
    assert caught.value.code == ErrorCode.CHANGESET_REJECTED
    assert f"'dump.bin' is {size} bytes (limit editableFileMaxBytes" in caught.value.message
    (setup.wt.path / "dump.bin").unlink()
    with (setup.wt.path / "assets" / "big.bin").open("ab") as grown:
        grown.write(b"more")
    with pytest.raises(JobFailure) as caught:
        await validate_changeset(setup.wt, Limits())
    assert "'assets/big.bin' is" in caught.value.message
    assert _object_files(setup.project) == objects_before, "a check's large file reached the user's object store"


async def test_a_tracked_large_file_rewritten_at_the_same_size_is_not_refused(setup: Setup) -> None:
    """A lockfile over the cap that a check regenerates at the same size adds nothing the repository does not
    already hold: reported to the model (it changed), never refused before staging."""
    assert await oversized_to_stage(setup.wt.path, max_file_bytes=Limits().get("editableFileMaxBytes")) is None
    big = setup.wt.path / "assets" / "big.bin"
    big.write_bytes(b"\x02" * big.stat().st_size)
    assert await oversized_to_stage(setup.wt.path, max_file_bytes=Limits().get("editableFileMaxBytes")) is None


async def test_a_large_file_git_ignores_is_the_checks_business(setup: Setup) -> None:
    """A dependency install or build output under an ignored directory (``node_modules``) is never staged:
    left alone, not reported."""
    await needs_bwrap()
    size = Limits().get("editableFileMaxBytes") + 1
    script = (f"import os; os.makedirs('node_modules/pkg'); open('node_modules/pkg/big.js', 'wb').write(b'1' * {size});"
              "print('installed')")
    ex = setup.executor(py_check("install", script))
    result = await ex.execute("run_check", '{"checkId": "install"}')
    assert result.ok and "removed" not in result.output, result.output
    assert (setup.wt.path / "node_modules" / "pkg" / "big.js").stat().st_size == size


async def test_a_clean_check_is_not_reported_and_the_tracked_large_file_is_fine(setup: Setup) -> None:
    await needs_bwrap()
    ex = setup.executor(py_check("ok", "print('fine')"))
    result = await ex.execute("run_check", '{"checkId": "ok"}')
    assert result.ok and "removed" not in result.output and not ex.checks_changed_files


def _object_files(project: Path) -> set[Path]:
    return {p for p in (project / ".git" / "objects").rglob("*") if p.is_file()}


# ---------------------------------------------------------------- the scan around the final checks


async def test_a_final_check_that_leaves_a_repository_fails_the_job_naming_it(setup: Setup) -> None:
    await needs_bwrap()
    check = py_check("nest", plant_script("tools/planted", setup.marker), required=True)
    ex = setup.executor()
    seen = []
    with pytest.raises(JobFailure) as caught:
        await run_final_checks([check], cwd=setup.wt.path, limits=Limits(), fresh={}, fingerprint=ex.fingerprint,
                               on_result=seen.append, project_root=setup.project)
    assert caught.value.code == ErrorCode.CHECK_FAILED
    assert "Check nest (Nest) left tools/planted/.git (a git repository (.git) inside the worktree)" in \
        caught.value.message
    assert str(setup.wt.path) not in caught.value.message
    assert len(seen) == 1 and not (setup.wt.path / "tools" / "planted" / ".git").exists()
    assert not setup.marker.exists()


async def test_a_repository_that_cannot_be_removed_fails_the_job_and_is_never_staged(
        setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """When removal fails (a normal user's check can ``chmod 000`` a directory), the job stops with
    ``CHECK_FAILED``, and the failed job's attempt to keep its diff (validation) refuses the tree before
    ``git add --all`` reads it."""
    await needs_bwrap()

    def cannot_remove(root: Path, hazards: object) -> None:
        raise PermissionError("simulated")

    monkeypatch.setattr("spotpatch_agent.worktree.scan.remove_hazards", cannot_remove)
    ex = setup.executor(py_check("nest", plant_script("tools/planted", setup.marker)))
    with pytest.raises(JobFailure) as caught:
        await ex.execute("run_check", '{"checkId": "nest"}')
    assert caught.value.code == ErrorCode.CHECK_FAILED and "tools/planted/.git" in caught.value.message
    with pytest.raises(JobFailure) as rejected:
        await validate_changeset(setup.wt, Limits())
    assert "'tools/planted' holds a git repository (.git)" in rejected.value.message
    assert not setup.marker.exists()


async def test_a_worktree_that_already_holds_a_nested_repository_runs_no_check(setup: Setup) -> None:
    """Whatever put it there, a tree holding a ``.git`` below its root gets no check and no git command."""
    nested = setup.wt.path / "stray"
    nested.mkdir()
    (nested / ".git").write_text("gitdir: /nowhere\n")
    ex = setup.executor(py_check("ok", "print('fine')"))
    with pytest.raises(JobFailure) as caught:
        await ex.execute("run_check", '{"checkId": "ok"}')
    assert caught.value.code == ErrorCode.CHECK_FAILED and "stray/.git" in caught.value.message


# ---------------------------------------------------------------- a filter the user configured


async def test_a_user_configured_lfs_filter_on_a_check_written_file_runs_as_the_users_git_would(
        setup: Setup, tmp_path: Path) -> None:
    """Decision (docs/security.md §6): a filter command from the user's own configuration runs on a file a
    check chose, exactly as the user's git would run it on any checkout — it is the user's program, the model
    could name the same file in a reviewed ``.gitattributes`` through apply_patch, and skipping it would make
    the diff differ from what the user's git records. What it gets is the git runner's: the allowlisted
    environment (no provider key), the bounded, killed-on-exit process tree. Nothing a repository inside the
    worktree configures ever runs. The check's write marks the job (auto never applies it)."""
    await needs_bwrap()
    record = tmp_path / "lfs-ran.txt"
    (setup.home / ".gitconfig").write_text(
        f'[filter "lfs"]\n\tclean = "env > {record}; cat"\n\tsmudge = cat\n\trequired = false\n'
    )
    script = ("open('.gitattributes', 'w').write('* filter=lfs\\n');"
              "open('src/a.ts', 'w').write('export const a = 2;\\n'); print('attributed')")
    ex = setup.executor(py_check("lfs", script))
    result = await ex.execute("run_check", '{"checkId": "lfs"}')
    assert result.ok, result.output
    assert ex.checks_changed_files
    assert record.exists(), "the user's configured filter did not run on the check-written file"
    recorded = record.read_text()
    assert os.environ[KEY_ENV] not in recorded and KEY_ENV not in recorded
    assert not stat.S_ISFIFO(os.lstat(setup.wt.path / ".gitattributes").st_mode)


# ---------------------------------------------------------------- through the real engine


def _patch_new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


PLANT_PY = '''import os, subprocess, sys
d, marker = sys.argv[1], sys.argv[2]
G = ["git", "-c", "user.name=x", "-c", "user.email=x@x"]
try:
    os.makedirs(d, exist_ok=True)
    subprocess.run(G + ["init", "-q", d], check=True, capture_output=True)
    subprocess.run(G + ["-C", d, "config", "filter.x.clean", "echo ran > " + marker + "; cat"], check=True)
    open(d + "/.gitattributes", "w").write("* filter=x\\n")
    open(d + "/f.txt", "w").write("aaaa\\n")
    subprocess.run(G + ["-C", d, "add", "-A"], check=True, capture_output=True)
    subprocess.run(G + ["-C", d, "commit", "-qm", "i"], check=True, capture_output=True)
    open(d + "/f.txt", "w").write("bbbb\\n")
    if sys.argv[3:] == ["--only-git"]:  # leave nothing but the repository (the rest would fail validation)
        os.remove(d + "/.gitattributes")
        os.remove(d + "/f.txt")
except (OSError, subprocess.CalledProcessError) as exc:
    print("PLANT DENIED:", type(exc).__name__)
    sys.exit(1)
print("PLANTED", d)
'''


def test_the_escape_through_the_real_engine_in_a_repository_with_submodules_nested_repos_and_lfs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hostile suite's repository shape (issue 25 acceptance 0): a submodule, an ignored nested
    repository, an LFS-style filter in the user's global config used by the project's attributes. A real
    ``serve`` job: the model writes the plant script and runs it on the gitlink (required check) and on a
    new directory; the host's final stage runs the required one again. No planted filter ever runs, the
    model is told what was removed, the job fails on its required check, no key reaches the user's filter."""
    from spotpatch_agent.provider.scripted import ScriptedProviderServer
    from tests.engine_client import EngineProcess

    home = tmp_path / "home"
    home.mkdir()
    lfs_record = tmp_path / "lfs-env.txt"
    (home / ".gitconfig").write_text(f'[filter "lfs"]\n\tclean = "env > {lfs_record}; cat"\n\tsmudge = cat\n')
    monkeypatch.setenv("HOME", str(home))
    project = _project(tmp_path)
    (project / ".gitattributes").write_text("*.dat filter=lfs\n")
    (project / "data.dat").write_text("payload\n")
    (project / ".gitignore").write_text("node_modules\nthird_party/\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "lfs-style data")
    nested = project / "third_party" / "nested"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    marker = tmp_path / "PLANTED-FILTER-RAN"
    key = "sk-escape-key-" + secrets.token_hex(12)

    def check(check_id: str, target: str, required: bool) -> dict:
        return {"id": check_id, "name": check_id, "command": sys.executable,
                "args": ["plant.py", target, str(marker), *([] if required else ["--only-git"])],
                "required": required, "timeoutSec": 60}

    def call(cid: str, name: str, args: dict) -> dict:
        return {"id": cid, "name": name, "arguments": args}

    with ScriptedProviderServer([]) as server:
        engine = EngineProcess(env={"HOME": str(home), KEY_ENV: key})
        try:
            server.add_turns(
                {"toolCalls": [call("w", "apply_patch", {"patch": _patch_new_file("plant.py", PLANT_PY)})]},
                {"toolCalls": [call("r-gitlink", "run_check", {"checkId": "plant-gitlink"})]},
                {"toolCalls": [call("r-nested", "run_check", {"checkId": "plant-nested"})]},
                {"text": "Done.", "finishReason": "stop"},
            )
            config = {
                "providers": [{"id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
                               "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
                "checks": [check("plant-gitlink", "vendor/lib", True), check("plant-nested", "tools/planted", False)],
            }
            init = engine.initialize(project, config)
            assert init["capabilities"]["checksSandbox"]["state"] == "confined"
            job = engine.call("job/create", {"annotation": {
                "annotationId": "a", "pageUrl": "/", "targets": [{
                    "index": 1, "instruction": "Make it say 2", "source": {"file": "src/a.ts", "line": 1},
                    "element": {"tagName": "div"}}]}, "modelProfileId": "m"})
            final = engine.wait_status(job["jobId"], {"failed", "awaiting-review", "cancelled"}, timeout=180)
            events = engine.events(job["jobId"])
            output = engine.all_output()
        finally:
            engine.close()
    texts = {m["tool_call_id"]: m["content"] for body in server.requests for m in body.get("messages", [])
             if m.get("role") == "tool"}
    assert "PLANT DENIED" in texts["r-gitlink"], texts["r-gitlink"]
    assert "tools/planted/.git (a git repository (.git) inside the worktree)" in texts["r-nested"], texts["r-nested"]
    assert final["status"] == "failed", final
    error = next(e["error"] for e in events if e["kind"] == "error")
    assert error["code"] == "CHECK_FAILED" and "plant-gitlink" in error["message"], error
    host_runs = [e for e in events if e["kind"] == "check" and e["checkId"] == "plant-gitlink"]
    assert host_runs and "PLANT DENIED" in host_runs[-1]["output"]
    assert not marker.exists(), "a host git call ran a filter a check planted"
    assert lfs_record.exists() and key not in lfs_record.read_text() and KEY_ENV not in lfs_record.read_text()
    assert key not in repr(events) + output
    assert (nested / ".git").is_dir()  # the user's own nested repository is untouched
