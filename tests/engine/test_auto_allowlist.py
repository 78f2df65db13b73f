"""``auto`` writes only what its allowlist says (issue 25, MEDIUM "`auto` applies files that execute later,
unreviewed"): everything an editor, shell, CI, bundler, dev server, test runner, package manager or the
browser as a worker runs or loads goes to review, named with its kind (engine/auto_allow.py).

Repro of the break attempt: 10 of 10 such files were applied by ``auto`` (``.vscode/tasks.json`` with
``runOn: folderOpen``, a devcontainer ``postStartCommand``, ``uno.config.ts``, ``.storybook/main.ts``, a
``Makefile``, a service worker …) because the gate was a denylist that did not name them."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from spotpatch_agent.engine import gates
from spotpatch_agent.engine.auto_allow import added_loader_rules, executable_files, is_auto_writable, review_kind
from spotpatch_agent.protocol.models import FileStat
from tests.conftest import git, make_repo
from tests.engine._gates_support import APP, DONE, FILES, KEY_ENV, call, edit, py_check, run_one_job

AUTO = {"modes": {"auto": True}, "request": {"applyMode": "auto"}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))


def _blockers(path: str) -> list[str]:
    return gates.auto_apply_blockers(gates.GateFacts(
        capability_proven=True, checks=[], results=[],
        files=[FileStat(path=path, added=1, removed=0, status="added")]))


#: (path, a fragment of the kind it is named with). Each was applied by auto before the allowlist.
MUST_REVIEW = [
    (".vscode/tasks.json", "dot-directory (.vscode/"),
    (".devcontainer/devcontainer.json", "dot-directory (.devcontainer/"),
    ("uno.config.ts", "configuration file"),
    ("web/unocss.config.js", "configuration file"),
    (".storybook/main.ts", "dot-directory (.storybook/"),
    ("Makefile", "build or task file"),
    ("packages/ui/Dockerfile", "build or task file"),
    ("gulpfile.js", "build or task file"),
    ("public/sw.js", "worker"),
    ("public/mockServiceWorker.js", "worker"),
    ("src/service-worker.ts", "worker"),
    ("src/serviceWorker.js", "worker"),
    ("src/image.worker.ts", "worker"),
    ("src/firebase-messaging-sw.js", "worker"),
    ("src/background.ts", "worker"),
    ("src/sw/index.ts", "worker"),
    ("public/app.js", "static file (public/"),
    ("index.html", "HTML entry page"),
    ("src/index.html", "HTML entry page"),
    (".editorconfig", "dotfile"),
    ("src/.browserslistrc", "dotfile"),
    ("src/eslintrc.json", "rc file"),
    ("scripts/deploy.ts", "script or tool directory (scripts/"),
    ("bin/cli.js", "script or tool directory (bin/"),
    ("src/deploy.sh", "a .sh file"),
    ("src/tool.py", "a .py file"),
    ("src/lib/util.mjs", "a .mjs file"),
    ("src/vite-env.d.ts", "type declaration"),
    ("src/types/global.d.ts", "type declaration"),
    ("src/App.test.tsx", "test"),
    ("src/Button.stories.tsx", "Storybook"),
    ("src/setupTests.ts", "test"),
    ("tests/app.spec.ts", "test"),
    ("src/__tests__/App.tsx", "test code"),
    ("src/hooks.server.ts", "server-side"),
    ("src/routes/+page.server.ts", "server-side"),
    ("src/middleware.ts", "server-side"),
    ("src/setupProxy.js", "server-side"),
    ("app/routes.ts", "server-side"),
    ("pages/api/hello.ts", "server-side"),
    ("src/main/index.ts", "server-side"),
    ("src/manifest.json", "manifest"),
    ("src/package.json", "manifest"),
    ("src/electron.ts", "server-side"),
    ("src/AGENTS.md", "coding agents"),
    ("README.md", "project root"),
    ("server.js", "server-side"),
    ("index.ts", "project root"),
    ("docs/guide.md", "outside the source directories"),
    ("src/locales/en.yml", "a .yml file"),
]

#: What auto may still write without review.
MAY_APPLY = [
    "src/components/ProductCard.tsx", "src/App.vue", "src/styles/app.css", "src/lib/format.ts",
    "src/pages/About.svelte", "src/locales/en.json", "packages/web/src/App.jsx", "app/page.tsx",
    "src/api/client.ts", "src/hooks/useCart.ts", "src/assets/logo.svg", "src/styles/theme.scss",
    "src/components/WorkerList.tsx", "src/components/ServerStatus.tsx", "src/components/Src.tsx",
    "src/content/about.md", "src/config.ts", "components/Header.vue", "src/components/Background.tsx",
]


@pytest.mark.parametrize(("path", "kind"), MUST_REVIEW)
def test_auto_falls_back_to_review_for_a_file_that_tools_run(path: str, kind: str) -> None:
    """The gate names the path and its kind: "<path> is <kind>"."""
    found = review_kind(path)
    assert found is not None and kind in found, found
    blockers = _blockers(path)
    named_earlier = len(blockers) == 1 and path in blockers[0]  # package.json: the dependency gate names it
    assert f"{path} is {found}" in blockers or named_earlier, blockers


@pytest.mark.parametrize("path", MAY_APPLY)
def test_auto_still_applies_ui_source_styles_markup_and_content(path: str) -> None:
    assert is_auto_writable(path), review_kind(path)
    assert _blockers(path) == []


@pytest.mark.parametrize("path", ["SRC/.VSCode/tasks.json", "Src/Image.Worker.TS", "src/App.TEST.tsx", "MAKEFILE",
                                  "src/Tool.PY"])
def test_the_rule_ignores_case(path: str) -> None:
    """A case-insensitive file system writes ``Src/Image.Worker.TS`` where ``src/image.worker.ts`` is."""
    assert not is_auto_writable(path)
    assert is_auto_writable("SRC/Components/Card.TSX")


def test_a_file_named_by_an_earlier_gate_is_not_named_twice_and_many_files_are_counted() -> None:
    files = [FileStat(path=p, added=1, removed=0, status="modified")
             for p in ["package.json", ".github/workflows/ci.yml", *(f"scripts/s{i}.sh" for i in range(7))]]
    reasons = gates.auto_apply_blockers(gates.GateFacts(capability_proven=True, checks=[], results=[], files=files))
    assert reasons[:2] == ["the change touches dependency files: package.json",
                           "the change touches git, hook, CI or environment configuration: .github/workflows/ci.yml"]
    assert reasons[2:] == [*(f"scripts/s{i}.sh is in a script or tool directory (scripts/: run as commands)"
                             for i in range(5)), "2 more files are outside what auto may write"]


TASKS = ('{"version": "2.0.0", "tasks": [{"label": "x", "type": "shell", "command": "touch /tmp/pwned",\n'
         ' "runOptions": {"runOn": "folderOpen"}}]}\n')


@pytest.mark.anyio
async def test_auto_job_that_writes_vscode_tasks_ends_awaiting_review_and_writes_nothing(tmp_path: Path) -> None:
    """End to end (real engine, scripted provider, a passing required check): the model edits the component
    and adds ``.vscode/tasks.json`` with ``runOn: folderOpen`` (VS Code runs it when the folder opens).
    Before the allowlist the job ended ``applied`` and the task was in the user's tree."""
    root = make_repo(tmp_path / "repo", FILES)
    create = {"toolCalls": [call("t", "apply_patch", {"patch": (
        "diff --git a/.vscode/tasks.json b/.vscode/tasks.json\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/.vscode/tasks.json\n@@ -0,0 +1,2 @@\n" + "".join("+" + line + "\n" for line in TASKS.splitlines()))})]}
    result = await run_one_job(root, [edit("w"), create, DONE], checks=[py_check("ok", "print('ok')")], **AUTO)
    assert result.snap is not None and result.snap.status == "awaiting-review", (result.statuses, result.snap)
    assert result.snap.message == (
        "Not applied automatically: .vscode/tasks.json is under a dot-directory (.vscode/: editor, tool or CI "
        "configuration). Review the change and apply it yourself.")
    assert result.diff is not None and {f.path for f in result.diff.files} == {"src/App.tsx", ".vscode/tasks.json"}
    assert "applying" not in result.statuses
    assert not (root / ".vscode").exists() and (root / "src/App.tsx").read_text() == APP
    assert git(root, "status", "--porcelain") == ""


