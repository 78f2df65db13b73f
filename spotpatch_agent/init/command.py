"""``spotpatch-agent init [--project DIR] [--yes] [--dry-run] [--undo]`` (docs/adopt.md): SpotPatch into an
existing Vite app in one command.

In order: find the app (a monorepo: asks, or takes ``--project``), make sure it is in a git repository, check
its Vite against the plugin's peer range, detect its package manager; then plan every change — the plugin
tarball copied to ``<app>/.spotpatch/`` (so the app's ``package.json`` names a file in the app and a teammate's
install works), the dev dependency, ``spotpatch()`` first in ``vite.config.*`` (an AST edit by the editor in
``assets``, which keeps the user's formatting, or the exact lines to paste when it cannot edit safely),
``spotpatch.config.json`` with ``$schema`` at the git top level, the ``.gitignore`` lines jobs need, and the
user-level record of this engine that the plugin reads — show it (``--dry-run``: the diff of every file, and
stop), save the undo record, make the changes, run ``doctor`` and print the next command. A failure while
changing restores every file already changed. Running it again changes nothing."""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from spotpatch_agent.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.init import app as apps
from spotpatch_agent.init.app import InitError, PackageManager
from spotpatch_agent.init.assets import Assets, plugin_assets
from spotpatch_agent.init.changeset import Change, apply_changes
from spotpatch_agent.init.external import install, run_editor
from spotpatch_agent.init.record import Record, read_bytes, write_atomic
from spotpatch_agent.init.repo import git_common_dir as _git_common_dir
from spotpatch_agent.init.repo import git_top as _git_top
from spotpatch_agent.init.repo import lock as _lock
from spotpatch_agent.init.repo import say as _say
from spotpatch_agent.init.repo import shown_path as _rel
from spotpatch_agent.init.repo import tell

CONFIG_FILE = "spotpatch.config.json"
VENDOR_DIR = ".spotpatch"
#: What jobs need ignored (an untracked one blocks every job as a local change; docs/adopt.md).
IGNORED = ("node_modules/", ".venv/")


