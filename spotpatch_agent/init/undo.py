"""``spotpatch-agent init --undo`` (docs/adopt.md): removes exactly what ``init`` added to an app, from the
record init saved (``record.py``). Every file goes back to its bytes before init — or is removed when init
created it — only while it still holds what init left there: a file changed since (a dependency added, a
config edited) is named and nothing is undone. The plugin's folder in ``node_modules`` goes too."""

from __future__ import annotations

from pathlib import Path

from spotpatch_agent.exit_codes import EXIT_OK
from spotpatch_agent.init import app as apps
from spotpatch_agent.init.app import InitError
from spotpatch_agent.init.record import Record, read_bytes, remove_node_module, sha256, write_atomic
from spotpatch_agent.init.repo import git_common_dir, git_top, lock, say, shown_path


def undo_init(start: Path) -> int:
    found = apps.find_apps(start)
    app = found[0] if len(found) == 1 else start
    top = git_top(app)
    if top is None:
        raise InitError(f"{app.name} is not in a git repository, so init has not set it up (nothing to undo).")
    lock(top)
    record = Record(git_common_dir(top) / "spotpatch" / "init.json")
    key = shown_path(app, top) if app != top else "."
    entry = record.apps.get(key)
    if entry is None:
        others = ", ".join(sorted(record.apps)) or "none"
        raise InitError(f"init has no record of setting up {app.name} (apps set up in this repository: {others}); "
                        "nothing was changed.")

    def path_of(name: str) -> Path:
        """A recorded path, only where init writes: inside the repository (no `..`, no symlinked folder on the
        way out). Anything else means the record was not written by init."""
        if not Path(name).is_absolute() and ".." not in Path(name).parts:
            path = top / name
            if path.parent.resolve().is_relative_to(top):
                return path
        raise InitError("The record of init (.git/spotpatch/init.json) names a file outside this repository: it "
                        "was not written by init, so nothing was undone. Remove it and undo by hand.")

    for name in entry.files:
        path_of(name)
    for module in entry.node_modules:
        if Path(module).parts[-2:] != ("node_modules", "vite-plugin-spotpatch"):
            path_of("..")  # refused the same way: init records only the plugin's own folder
        path_of(module)

    # Files outside this app's folder (the top level's spotpatch.config.json and .gitignore) are shared with the
    # other apps init set up in this repository: while there are any, undo leaves those files to them.
    other_apps = [name for name in record.apps if name != key]
    shared = {name for name in entry.files if other_apps and not path_of(name).is_relative_to(app)}
    # Each other file must hold what init left there (undo restores it) or already its bytes from before init
    # (an undo that was cut off: nothing left to do). Anything else is the user's work: refuse it all.
    # package.json and the lockfiles are the package manager's: when they changed since init (the user's own
    # dependencies), or init's record of them was rebased on such changes, undo removes the plugin with the
    # package manager instead of restoring bytes.
    package_files = {"package.json", *(lock for lock, _ in apps.LOCKFILES)}
    plan: list[tuple[Path, bytes | None]] = []
    moved: list[str] = []
    remove_plugin = False
    for name, state in entry.files.items():
        if name in shared:
            continue
        path, before = path_of(name), entry.before(name)
        package = path.name in package_files
        rebased = bool(state.get("rebased")) and package  # a rebased pre-image may hold init's earlier edit
        now = read_bytes(path)
        if now == before and not rebased:
            continue
        if state["after"] is not None and sha256(now) == state["after"] and not rebased:
            plan.append((path, before))
        elif package and entry.package_manager:
            remove_plugin = True
        else:
            moved.append(shown_path(path, top))
    if moved:
        raise InitError(f"changed since init: {', '.join(moved)}. Undo would lose those changes, so nothing was "
                        "undone; put back what init left there, or remove SpotPatch by hand (git diff shows init's "
                        "changes).")
    if remove_plugin and entry.package_manager:
        from spotpatch_agent.init.external import uninstall

        plan = [(p, b) for p, b in plan if p.name not in package_files]  # the package manager's to change now
        uninstall(entry.package_manager, app, "vite-plugin-spotpatch")
    for path, before in plan:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            write_atomic(path, before)
        say(f"  {'removed' if before is None else 'restored'} {shown_path(path, top)}")
    vendor = app / ".spotpatch"
    if vendor.is_dir() and not any(vendor.iterdir()):
        vendor.rmdir()
    for module in entry.node_modules:
        if path_of(module).exists() or path_of(module).is_symlink():
            remove_node_module(path_of(module))
            say(f"  removed {module}")
    for name in sorted(shared):
        say(f"  kept {name}: other apps set up here use it ({', '.join(sorted(other_apps))})")
    if shared:
        # The files stay with the next app: its undo brings them back to their bytes before the first init.
        heir = record.apps[sorted(other_apps)[0]]
        for name in shared:
            heir.files[name] = {**entry.files[name], **{k: v for k, v in heir.files.get(name, {}).items()
                                                        if k == "after"}, "before": entry.files[name]["before"]}
    record.drop(key)
    if entry.created_repo:
        say("  (init had created this git repository; it is left in place: remove .git yourself if you do not "
             "want it)")
    say("SpotPatch was removed from this app. The plugin's own dependencies may stay in node_modules until the "
        "next install.")
    return EXIT_OK