# ---------------------------------------------------------------- an allowlisted stylesheet that loads a module


LOADS = "the change adds a stylesheet rule that loads a JavaScript module into Node (@plugin, @config) to "


def _new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


@pytest.mark.parametrize("rule", ['@plugin "./lib/theme.js";', "@config '../tailwind.js';", '  @PLUGIN "x";',
                                  'a{}@plugin "x";', '@pl\\75gin "./x.js";'])
def test_a_stylesheet_that_adds_a_module_loading_rule_goes_to_review(rule: str) -> None:
    """Tailwind v4's ``@plugin``/``@config`` and Less's ``@plugin`` make the dev server load a JavaScript file
    into Node: with both files on the allowlist (``src/lib/theme.js``, ``src/App.css``) auto applied code that
    the next CSS rebuild runs on the host, unconfined."""
    diff = _new_file("src/lib/theme.js", "module.exports = () => {};") + _new_file(
        "src/App.css", f'@import "tailwindcss";\n{rule}\n.a {{ color: red; }}')
    files = [FileStat(path=p, added=1, removed=0, status="added") for p in ("src/lib/theme.js", "src/App.css")]
    reasons = gates.auto_apply_blockers(gates.GateFacts(capability_proven=True, checks=[], results=[], files=files,
                                                        diff=diff))
    assert reasons == [LOADS + "src/App.css"]