def engine_record_file() -> Path:
    """``$XDG_CONFIG_HOME/spotpatch/engine.json`` (absolute XDG only), else ``~/.config/spotpatch/engine.json``:
    the file the plugin reads last when it looks for the engine (node-shim/src/server/engine-locate.ts)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "spotpatch" / "engine.json"


def this_engine() -> Path:
    """The ``spotpatch-agent`` executable running now (the console script beside this Python, else argv[0])."""
    beside = Path(sys.executable).parent / "spotpatch-agent"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    found = shutil.which(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return Path(found).absolute() if found else beside.absolute()


def _confirm(question: str) -> bool:
    try:
        answer = input(f"{question} [Y/n] ").strip().lower()
    except EOFError:
        return False
    return answer in ("", "y", "yes")


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _shown_text(text: str) -> str:
    """``text`` with the user's home folder written ``~`` (the engine record's path, in a diff)."""
    home = str(Path.home())
    return text.replace(home + "/", "~/") if len(home) > 1 else text


def _choose_app(start: Path, found: list[Path], yes: bool) -> Path:
    if not found:
        raise InitError(apps.explain_not_an_app(start))
    if len(found) == 1:
        return found[0]
    listed = "\n".join(f"  {i}. {_rel(p, start)}" for i, p in enumerate(found, 1))
    if _interactive() and not yes:
        _say(f"Vite apps under {start.name or 'this folder'}:\n{listed}")
        try:
            answer = input("Which one? (number) ").strip()
        except EOFError:
            answer = ""
        if answer.isdigit() and 1 <= int(answer) <= len(found):
            return found[int(answer) - 1]
        raise InitError("No app chosen: nothing was changed.")
    raise InitError(f"Several Vite apps here; say which with --project:\n{listed}", exit_code=EXIT_USAGE)


def _config_text(top: Path, modules: Path, assets: Assets) -> bytes:
    schema = Path(os.path.relpath(modules / assets.name / "spotpatch.config.schema.json", top))
    body: dict[str, Any] = {"$schema": "./" + schema.as_posix(), "providers": []}
    if os.environ.get("OPENAI_API_KEY"):
        body["providers"] = [{
            "id": "openai", "displayName": "OpenAI", "api": "chat", "baseUrl": "https://api.openai.com/v1",
            "apiKeyEnv": "OPENAI_API_KEY",
            "models": [{"id": "gpt-4o-mini", "model": "gpt-4o-mini", "displayName": "GPT-4o mini"}]}]
    return (json.dumps(body, indent=2) + "\n").encode("utf-8")


def _pattern(path: str) -> str:
    """``path`` (relative to the top level) as a literal .gitignore pattern: glob characters, a leading ``#``
    or ``!`` and trailing spaces escaped, anchored at the top level."""
    escaped = re.sub(r"([\\*?\[\]])", r"\\\1", path)
    escaped = re.sub(r" +$", lambda m: "\\ " * len(m.group()), escaped)
    return "/" + escaped


def _gitignore(top: Path, app: Path) -> tuple[Change, list[str]]:
    """The .gitignore change, and the lines to add by hand when the file is a link or a folder."""
    file = top / ".gitignore"
    before = read_bytes(file)

    def ignored(path: Path) -> bool:
        probe = path.relative_to(top).as_posix()
        return run_git_sync(["check-ignore", "--no-index", "-q", probe], cwd=top, read_only=True).returncode == 0

    lines = [_pattern((app / entry).relative_to(top).as_posix()) + "/" for entry in IGNORED
             if not ignored(app / entry / "spotpatch-probe")]
    vendor = app / VENDOR_DIR
    if ignored(vendor / "vite-plugin-spotpatch-0.0.0.tgz"):
        # A `*.tgz` or `.*` rule would keep the plugin out of the commit, and a teammate's install would fail:
        # the folder and the tarball are both re-included (a file inside an ignored folder cannot be).
        lines += ["!" + _pattern(vendor.relative_to(top).as_posix()) + "/",
                  "!" + _pattern(vendor.relative_to(top).as_posix()) + "/vite-plugin-spotpatch-*.tgz"]
    text = (before or b"").decode("utf-8", "surrogateescape")
    present = {line.strip() for line in text.splitlines()}
    lines = [line for line in lines if line not in present]  # never the same line twice, whatever git says
    if file.is_symlink() or (file.exists() and not file.is_file()):
        return Change(file, before, before, ""), lines
    after = before
    if lines:
        if text and not text.endswith("\n"):
            text += "\n"
        text += "# SpotPatch: jobs need these ignored (an untracked one counts as a local change)\n"
        text += "".join(f"{line}\n" for line in lines)
        after = text.encode("utf-8", "surrogateescape")
    return Change(file, before, after, "what jobs need ignored"), []


def _dependency_spec(app: Path, assets: Assets) -> str | None:
    package = apps.read_package_json(app) or {}
    for key in ("devDependencies", "dependencies"):
        section = package.get(key)
        if isinstance(section, dict) and isinstance(section.get(assets.name), str):
            return str(section[assets.name])
    return None


def _modules_dir(app: Path, top: Path, pm: PackageManager) -> Path:
    """Where the package manager puts the app's dev dependency: the workspace root's node_modules when npm,
    yarn or bun hoist it (the lockfile is above the app), else the app's own (pnpm links each package's)."""
    return (pm.root if pm.root != app and pm.name != "pnpm" else app) / "node_modules"


def _installed(app: Path, assets: Assets, modules: Path) -> bool:
    spec = _dependency_spec(app, assets)
    manifest = next((d / assets.name / "package.json" for d in (app / "node_modules", modules)
                     if (d / assets.name / "package.json").is_file()), modules / assets.name / "package.json")
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version") if manifest.is_file() else None
    except (ValueError, OSError):
        version = None
    return spec is not None and spec.endswith(f"{VENDOR_DIR}/{assets.tarball.name}") and version == assets.version


def _predicted_package_json(app: Path, assets: Assets) -> bytes | None:
    """package.json as the package manager will leave it (for --dry-run's diff only)."""
    file = app / "package.json"
    before = read_bytes(file)
    try:
        data = json.loads(before or b"{}")
    except ValueError:
        return before
    dev = data.setdefault("devDependencies", {})
    dev[assets.name] = f"file:{VENDOR_DIR}/{assets.tarball.name}"
    data["devDependencies"] = dict(sorted(dev.items()))
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _diff(change: Change, top: Path) -> str:
    name = _rel(change.path, top)
    if b"\0" in (change.before or b"") or b"\0" in (change.after or b"") or change.path.suffix == ".tgz":
        size = len(change.after or b"")
        return f"--- {name}\n+++ {name}\n(binary: {'new file, ' if change.before is None else ''}{size} bytes)\n"
    old = (change.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (change.after or b"").decode("utf-8", "replace").splitlines(keepends=True)
    text = "".join(difflib.unified_diff(old, new, "/dev/null" if change.before is None else f"a/{name}",
                                        f"b/{name}"))
    return _shown_text(text if text.endswith("\n") else text + "\n")


def _lockfiles(pm: PackageManager, app: Path) -> list[Path]:
    names = [name for name, _ in apps.LOCKFILES]
    return [folder / name for folder in dict.fromkeys([pm.root, app]) for name in names]


def _terminated(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM and SIGHUP (the terminal closed) roll back like Ctrl-C (changeset.py)


def init_command(project: Path | None, *, yes: bool, dry_run: bool, undo: bool) -> int:
    signal.signal(signal.SIGTERM, _terminated)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _terminated)
    try:
        start = (project or Path.cwd()).resolve()
        if not start.is_dir():
            raise InitError(f"{start.name or project} is not a folder.", exit_code=EXIT_USAGE)
        if undo:
            from spotpatch_agent.init.undo import undo_init

            return undo_init(start)
        return _init(start, yes=yes, dry_run=dry_run)
    except InitError as exc:
        tell(f"spotpatch-agent init: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        tell("spotpatch-agent init: interrupted; " + ("undo was cut off: run init --undo again to finish it." if undo
              else "the files this run had changed were put back."))
        return EXIT_FAILED
    except BrokenPipeError:  # `init | head`: the reader left; nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:
        name = Path(exc.filename).name if isinstance(exc.filename, str) else "a file"
        tell(f"spotpatch-agent init: {exc.strerror or type(exc).__name__}: {name}. The files this run had changed "
              "were put back.")
        return EXIT_FAILED


def _init(start: Path, *, yes: bool, dry_run: bool) -> int:
    app = _choose_app(start, apps.find_apps(start), yes)
    if any(ord(c) < 32 or c == "\x7f" for c in str(app)):
        raise InitError("The app's folder name holds a control character (a line break?): .gitignore lines and "
                        "commands cannot name it safely. Rename the folder, then run init again.")
    top = _git_top(app)
    created_repo = False
    if top is None:
        if dry_run:
            _say(f"{app.name} is not in a git repository: init would create one there (git init).")
        elif yes or (_interactive() and _confirm(f"{app.name} is not in a git repository; SpotPatch works on "
                                                 "committed files. Create one here (git init)?")):
            if run_git_sync(["init", "-q"], cwd=app).returncode != 0:
                raise InitError("Creating the repository (`git init`) failed.")
            created_repo = True
            top = _git_top(app)
        else:
            raise InitError(f"{app.name} is not in a git repository, and SpotPatch works on committed files: run "
                            "`git init` there (or init --yes does it), then run init again.")
    top = top or app
    assets = plugin_assets()
    if problem := apps.check_vite(app, assets.peer_vite):
        raise InitError(problem)
    pm = apps.detect_package_manager(app, top)
    if shutil.which(pm.name) is None:
        raise InitError(f"This app uses {pm.name} ({pm.evidence}), and {pm.name} is not on PATH: {pm.install_hint()}, "
                        "then run init again.")

    vendored = app / VENDOR_DIR / assets.tarball.name
    changes = [Change(vendored, read_bytes(vendored), assets.tarball.read_bytes(), "the plugin package")]
    changes += [Change(old, read_bytes(old), None, "an older plugin package")
                for old in sorted((app / VENDOR_DIR).glob("vite-plugin-spotpatch-*.tgz")) if old != vendored]
    spec = f"file:{VENDOR_DIR}/{assets.tarball.name}"
    modules = _modules_dir(app, top, pm)
    needs_install = not _installed(app, assets, modules)

    config = apps.vite_config(app)
    if config is not None and (config.is_symlink() or not config.is_file()):
        edit: dict[str, Any] = {"status": "refuse", "reason": "it is a symbolic link (init never writes through one)",
                                "paste": "import spotpatch from 'vite-plugin-spotpatch'\n// first in plugins:\n"
                                         "plugins: [spotpatch(), …],"}
    else:
        edit = run_editor(assets, app, config)
    refused = edit if edit["status"] == "refuse" else None
    if edit["status"] == "edit":
        target = Path(str(edit["path"]))
        changes.append(Change(target, read_bytes(target), str(edit["code"]).encode("utf-8"), "spotpatch() first"))
    config_file = top / CONFIG_FILE
    if not config_file.exists() and not config_file.is_symlink():
        changes.append(Change(config_file, None, _config_text(top, modules, assets), "the trusted config"))
    ignore_change, ignore_by_hand = _gitignore(top, app)
    changes.append(ignore_change)
    record_file = engine_record_file()
    record_body = (json.dumps({"command": [str(this_engine()), "serve"]}, indent=2) + "\n").encode("utf-8")
    engine = Change(record_file, read_bytes(record_file), record_body, "where the plugin finds this engine, for "
                    "every app of yours; --undo leaves it")
    changes = [c for c in changes if c.changed]

    _say(f"SpotPatch for {_rel(app, top) if app != top else app.name} ({pm.name}, {pm.evidence}):")
    for change in [*changes, engine] if engine.changed else changes:
        verb = "create" if change.before is None else "remove" if change.after is None else "update"
        _say(f"  {verb} {_rel(change.path, top)} ({change.why})")
    if needs_install:
        _say(f"  run {pm.name} {' '.join(pm.add_dev(spec))} (package.json and its lockfile)")
    if not changes and not needs_install and not engine.changed:
        _say("  nothing to change: SpotPatch is set up here already.")
    if dry_run:
        for change in [*changes, engine] if engine.changed else changes:
            sys.stdout.write(_diff(change, top))
        if needs_install:
            package = app / "package.json"
            sys.stdout.write(_diff(Change(package, read_bytes(package), _predicted_package_json(app, assets), ""),
                                   top))
            _say(f"(and {pm.name}'s lockfile, as {pm.name} writes it)")
        if refused:
            _paste(refused, config, top)
        _say("Dry run: nothing was changed.")
        return EXIT_FAILED if refused else EXIT_OK
    if (changes or needs_install or engine.changed) and _interactive() and not yes and not _confirm("Go ahead?"):
        raise InitError("Nothing was changed.")

    changed: list[str] = []
    if changes or needs_install or created_repo:
        _lock(top)
        record = Record(_git_common_dir(top) / "spotpatch" / "init.json")
        key = _rel(app, top) if app != top else "."
        module = modules / assets.name
        changed = apply_changes(
            record, key, top, changes, [app / "package.json", *_lockfiles(pm, app)] if needs_install else [],
            (lambda: install(pm, app, spec)) if needs_install else None, created_repo=created_repo,
            # Only the app's own node_modules: a hoisted copy is shared with the workspace's other apps.
            module=module.relative_to(top).as_posix()
            if needs_install and not module.exists() and modules == app / "node_modules" else None,
            package_manager=pm.name)
    if engine.changed and engine.after is not None:
        # Per user, not per app (the plugin of every app set up by this engine reads it): outside the app's
        # undo record, so undoing one app never strands another.
        write_atomic(engine.path, engine.after)
    if refused:
        _paste(refused, config, top)
    if ignore_by_hand:
        _say("\n.gitignore is not a regular file (a link or a folder), so init left it: add these lines where it "
             "points:\n    " + "\n    ".join(ignore_by_hand))
    ready = _finish(app, top, pm, changed, refused is not None)
    return EXIT_FAILED if refused or ignore_by_hand or not ready else EXIT_OK


def _key(path: Path, top: Path) -> str:
    return path.relative_to(top).as_posix() if path.is_relative_to(top) else str(path)


def _paste(refused: dict[str, Any], config: Path | None, top: Path) -> None:
    name = _rel(config, top) if config else "vite.config"
    _say(f"\n{name} was left as it is: {refused.get('reason', 'it cannot be edited safely')}. Add these lines "
         "yourself (spotpatch() first in plugins):\n")
    _say("    " + str(refused.get("paste", "")).replace("\n", "\n    "))


def _finish(app: Path, top: Path, pm: PackageManager, changed: list[str], refused: bool) -> bool:
    """Runs doctor and prints the next commands; True when doctor found no required item failing (a repository
    without a commit yet fails its health check until the first commit, which the next commands say)."""
    from spotpatch_agent.doctor import checklist, run_doctor

    fresh = run_git_sync(["rev-parse", "--verify", "-q", "HEAD"], cwd=top, read_only=True).returncode != 0
    _say("\nThe set-up, checked (spotpatch-agent doctor, without contacting providers):")
    items = run_doctor(top, None, probe=False)
    sys.stdout.write(checklist(items))
    if fresh:
        _say("(The repository has no commit yet: project health passes after the first commit, below.)")
    failed = [i for i in items if i.failed and not (fresh and i.id == "project")]
    _say("\nNext:")
    if fresh:
        _say("  git add -A && git commit -m \"First commit, with SpotPatch\"   # a new repository: jobs start from "
             "committed files")
    elif changed:
        quoted = " ".join(shlex.quote(c) for c in changed)
        _say(f"  git add {quoted} && git commit -m \"Add SpotPatch\"   # jobs start from committed files")
    cd = f"cd {shlex.quote(os.path.relpath(app, Path.cwd()))} && " if app != Path.cwd().resolve() else ""
    _say(f"  {cd}{pm.run_dev()}   # then click the SpotPatch button on the page (bottom right) or press Alt+Shift+S")
    if refused:
        _say("  (after adding the lines above to the Vite config)")
    _say("  No AI provider? The page still offers Copy prompt and Send to my agent (spotpatch-agent mcp "
         "--print-config claude-code); providers and checks: docs/configuration.md. Undo: spotpatch-agent init --undo")
    if failed:
        _say("\ninit made its changes, but doctor found a required item failing (above): " +
             ", ".join(i.title for i in failed) + ".")
    return not failed
