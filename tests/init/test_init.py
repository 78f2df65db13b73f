"""``spotpatch-agent init`` (issue 29; docs/adopt.md), run as a user runs it: the console script in a
subprocess, in real git repositories, with the real plugin tarball and config editor (built from node-shim/
once per run: ``spotpatch_agent/init/assets.py``).

The package manager here is a stand-in on PATH (``npm``/``pnpm``): it records its argv and does what an
install does to the files init cares about (the dev dependency in package.json, the lockfile, the package in
node_modules) — or fails as npm fails without a registry. The real npm, pnpm and yarn on real
``npm create vite`` apps, through the page, are node-shim/test/init/init-templates.test.mjs's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git

ENGINE = Path(sys.executable).parent / "spotpatch-agent"

FAKE_PM = r"""#!{python}
import json, os, pathlib, sys
name = pathlib.Path(sys.argv[0]).name
if not pathlib.Path.cwd().is_relative_to(os.environ["FAKE_PM_ROOT"]) or len(sys.argv) < 3:
    # Only an app of this test, only an install: never node-shim/ (a build of the plugin there needs the real npm).
    sys.exit(f"fake {{name}}: refused {{sys.argv[1:]}} in {{os.getcwd()}}")
pathlib.Path(os.environ["FAKE_PM_LOG"]).open("a").write(json.dumps([name, *sys.argv[1:]]) + "\n")
if os.environ.get("FAKE_PM_SLEEP"):
    pathlib.Path(os.environ["FAKE_PM_LOG"] + ".started").write_text("")
    import time
    time.sleep(float(os.environ["FAKE_PM_SLEEP"]))
if os.environ.get("FAKE_PM_FAIL"):
    sys.stderr.write("npm error code ENOTFOUND\nnpm error network request to https://registry.npmjs.org/ajv failed\n")
    sys.exit(1)
if sys.argv[1] in ("uninstall", "remove"):
    package = json.loads(pathlib.Path("package.json").read_text())
    package.get("devDependencies", {{}}).pop(sys.argv[-1], None)
    pathlib.Path("package.json").write_text(json.dumps(package, indent=2) + "\n")
    if "--package-lock-only" not in sys.argv:
        import shutil
        shutil.rmtree("node_modules/" + sys.argv[-1], ignore_errors=True)
    sys.exit(0)
spec = sys.argv[-1]
tarball = pathlib.Path(spec.removeprefix("file:"))
package = json.loads(pathlib.Path("package.json").read_text())
package.setdefault("devDependencies", {{}})["vite-plugin-spotpatch"] = spec
pathlib.Path("package.json").write_text(json.dumps(package, indent=2) + "\n")
lock = "pnpm-lock.yaml" if name == "pnpm" else "package-lock.json"
pathlib.Path(lock).write_text((pathlib.Path(lock).read_text() if pathlib.Path(lock).exists() else "") + spec + "\n")
module = pathlib.Path("node_modules/vite-plugin-spotpatch")
module.mkdir(parents=True, exist_ok=True)
import tarfile
with tarfile.open(tarball) as archive:
    (module / "package.json").write_bytes(archive.extractfile("package/package.json").read())
