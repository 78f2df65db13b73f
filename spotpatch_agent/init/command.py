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
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotpatch_agent.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.init import app as apps
from spotpatch_agent.init.app import InitError, PackageManager
from spotpatch_agent.init.assets import Assets, plugin_assets
from spotpatch_agent.init.external import install, run_editor
from spotpatch_agent.init.record import AppRecord, Record, read_bytes, sha256, write_atomic

CONFIG_FILE = "spotpatch.config.json"
VENDOR_DIR = ".spotpatch"
#: What jobs need ignored (an untracked one blocks every job as a local change; docs/adopt.md).
IGNORED = ("node_modules/", ".venv/")


@dataclass
class Change:
    path: Path
    before: bytes | None
    after: bytes | None  # None: the file is removed
    why: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def engine_record_file() -> Path:
    """``$XDG_CONFIG_HOME/spotpatch/engine.json`` (absolute XDG only), else ``~/.config/spotpatch/engine.json``:
    the file the plugin reads last when it looks for the engine (node-shim/src/engine-locate.ts)."""
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


def _say(text: str = "") -> None:
    print(text, flush=True)


def _confirm(question: str) -> bool:
    try:
        answer = input(f"{question} [Y/n] ").strip().lower()
    except EOFError:
        return False
    return answer in ("", "y", "yes")


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _rel(path: Path, top: Path) -> str:
    """``path`` as the output names it: relative to ``top``, else under ``$XDG_CONFIG_HOME`` or ``~``, else its
    name (never a whole absolute path)."""
    try:
        return path.relative_to(top).as_posix()
    except ValueError:
        pass
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg) and path.is_relative_to(xdg):
        return "$XDG_CONFIG_HOME/" + path.relative_to(xdg).as_posix()
    home = Path.home()
    return "~/" + path.relative_to(home).as_posix() if path.is_relative_to(home) else path.name


def _shown_text(text: str) -> str:
    """``text`` with the user's home folder written ``~`` (the engine record's path, in a diff)."""
    home = str(Path.home())
    return text.replace(home + "/", "~/") if len(home) > 1 else text