def test_an_existing_rule_and_ordinary_css_do_not_block_auto() -> None:
    """Only added lines count: a context or removed ``@plugin`` line, ``@media`` and a script's text do not."""
    diff = ('diff --git a/src/App.css b/src/App.css\nindex 1111111..2222222 100644\n--- a/src/App.css\n'
            '+++ b/src/App.css\n@@ -1,3 +1,3 @@\n @plugin "./theme.js";\n-.a { color: red; }\n'
            '-@plugin "./old.js";\n+.a { color: blue; }\n+@media (width > 1px) { .b { margin: 0 } }\n'
            + _new_file("src/lib/mail.ts", 'export const to = "admin@plugin.example";'))
    assert added_loader_rules(diff) == []


@pytest.mark.anyio
async def test_auto_job_that_adds_a_tailwind_plugin_to_its_stylesheet_ends_awaiting_review(tmp_path: Path) -> None:
    """End to end: the model writes ``src/lib/theme.js`` and a stylesheet with ``@plugin "./lib/theme.js"``;
    both paths are on the allowlist, the diff is what sends the job to review."""
    root = make_repo(tmp_path / "repo", FILES)
    patch = (_new_file("src/lib/theme.js", "module.exports = function () {};")
             + _new_file("src/App.css", '@import "tailwindcss";\n@plugin "./lib/theme.js";'))
    patch = patch.replace("index 0000000..1111111\n", "")
    turns = [edit("w"), {"toolCalls": [call("p", "apply_patch", {"patch": patch})]}, DONE]
    result = await run_one_job(root, turns, checks=[py_check("ok", "print('ok')")], **AUTO)
    assert result.snap is not None and result.snap.status == "awaiting-review", (result.statuses, result.snap)
    assert LOADS + "src/App.css" in (result.snap.message or "")
    assert not (root / "src/App.css").exists() and (root / "src/App.tsx").read_text() == APP


# ---------------------------------------------------------------- an allowlisted name on an executable file


def test_an_edit_of_an_executable_file_goes_to_review_and_names_are_read_from_the_header() -> None:
    """A tracked ``src/tools.js`` with mode 100755 (a shebang script) keeps its mode when edited; whoever
    runs it by name runs the model's code. Names with spaces are read whole from ``diff --git``."""
    diff = ("diff --git a/src/my cli.js b/src/my cli.js\nindex 1111111..2222222 100755\n--- a/src/my cli.js\n"
            "+++ b/src/my cli.js\t\n@@ -1 +1 @@\n-old\n+new\n"
            "diff --git a/src/App.tsx b/src/App.tsx\nindex 1111111..2222222 100644\n--- a/src/App.tsx\n"
            "+++ b/src/App.tsx\n@@ -1 +1 @@\n-index 1 100755\n+diff --git a/x b/x\n")
    assert executable_files(diff) == ["src/my cli.js"]
    files = [FileStat(path=p, added=1, removed=1, status="modified") for p in ("src/my cli.js", "src/App.tsx")]
    assert gates.auto_apply_blockers(gates.GateFacts(capability_proven=True, checks=[], results=[], files=files,
                                                     diff=diff)) == [
        "the change edits executable files (run as commands): src/my cli.js"]


@pytest.mark.anyio
async def test_auto_job_that_edits_an_executable_source_file_ends_awaiting_review(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES | {"src/tools.js": "#!/usr/bin/env node\nconsole.log('a');\n"})
    os.chmod(root / "src/tools.js", 0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "an executable")
    turns = [edit("w"), edit("x", "'a'", "'b'", "src/tools.js"), DONE]
    result = await run_one_job(root, turns, checks=[py_check("ok", "print('ok')")], **AUTO)
    assert result.snap is not None and result.snap.status == "awaiting-review", (result.statuses, result.snap)
    assert "the change edits executable files (run as commands): src/tools.js" in (result.snap.message or "")
    assert "'a'" in (root / "src/tools.js").read_text() and (root / "src/App.tsx").read_text() == APP