"""

REACT_CONFIG = """import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// https://vite.dev/config/
export default defineConfig({
  plugins: [react()],
})
"""


@pytest.fixture(scope="session")
def assets() -> None:
    """The plugin tarball and the editor, built from node-shim/ once when missing or stale."""
    from spotpatch_agent.init.assets import plugin_assets

    plugin_assets()


@pytest.fixture
def env(tmp_path: Path, assets: None) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("npm", "pnpm"):
        tool = bin_dir / name
        tool.write_text(FAKE_PM.format(python=sys.executable))
        tool.chmod(0o755)
    for name in ("git", "node"):
        real = subprocess.run(["which", name], capture_output=True, text=True, check=True).stdout.strip()
        (bin_dir / name).symlink_to(real)
    return {**os.environ, "PATH": str(bin_dir), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "FAKE_PM_LOG": str(tmp_path / "pm.log"), "FAKE_PM_ROOT": str(tmp_path), "OPENAI_API_KEY": ""}


def make_app(root: Path, *, config: str | None = REACT_CONFIG, vite: str = "^8.0.0", lock: str = "package-lock.json",
             commit: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps({
        "name": "my-app", "private": True, "type": "module", "scripts": {"dev": "vite"},
        "devDependencies": {"vite": vite}}, indent=2) + "\n")
    (root / lock).write_text("lock\n")
    (root / "index.html").write_text("<div id=app></div>\n")
    (root / ".gitignore").write_text("node_modules\ndist\n")
    if config is not None:
        (root / "vite.config.ts").write_text(config)
        (root / "tsconfig.json").write_text("{}\n")
    if commit:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "app")
    return root


def init(app: Path, env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENGINE), "init", *args], cwd=cwd or app, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but .git and node_modules, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts
            and "node_modules" not in p.relative_to(root).parts}


def pm_calls(env: dict[str, str]) -> list[list[str]]:
    log = Path(env["FAKE_PM_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_init_sets_up_the_app_then_changes_nothing_then_undo_restores_every_byte(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    done = init(app, env, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert pm_calls(env) == [["npm", "install", "--save-dev", "--no-audit", "--no-fund",
                              "file:.spotpatch/" + next((app / ".spotpatch").iterdir()).name]]
    config = (app / "vite.config.ts").read_text()
    assert "import spotpatch from 'vite-plugin-spotpatch'" in config
    assert "plugins: [spotpatch(), react()]," in config, config
    assert "// https://vite.dev/config/" in config, "the user's comment is kept"
    settings = json.loads((app / "spotpatch.config.json").read_text())
    assert settings == {"$schema": "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json",
                        "providers": []}
    assert "/.venv/" in (app / ".gitignore").read_text()
    assert (app / ".gitignore").read_text().startswith("node_modules\ndist\n"), "appended, never rewritten"
    record = json.loads((tmp_path / "config" / "spotpatch" / "engine.json").read_text())
    assert record == {"command": [str(ENGINE.absolute()), "serve"]}
    assert "doctor" in done.stdout and "npm run dev" in done.stdout
    assert "git add .gitignore .spotpatch/" in done.stdout
    assert str(tmp_path) not in done.stdout + done.stderr, "no absolute path of the user's machine"

    after = snapshot(app)
    again = init(app, env, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert snapshot(app) == after, "a second run changes nothing"
    assert len(pm_calls(env)) == 1, "and installs nothing"
    assert "nothing to change" in again.stdout

    undone = init(app, env, "--undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert snapshot(app) == before, "every file byte for byte"
    assert not (app / "node_modules" / "vite-plugin-spotpatch").exists()
    assert (tmp_path / "config" / "spotpatch" / "engine.json").exists(), "per user: other apps may use it"
    assert git(app, "status", "--porcelain") == ""
    assert init(app, env, "--undo").returncode == 1, "nothing left to undo is said"


def test_dry_run_prints_every_diff_and_changes_nothing(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    done = init(app, env, "--dry-run")
    assert done.returncode == 0, done.stderr
    for header in ("+++ b/vite.config.ts", "+++ b/spotpatch.config.json", "+++ b/.gitignore",
                   "+++ b/package.json", "(binary: new file,"):
        assert header in done.stdout, header
    assert "+  plugins: [spotpatch(), react()]," in done.stdout
    assert '+    "vite-plugin-spotpatch": "file:.spotpatch/' in done.stdout
    assert "create $XDG_CONFIG_HOME/spotpatch/engine.json (where the plugin finds this engine, for every app" \
        in done.stdout
    assert "Dry run: nothing was changed." in done.stdout
    assert snapshot(app) == before and pm_calls(env) == []
    assert not (tmp_path / "config").exists()
    assert not (app / ".git" / "spotpatch").exists()


def test_no_network_for_the_install_is_said_and_every_file_is_restored(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    done = init(app, {**env, "FAKE_PM_FAIL": "1"}, "--yes")
    assert done.returncode == 1
    assert "npm could not install the plugin" in done.stderr
    assert "registry looks unreachable" in done.stderr
    assert "Every file init changed was restored." in done.stderr
    assert snapshot(app) == before


def test_a_config_it_cannot_edit_gets_the_lines_to_paste_and_the_rest_is_done(tmp_path: Path, env):
    config = "import { defineConfig } from 'vite'\nimport { plugins } from './plugins'\n\n" \
             "export default defineConfig({ plugins: plugins() })\n"
    app = make_app(tmp_path / "my-app", config=config)
    done = init(app, env, "--yes")
    assert done.returncode == 1, done.stdout
    assert (app / "vite.config.ts").read_text() == config, "never a half-edited config"
    assert "import spotpatch from 'vite-plugin-spotpatch'" in done.stdout
    assert "spotpatch()" in done.stdout and "Add these lines" in done.stdout
    assert (app / "spotpatch.config.json").exists(), "everything else is set up"


def test_monorepo_asks_which_app_without_a_terminal_and_takes_project(tmp_path: Path, env):
    repo = tmp_path / "repo"
    make_app(repo / "apps" / "web", commit=False)
    make_app(repo / "apps" / "docs", commit=False)
    (repo / "package.json").write_text('{"name": "root", "private": true}\n')
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "repo")
    done = init(repo, env, "--yes")
    assert done.returncode == 2
    assert "Several Vite apps here; say which with --project:" in done.stderr
    assert "apps/docs" in done.stderr and "apps/web" in done.stderr
    done = init(repo, env, "--yes", "--project", "apps/web")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = json.loads((repo / "spotpatch.config.json").read_text())
    assert settings["$schema"] == "./apps/web/node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json"
    assert "plugins: [spotpatch(), react()]," in (repo / "apps" / "web" / "vite.config.ts").read_text()


@pytest.mark.parametrize("case", ["no-package-json", "not-vite", "old-vite", "pm-missing", "no-git"])
def test_bad_cases_get_clear_errors_and_change_nothing(tmp_path: Path, env, case: str):
    app = tmp_path / "my-app"
    if case == "no-package-json":
        app.mkdir()
        (app / "index.html").write_text("<p>hi</p>\n")
    elif case == "not-vite":
        make_app(app)
        (app / "package.json").write_text('{"name": "x", "devDependencies": {"webpack": "^5"}}\n')
        (app / "vite.config.ts").unlink()
    elif case == "old-vite":
        make_app(app, vite="^5.4.0")
    elif case == "pm-missing":
        make_app(app, lock="yarn.lock")
    elif case == "no-git":
        make_app(app, commit=False)
    before = snapshot(app)
    done = init(app, env)
    assert done.returncode != 0
    message = done.stderr
    expected = {
        "no-package-json": "No package.json in my-app, and no Vite app below it",
        "not-vite": "my-app is not a Vite app: its package.json does not depend on vite",
        "old-vite": 'This app uses Vite "^5.4.0" (package.json); the SpotPatch plugin needs Vite ^6',
        "pm-missing": "This app uses yarn (yarn.lock), and yarn is not on PATH: install yarn (`corepack enable yarn`",
        "no-git": "my-app is not in a git repository, and SpotPatch works on committed files",
    }[case]
    assert expected in message, message
    assert str(tmp_path) not in message
    assert snapshot(app) == before and pm_calls(env) == []


def test_no_git_with_yes_creates_the_repository_and_undo_says_it_stays(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app", commit=False)
    done = init(app, env, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (app / ".git").is_dir()
    assert 'git add -A && git commit -m "First commit, with SpotPatch"' in done.stdout, "the whole new app"
    undone = init(app, env, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert "init had created this git repository" in undone.stdout


def test_undo_refuses_when_a_file_changed_since_and_changes_nothing(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    assert init(app, env, "--yes").returncode == 0
    config = app / "vite.config.ts"
    config.write_text(config.read_text() + "// mine\n")
    state = snapshot(app)
    done = init(app, env, "--undo")
    assert done.returncode == 1
    assert "changed since init: vite.config.ts" in done.stderr
    assert snapshot(app) == state


def test_pnpm_from_its_lockfile_and_vanilla_app_gets_a_new_config(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app", config=None, lock="pnpm-lock.yaml")
    done = init(app, env, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert pm_calls(env)[0][:3] == ["pnpm", "add", "--save-dev"]
    created = app / "vite.config.js"
    assert created.is_file(), "no tsconfig.json: a JavaScript config"
    assert "spotpatch()" in created.read_text()
    assert "pnpm dev" in done.stdout
    assert init(app, env, "--undo").returncode == 0
    assert not created.exists()


def test_a_gitignore_that_ignores_tarballs_lets_the_plugin_be_committed(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    (app / ".gitignore").write_text("node_modules\n*.tgz\n")
    git(app, "commit", "-qam", "ignore tarballs")
    assert init(app, env, "--yes").returncode == 0
    assert "!/.spotpatch/\n!/.spotpatch/vite-plugin-spotpatch-*.tgz\n" in (app / ".gitignore").read_text()
    listed = git(app, "status", "--porcelain", "--untracked-files=all")
    assert ".spotpatch/vite-plugin-spotpatch-" in listed, "the tarball can be committed"


@pytest.mark.parametrize("tamper", ["outside", "absolute", "node-modules", "damaged"])
def test_undo_never_touches_a_file_outside_the_repository_whatever_the_record_says(tmp_path: Path, env, tamper):
    app = make_app(tmp_path / "my-app")
    assert init(app, env, "--yes").returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    record_file = app / ".git" / "spotpatch" / "init.json"
    record = json.loads(record_file.read_text())
    entry = record["apps"]["."]
    if tamper == "outside":
        entry["files"]["../victim.txt"] = {"before": None, "after": None}
    elif tamper == "absolute":
        entry["files"][str(victim)] = {"before": None, "after": None}
    elif tamper == "node-modules":
        entry["node_modules"].append("../victim.txt")
    else:
        entry["files"]["vite.config.ts"]["before"] = "%%% not base64"
    record_file.write_text(json.dumps(record))
    state = snapshot(app)
    done = init(app, env, "--undo")
    assert done.returncode == 1
    assert "nothing was undone" in done.stderr or "is damaged" in done.stderr, done.stderr
    assert victim.read_text() == "keep me\n"
    assert snapshot(app) == state


def test_undo_in_one_app_leaves_the_engine_record_another_app_uses(tmp_path: Path, env):
    first, second = make_app(tmp_path / "a"), make_app(tmp_path / "b")
    assert init(first, env, "--yes").returncode == 0
    assert init(second, env, "--yes").returncode == 0
    assert init(first, env, "--undo").returncode == 0
    record = json.loads((tmp_path / "config" / "spotpatch" / "engine.json").read_text())
    assert record["command"][0] == str(ENGINE.absolute())


def test_the_real_npm_without_a_registry_gets_a_clear_error_and_every_file_back(tmp_path: Path, assets):
    """npm itself (not the stand-in), pointed at a closed port with an empty cache: the install cannot fetch
    the plugin's dependencies. The error says the registry looks unreachable; nothing is left changed."""
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "npm_config_registry": "http://127.0.0.1:9/",
           "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0",
           "npm_config_offline": "false", "npm_config_update_notifier": "false"}
    done = init(app, env, "--yes")
    assert done.returncode == 1, done.stdout
    assert "npm could not install the plugin" in done.stderr, done.stderr
    assert "The package registry looks unreachable" in done.stderr, done.stderr
    assert snapshot(app) == before
    assert not (app / "node_modules" / "vite-plugin-spotpatch").exists()