def _git_top(folder: Path) -> Path | None:
    done = run_git_sync(["rev-parse", "--show-toplevel"], cwd=folder, read_only=True)
    return Path(done.stdout.decode().strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def _git_common_dir(top: Path) -> Path:
    done = run_git_sync(["rev-parse", "--git-common-dir"], cwd=top, read_only=True)
    if done.returncode != 0:
        raise InitError("This repository cannot be read (`git rev-parse --git-common-dir` failed).")
    return (top / done.stdout.decode().strip()).resolve()


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


def _config_text(top: Path, app: Path, assets: Assets) -> bytes:
    schema = Path(os.path.relpath(app / "node_modules" / assets.name / "spotpatch.config.schema.json", top))
    body: dict[str, Any] = {"$schema": "./" + schema.as_posix(), "providers": []}
    if os.environ.get("OPENAI_API_KEY"):
        body["providers"] = [{
            "id": "openai", "displayName": "OpenAI", "api": "chat", "baseUrl": "https://api.openai.com/v1",
            "apiKeyEnv": "OPENAI_API_KEY",
            "models": [{"id": "gpt-4o-mini", "model": "gpt-4o-mini", "displayName": "GPT-4o mini"}]}]
    return (json.dumps(body, indent=2) + "\n").encode("utf-8")


def _gitignore(top: Path, app: Path) -> Change:
    file = top / ".gitignore"
    before = read_bytes(file)
    missing = []
    for entry in IGNORED:
        probe = (app / entry / "spotpatch-probe").relative_to(top).as_posix()
        done = run_git_sync(["check-ignore", "--no-index", "-q", probe], cwd=top, read_only=True)
        if done.returncode != 0:
            missing.append((app / entry).relative_to(top).as_posix() + "/")
    vendored = (app / VENDOR_DIR / "vite-plugin-spotpatch-0.0.0.tgz").relative_to(top).as_posix()
    if run_git_sync(["check-ignore", "--no-index", "-q", vendored], cwd=top, read_only=True).returncode == 0:
        # A `*.tgz` rule would keep the plugin out of the commit, and a teammate's install would fail.
        missing.append("!" + (app / VENDOR_DIR).relative_to(top).as_posix() + "/vite-plugin-spotpatch-*.tgz")
    after = before
    if missing:
        text = (before or b"").decode("utf-8", "surrogateescape")
        if text and not text.endswith("\n"):
            text += "\n"
        text += "# SpotPatch: jobs need these ignored (an untracked one counts as a local change)\n"
        text += "".join(f"{m}\n" if m.startswith("!") else f"/{m}\n" for m in missing)
        after = text.encode("utf-8", "surrogateescape")
    return Change(file, before, after, "what jobs need ignored")


def _dependency_spec(app: Path, assets: Assets) -> str | None:
    package = apps.read_package_json(app) or {}
    for key in ("devDependencies", "dependencies"):
        section = package.get(key)
        if isinstance(section, dict) and isinstance(section.get(assets.name), str):
            return str(section[assets.name])
    return None


def _installed(app: Path, assets: Assets) -> bool:
    spec = _dependency_spec(app, assets)
    manifest = app / "node_modules" / assets.name / "package.json"
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


def init_command(project: Path | None, *, yes: bool, dry_run: bool, undo: bool) -> int:
    try:
        start = (project or Path.cwd()).resolve()
        if not start.is_dir():
            raise InitError(f"{start.name or project} is not a folder.", exit_code=EXIT_USAGE)
        if undo:
            from spotpatch_agent.init.undo import undo_init

            return undo_init(start)
        return _init(start, yes=yes, dry_run=dry_run)
    except InitError as exc:
        print(f"spotpatch-agent init: {exc.message}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        print("spotpatch-agent init: interrupted.", file=sys.stderr, flush=True)
        return EXIT_FAILED


def _init(start: Path, *, yes: bool, dry_run: bool) -> int:
    app = _choose_app(start, apps.find_apps(start), yes)
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
    needs_install = not _installed(app, assets)

    config = apps.vite_config(app)
    edit = run_editor(assets, app, config)
    refused = edit if edit["status"] == "refuse" else None
    if edit["status"] == "edit":
        target = Path(str(edit["path"]))
        changes.append(Change(target, read_bytes(target), str(edit["code"]).encode("utf-8"), "spotpatch() first"))
    config_file = top / CONFIG_FILE
    if not config_file.exists():
        changes.append(Change(config_file, None, _config_text(top, app, assets), "the trusted config"))
    changes.append(_gitignore(top, app))
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
        changed = _apply(app, top, pm, changes, spec if needs_install else None, created_repo)
    if engine.changed and engine.after is not None:
        # Per user, not per app (the plugin of every app set up by this engine reads it): outside the app's
        # undo record, so undoing one app never strands another.
        write_atomic(engine.path, engine.after)
    if refused:
        _paste(refused, config, top)
    _finish(app, top, pm, changed, refused is not None)
    return EXIT_FAILED if refused else EXIT_OK


def _apply(app: Path, top: Path, pm: PackageManager, changes: list[Change], spec: str | None,
           created_repo: bool) -> list[str]:
    """Makes ``changes`` and runs the install, the record saved first and completed last; returns the paths
    (relative to ``top``) inside the repository whose bytes changed. On any failure every touched file is put
    back and the error goes on."""
    record = Record(_git_common_dir(top) / "spotpatch" / "init.json")
    key = _rel(app, top) if app != top else "."
    entry = record.apps.setdefault(key, AppRecord())
    entry.created_repo = entry.created_repo or created_repo
    package_files = [app / "package.json", *_lockfiles(pm, app)] if spec else []
    touched = [c.path for c in changes] + package_files
    for path in touched:
        entry.remember(_key(path, top), read_bytes(path))
    module = _rel(app / "node_modules" / "vite-plugin-spotpatch", top)
    if spec and not (app / "node_modules" / "vite-plugin-spotpatch").exists() and module not in entry.node_modules:
        entry.node_modules.append(module)
    entry.complete = False
    record.save()
    try:
        for change in changes:
            if change.after is None:
                change.path.unlink(missing_ok=True)
            else:
                write_atomic(change.path, change.after)
        if spec:
            install(pm, app, spec)
    except BaseException:
        for path in touched:  # back to the bytes before this run
            before = entry.before(_key(path, top))
            if before is None:
                path.unlink(missing_ok=True)
            else:
                write_atomic(path, before)
        raise
    changed = []
    for path in touched:
        now = read_bytes(path)
        entry.files[_key(path, top)]["after"] = sha256(now)
        if now != entry.before(_key(path, top)) and path.is_relative_to(top):
            changed.append(_rel(path, top))
    entry.files = {k: v for k, v in entry.files.items() if v["before"] is not None or v["after"] is not None}
    entry.complete = True
    record.save()
    return sorted(set(changed))


def _key(path: Path, top: Path) -> str:
    return path.relative_to(top).as_posix() if path.is_relative_to(top) else str(path)


def _paste(refused: dict[str, Any], config: Path | None, top: Path) -> None:
    name = _rel(config, top) if config else "vite.config"
    _say(f"\n{name} was left as it is: {refused.get('reason', 'it cannot be edited safely')}. Add these lines "
         "yourself (spotpatch() first in plugins):\n")
    _say("    " + str(refused.get("paste", "")).replace("\n", "\n    "))


def _finish(app: Path, top: Path, pm: PackageManager, changed: list[str], refused: bool) -> None:
    from spotpatch_agent.doctor import checklist, run_doctor

    _say("\nThe set-up, checked (spotpatch-agent doctor, without contacting providers):")
    sys.stdout.write(checklist(run_doctor(top, None, probe=False)))
    _say("\nNext:")
    if run_git_sync(["rev-parse", "--verify", "-q", "HEAD"], cwd=top, read_only=True).returncode != 0:
        _say("  git add -A && git commit -m \"First commit, with SpotPatch\"   # a new repository: jobs start from "
             "committed files")
    elif changed:
        quoted = " ".join(shlex.quote(c) for c in changed)
        _say(f"  git add {quoted} && git commit -m \"Add SpotPatch\"   # jobs start from committed files")
    cd = f"cd {_rel(app, Path.cwd())} && " if app != Path.cwd().resolve() else ""
    _say(f"  {cd}{pm.run_dev()}   # then click the SpotPatch button on the page (bottom right) or press Alt+Shift+S")
    if refused:
        _say("  (after adding the lines above to the Vite config)")
    _say("  No AI provider? The page still offers Copy prompt and Send to my agent (spotpatch-agent mcp "
         "--print-config claude-code); providers and checks: docs/configuration.md. Undo: spotpatch-agent init --undo")