def test_a_second_init_after_the_users_own_changes_never_lets_undo_take_them_back(tmp_path: Path, env):
    """Breaker finding: the first run's pre-image of package.json was kept across a re-install, so undo dropped
    a dependency the user had added between the two runs."""
    app = make_app(tmp_path / "my-app")
    assert init(app, env, "--yes").returncode == 0
    git(app, "add", "-A")
    git(app, "commit", "-qm", "Add SpotPatch")
    package = json.loads((app / "package.json").read_text())
    package["dependencies"] = {"axios": "^1"}
    (app / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    import shutil
    shutil.rmtree(app / "node_modules")
    assert init(app, env, "--yes").returncode == 0
    assert len(pm_calls(env)) == 2, "the plugin is installed again"
    assert init(app, env, "--undo").returncode == 0
    after = json.loads((app / "package.json").read_text())
    assert after["dependencies"] == {"axios": "^1"}, "the user's dependency stays"
    assert "vite-plugin-spotpatch" not in after["devDependencies"], "the plugin is removed by the package manager"
    assert pm_calls(env)[-1] == ["npm", "uninstall", "--package-lock-only", "vite-plugin-spotpatch"]
    assert not (app / "node_modules" / "vite-plugin-spotpatch").exists()
    assert not (app / ".spotpatch").exists()


def test_a_failed_init_leaves_no_record_so_a_later_undo_cannot_touch_the_users_files(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    assert init(app, {**env, "FAKE_PM_FAIL": "1"}, "--yes").returncode == 1
    assert not (app / ".git" / "spotpatch" / "init.json").exists()
    (app / "spotpatch.config.json").write_text('{"providers": []}\n')
    done = init(app, env, "--undo")
    assert done.returncode == 1 and "no record" in done.stderr
    assert (app / "spotpatch.config.json").read_text() == '{"providers": []}\n'


def _wait_started(env: dict[str, str]) -> None:
    import time
    deadline = time.monotonic() + 60
    while not Path(env["FAKE_PM_LOG"] + ".started").exists():
        assert time.monotonic() < deadline, "the package manager never started"
        time.sleep(0.05)


@pytest.mark.parametrize("install", ["fails", "succeeds"])
def test_an_edit_made_while_init_runs_is_never_lost(tmp_path: Path, env, install: str):
    app = make_app(tmp_path / "my-app")
    slow = {**env, "FAKE_PM_SLEEP": "2", **({"FAKE_PM_FAIL": "1"} if install == "fails" else {})}
    running = subprocess.Popen([str(ENGINE), "init", "--yes"], cwd=app, env=slow, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _wait_started(slow)
    config = app / "vite.config.ts"
    mine = config.read_text() + "// my edit while init ran\n"
    config.write_text(mine)
    out, err = running.communicate(timeout=120)
    if install == "fails":
        assert running.returncode == 1
        assert config.read_text() == mine, "the rollback leaves the user's edit"
        assert "changed by someone else while init ran, left as they are: vite.config.ts" in err, err
    else:
        assert running.returncode == 0, out + err
        done = init(app, env, "--undo")
        assert done.returncode == 1 and "changed since init: vite.config.ts" in done.stderr
        assert config.read_text() == mine


def test_sigterm_during_the_install_puts_every_file_back(tmp_path: Path, env):
    import signal
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    slow = {**env, "FAKE_PM_SLEEP": "30"}
    running = subprocess.Popen([str(ENGINE), "init", "--yes"], cwd=app, env=slow, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _wait_started(slow)
    running.send_signal(signal.SIGTERM)
    _out, err = running.communicate(timeout=60)
    assert running.returncode == 1
    assert "interrupted; the files this run had changed were put back" in err
    assert snapshot(app) == before
    assert not (app / ".git" / "spotpatch" / "init.json").exists()


def test_an_undo_that_was_cut_off_can_be_finished(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    assert init(app, env, "--yes").returncode == 0
    (app / "vite.config.ts").write_bytes(before["vite.config.ts"])  # as if the undo stopped after this file
    done = init(app, env, "--undo")
    assert done.returncode == 0, done.stderr
    assert snapshot(app) == before


def test_odd_folders_names_and_files_get_messages_not_tracebacks(tmp_path: Path, env):
    repo = tmp_path / "repo"
    app = make_app(repo / "web[1] $(touch PWNED)", commit=False)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "repo")
    done = init(repo, env, "--yes", "--project", "web[1] $(touch PWNED)", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cd 'web[1] $(touch PWNED)' && npm run dev" in done.stdout
    assert "/web\\[1\\] $(touch PWNED)/.venv/" in (repo / ".gitignore").read_text()
    again = init(repo, env, "--yes", "--project", "web[1] $(touch PWNED)", cwd=repo)
    assert "nothing to change" in again.stdout, "the escaped pattern matches: no second block"
    assert not (repo / "PWNED").exists() and not (app / "PWNED").exists()

    other = make_app(tmp_path / "other")
    (other / ".gitignore").unlink()
    (other / ".gitignore").mkdir()
    done = init(other, env, "--yes")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert ".gitignore is not a regular file" in done.stdout and "/.venv/" in done.stdout


def test_exit_code_1_when_doctor_finds_a_required_item_failing(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    (app / "spotpatch.config.json").write_text('{"bogus": 1}\n')
    git(app, "add", "-A")
    git(app, "commit", "-qm", "a bad config")
    done = init(app, env, "--yes")
    assert done.returncode == 1
    assert "doctor found a required item failing (above): config" in done.stdout


def test_npm_workspaces_point_the_schema_at_the_hoisted_plugin(tmp_path: Path, env):
    repo = tmp_path / "repo"
    app = make_app(repo / "apps" / "web", commit=False)
    (app / "package-lock.json").unlink()
    (repo / "package.json").write_text('{"name": "root", "private": true, "workspaces": ["apps/*"]}\n')
    (repo / "package-lock.json").write_text("lock\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "repo")
    assert init(repo, env, "--yes", "--project", "apps/web").returncode == 0
    settings = json.loads((repo / "spotpatch.config.json").read_text())
    assert settings["$schema"] == "./node_modules/vite-plugin-spotpatch/spotpatch.config.schema.json"



def test_a_byte_order_mark_in_package_json_and_an_open_vite_range_are_accepted(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app", vite=">=5 <9")
    (app / "package.json").write_bytes(b"\xef\xbb\xbf" + (app / "package.json").read_bytes())
    git(app, "commit", "-qam", "bom")
    done = init(app, env, "--dry-run")
    assert done.returncode == 0, done.stderr



def test_undo_in_one_app_of_a_monorepo_keeps_the_files_the_other_app_shares(tmp_path: Path, env):
    repo = tmp_path / "repo"
    web, docs = make_app(repo / "apps" / "web", commit=False), make_app(repo / "apps" / "docs", commit=False)
    (repo / ".gitignore").write_text("node_modules\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "repo")
    for app in ("apps/web", "apps/docs"):
        assert init(repo, env, "--yes", "--project", app, cwd=repo).returncode == 0
    shared = {name: (repo / name).read_bytes() for name in ("spotpatch.config.json", ".gitignore")}
    done = init(repo, env, "--undo", "--project", "apps/web", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "kept spotpatch.config.json: other apps set up here use it (apps/docs)" in done.stdout
    assert {name: (repo / name).read_bytes() for name in shared} == shared
    assert "spotpatch()" not in (web / "vite.config.ts").read_text()
    assert "spotpatch()" in (docs / "vite.config.ts").read_text()
    assert (docs / "node_modules" / "vite-plugin-spotpatch").is_dir()
    assert init(repo, env, "--undo", "--project", "apps/docs", cwd=repo).returncode == 0
    assert not (repo / "spotpatch.config.json").exists(), "the last app takes the shared files with it"
    assert (repo / ".gitignore").read_text() == "node_modules\n", "back to the bytes before the first init"
    assert git(repo, "status", "--porcelain") == ""


def test_a_file_deleted_and_made_again_by_a_second_init_is_still_undone(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    before = snapshot(app)
    assert init(app, env, "--yes").returncode == 0
    (app / "spotpatch.config.json").unlink()
    assert init(app, env, "--yes").returncode == 0
    done = init(app, env, "--undo")
    assert done.returncode == 0, done.stderr
    assert snapshot(app) == before


def test_one_init_at_a_time_per_repository(tmp_path: Path, env):
    app = make_app(tmp_path / "my-app")
    slow = {**env, "FAKE_PM_SLEEP": "3"}
    running = subprocess.Popen([str(ENGINE), "init", "--yes"], cwd=app, env=slow, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _wait_started(slow)
    second = init(app, env, "--yes")
    assert second.returncode == 1
    assert "Another init (or undo) is running in this repository" in second.stderr
    assert running.wait(timeout=120) == 0


def test_a_folder_name_with_a_line_break_is_refused(tmp_path: Path, env):
    app = make_app(tmp_path / "my\napp")
    done = init(app, env, "--yes")
    assert done.returncode == 1
    assert "control character" in done.stderr
