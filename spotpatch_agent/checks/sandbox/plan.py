"""What a confined check may see and touch, independent of the mechanism (docs/security.md §4, *Check sandbox*).

:func:`build_plan` turns one check, its working directory, the project root and the check's environment into
a :class:`SandboxPlan`; a mechanism (``bwrap.py``, ``seatbelt.py``) turns the plan into its own argv. The
view is an **allowlist** (issue 25): nothing of the host is visible unless listed here.

- ``system``: the system directories toolchains need, read-only (:data:`SYSTEM_DIRS`: ``/usr``, ``/bin``,
  ``/sbin``, ``/lib*``, ``/etc``, a Nix or Guix store), and of ``/sys`` only :data:`SYSTEM_SYS_DIRS`. In
  ``/etc`` every entry that *other* users cannot read (``/etc/shadow``, ``/etc/wireguard``,
  ``/etc/krb5.keytab``, ``/etc/ssl/private``) is masked (:func:`etc_masks`): a check, also one running as
  root, reads in ``/etc`` only what any local account can. Not shown: ``/home`` and ``/root`` (but the
  toolchains below), ``/mnt``, ``/media``, ``/srv``, ``/opt`` (but toolchains on ``PATH``), ``/var``, the
  host's ``/tmp``, ``/var/tmp`` and ``TMPDIR``, ``/run``, sibling projects, every other job's worktree;
- ``writable``: the job worktree; ``temp_dir``: the check's private temp dir (also its ``HOME``:
  :data:`PRIVATE_HOME`);
- ``modules``: the project's ``node_modules``, read-only (a mechanism that can place it shows it beside the
  worktree, where module resolution from the worktree finds it: :data:`SANDBOX_MODULES`);
- ``read_only``: toolchains shown at their own paths (their scripts name them): :data:`TOOLCHAIN_DIRS` under
  the homes, every ``PATH`` entry and the resolved check command with its install prefix (never one in
  :data:`NEVER_SHOWN`, never a home, the checkout, a temp root or an ancestor of one), the project's
  ``.venv``, and the check's ``readPaths``;
- ``hidden``: the homes and the checkout, kept empty where they lie inside a shown path (a project in
  ``/usr/src/app``); ``masked``: hidden again inside a shown path: every secret store
  (:data:`SECRET_STORES`) below a shown path, the worktree pools (other jobs' worktrees), ``/etc``'s
  unreadable entries;
- ``git_metadata``: the ``.git`` of each writable path (a linked worktree's gitfile, or a ``.git`` directory),
  read-only inside it: a check that rewrites the gitfile to a git directory of its own making (with a
  ``filter.<name>.clean`` command in its config) would otherwise make the engine's next ``git add``
  run that command on the host, unconfined;
- ``readonly_dirs``: the worktree's gitlink directories (submodules of HEAD, empty on disk; filled by the
  runner from the index, checks/gitlinks.py), shown empty and read-only: a check cannot make one a
  repository of its own for host git to find (issue 25);
- ``network``: the check's trusted ``network`` flag.

:meth:`SandboxPlan.inside` says where a host path appears in the sandbox (``relocate``: the worktree at
:data:`SANDBOX_WORK` and ``node_modules`` at :data:`SANDBOX_MODULES`, so neither the check's working directory
nor its ``PATH`` names the host's home or checkout). :func:`read_path_problem` is the trusted-config rule for
``readPaths``; it, :data:`SECRET_STORES` and :func:`homes` live in :mod:`spotpatch_agent.protocol.read_paths`
(the config validator needs them, and the protocol imports nothing above it) and are re-exported here.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from spotpatch_agent.protocol.read_paths import SECRET_STORES, homes, read_path_problem

__all__ = ["SANDBOX_MODULES", "SANDBOX_WORK", "SECRET_STORES", "SYSTEM_DIRS", "TOOLCHAIN_DIRS", "SandboxPlan",
           "build_plan", "etc_masks", "expand_read_path", "read_path_problem", "resolve_command"]

#: Toolchain installs and package-manager caches under a home directory, shown read-only when present:
#: version managers (nvm, fnm, volta, asdf, mise, pyenv, rbenv, nodenv, rustup), user installs (pip
#: ``--user``, pipx, pnpm's global dir), and the npm/yarn/pnpm/bun/Playwright/Cypress caches.
TOOLCHAIN_DIRS = (
    ".nvm", ".fnm", ".volta", ".asdf", ".local/share/mise", ".local/share/fnm", ".local/share/nvm",
    ".pyenv", ".rbenv", ".nodenv", ".rustup", ".cargo/bin", ".deno", ".bun", ".yarn", ".npm",
    ".pnpm-store", ".local/share/pnpm", ".local/bin", ".local/lib", ".local/share/pipx", ".local/pipx",
    ".cache/yarn", ".cache/pnpm", ".cache/node", ".cache/ms-playwright", ".cache/Cypress", ".cache/spotpatch",
    "Library/pnpm", "Library/Caches/Yarn", "Library/Caches/ms-playwright", "Library/Caches/Cypress",
)
#: Dependency directories of the project shown read-only to a check (its tools: ``node_modules/.bin``, a
#: Python virtual environment); never written, so a check cannot plant code the dev server runs later.
PROJECT_TOOL_DIRS = ("node_modules", ".venv")
#: Inside the project's ``node_modules``: the worktrees of this and other jobs (docs/configuration.md).
WORKTREE_BASE = "node_modules/.spotpatch"
#: The worktree base when the project has no ``node_modules`` (worktree/placement.py ``temp_base``).
TEMP_WORKTREE_BASE = "spotpatch-worktrees"
#: System directories shown read-only to every check (those that exist; a symlink such as a merged-usr
#: ``/bin`` stays a symlink).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix/store", "/gnu/store")
#: The only part of ``/sys`` a check sees: the CPU topology (glibc's ``sysconf(_SC_NPROCESSORS_ONLN)`` reads
#: ``/sys/devices/system/cpu/online``: Python's ``os.cpu_count``, Node's worker pools, tsc's and vitest's).
SYSTEM_SYS_DIRS = ("/sys/devices/system/cpu",)
#: Never shown because a ``PATH`` entry or the check command lies there (only ``readPaths`` can): mounts
#: of other disks and of Windows (WSL's ``/mnt/c``), service data, the runtime dir, kernel views.
NEVER_SHOWN = ("/mnt", "/media", "/srv", "/var", "/run", "/proc", "/sys", "/dev", "/boot", "/lost+found")
#: Where the job worktree and the project's ``node_modules`` appear in a relocating sandbox (bubblewrap):
#: fixed neutral paths, so the check's working directory names no host path.
SANDBOX_WORK = "/spotpatch/work"
SANDBOX_MODULES = "/spotpatch/node_modules"
#: The check's ``HOME``, relative to its private temp dir (created empty, with links to shown toolchains).
PRIVATE_HOME = "home"


@dataclass(frozen=True)
class SandboxPlan:
    """Absolute host paths (see the module docstring). ``cwd`` is the check's working directory (inside
    ``writable``); ``temp_dir`` the private temp dir (Linux: mounted as ``/tmp``; macOS: ``TMPDIR``);
    ``home_links``: ``(name, host path)`` links the private ``HOME`` gets to the toolchains shown from a
    real home (``.nvm`` → ``/home/me/.nvm``), so tools that look under ``~`` find them."""

    cwd: Path
    temp_dir: Path
    network: bool
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()
    homes: tuple[Path, ...] = field(default=())
    git_metadata: tuple[Path, ...] = ()
    system: tuple[Path, ...] = ()
    modules: Path | None = None
    home_links: tuple[tuple[str, Path], ...] = ()
    readonly_dirs: tuple[Path, ...] = ()
    #: Bytes: the private temp dir is a tmpfs of this size instead of ``temp_dir`` (Linux; checks/limits.py).
    temp_size: int | None = None

    def inside(self, path: str | Path, *, relocate: bool) -> str | None:
        """Where host ``path`` appears in the sandbox, or ``None`` when the check cannot see it (hidden,
        masked or never listed). ``relocate``: the mechanism mounts the worktree at :data:`SANDBOX_WORK`
        and ``modules`` at :data:`SANDBOX_MODULES`."""
        text = os.path.normpath(str(path))
        for host, neutral in ((self.writable[0] if self.writable else None, SANDBOX_WORK),
                              (None if any(_under(text, str(m)) for m in self.masked) else self.modules,
                               SANDBOX_MODULES)):
            if host is not None and _under(text, str(host)):
                return neutral + text[len(str(host)):] if relocate else text
        if any(_under(text, str(m)) for m in self.masked):
            return None
        if any(_under(text, str(p)) for p in self.read_only):
            return text
        if any(_under(text, str(h)) for h in self.hidden):
            return None
        if any(_under(text, str(p)) for p in (*self.system, *SYSTEM_SYS_DIRS)):
            return text
        return None

    def path_inside(self, value: str, *, relocate: bool) -> str:
        """A ``PATH`` value as the check sees it: each entry where it appears (its resolved spelling when
        only that is visible, a NixOS ``/run/current-system`` entry), entries it cannot see dropped."""
        kept: list[str] = []
        for entry in value.split(os.pathsep):
            if not entry or not os.path.isabs(entry):
                continue
            found = self.inside(entry, relocate=relocate) or self.inside(os.path.realpath(entry), relocate=relocate)
            if found is not None and found not in kept:
                kept.append(found)
        return os.pathsep.join(kept)


def expand_read_path(raw: str, home: str | None = None) -> Path:
    """``~/x`` → ``<home>/x`` (``home``: default ``$HOME``); an absolute path as is."""
    if raw == "~" or raw.startswith("~/"):
        base = home if home is not None else (os.environ.get("HOME") or str(Path.home()))
        return Path(base) / raw[2:] if raw != "~" else Path(base)
    return Path(raw)


def resolve_command(command: str, cwd: Path, env: Mapping[str, str]) -> Path | None:
    """The executable a check's ``command`` names, as ``subprocess`` would find it: a path with a slash
    relative to ``cwd``, a bare name on the check's ``PATH`` (absolute entries only). ``None``: not found."""
    import shutil

    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command) if os.path.isabs(command) else cwd / command
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(command, path=env.get("PATH", ""))
    return Path(found) if found else None


def _prefix(path: str) -> str:
    """The install prefix of an executable's directory: ``…/bin`` → ``…``, else the directory itself."""
    return os.path.dirname(path) if os.path.basename(path) in ("bin", "shims", "sbin") else path


def _is_checkout(path: str) -> bool:
    """``path`` holds a project rather than an install: a ``.git``, a ``package.json`` or an ``.env``."""
    return any(os.path.lexists(os.path.join(path, name)) for name in (".git", "package.json", ".env"))


def _under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (normalised absolute strings: pathlib is ~10x slower here)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def etc_masks(etc: str = "/etc") -> list[str]:
    """Entries below ``etc`` that other users cannot read: a file without the ``o+r`` bit, a directory
    without ``o+rx`` (whole). A check sees in ``/etc`` only what any local account can, also as root
    (``/etc/shadow``, ``/etc/wireguard``, ``/etc/krb5.keytab``, ``/etc/ssl/private``, NetworkManager's
    connections). Symlinks are left alone (their targets are judged where they lie). ~20 ms for a desktop's
    ``/etc`` (about 1,200 entries); an unreadable directory is masked whole."""
    found: list[str] = []
    stack = [etc]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            found.append(directory)
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:
                    found.append(entry.path)
                else:
                    stack.append(entry.path)
            elif not mode & 0o004:
                found.append(entry.path)
    return sorted(found)


def build_plan(*, cwd: Path, temp_dir: Path, network: bool, env: Mapping[str, str],
               project_root: Path | None = None, command: Path | None = None,
               read_paths: Iterable[str] = ()) -> SandboxPlan:
    """The plan for one check run (see the module docstring). ``command``: the resolved executable;
    ``read_paths``: the check's trusted ``readPaths`` (already validated)."""
    work = os.path.realpath(cwd)
    home_dirs = [str(h) for h in homes()]
    hidden = list(home_dirs)
    root = os.path.realpath(project_root) if project_root is not None else None
    if root is not None and not _under(root, work):  # the checkout, unless the check runs in it (demo baseline)
        hidden.append(root)
    system = [p for p in SYSTEM_DIRS if os.path.lexists(p)]
    modules = os.path.join(root, "node_modules") if root is not None and root in hidden else None
    if modules is not None and not os.path.isdir(modules):
        modules = None
    # Temp roots are replaced (the private temp dir is /tmp) or never shown whole: a toolchain installed
    # there (a venv in a temp checkout, the check's own command) is shown again read-only, nothing else.
    temp_roots = sorted({"/tmp", os.path.realpath("/tmp"), "/var/tmp", os.path.realpath(tempfile.gettempdir())})
    roots = (*hidden, *temp_roots)
    shown: list[str] = []

    def visible(path: str) -> bool:
        return (any(_under(path, s) for s in (*system, *shown, work))
                or (modules is not None and _under(path, modules)))

    def blocked(path: str) -> bool:
        # Never shown for a PATH entry or the command: an ancestor of a home, the checkout or a temp root
        # (a PATH entry ``$HOME``), a top-level directory, the worktree, the never-shown roots.
        return (any(_under(r, path) for r in roots) or len(PurePosixPath(path).parts) < 3
                or any(_under(path, n) for n in NEVER_SHOWN))

    def add(path: str) -> None:
        if os.path.exists(path) and not visible(path):
            shown[:] = [s for s in shown if not _under(s, path)] + [path]

    def show_tool(path: str, *, with_prefix: bool) -> None:
        path = os.path.normpath(path)
        if blocked(path) or visible(path):
            return
        add(path)
        pre = _prefix(path)
        # An install prefix, but never a whole top-level home directory (``~/.local/bin`` shows
        # ``~/.local/bin``, not all of ``~/.local``; ``~/.nvm/versions/…/bin`` its version) nor a
        # project (a sibling checkout's ``bin`` on PATH shows that ``bin``, not the checkout's ``.env``).
        if (with_prefix and pre != path and not blocked(pre) and os.path.dirname(pre) not in (*home_dirs, "/home")
                and not _is_checkout(pre)):
            add(pre)

    for home in home_dirs:
        for rel in TOOLCHAIN_DIRS:
            add(os.path.join(home, rel))
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            for p in {os.path.normpath(entry), os.path.realpath(entry)}:
                show_tool(p, with_prefix=True)
    if command is not None:
        for p in {os.path.normpath(command), os.path.realpath(command)}:
            show_tool(os.path.dirname(p), with_prefix=True)
    if root is not None and root in hidden:
        add(os.path.join(root, ".venv"))
    home_for_tilde = os.environ.get("HOME")
    for raw in read_paths:
        path = os.path.realpath(expand_read_path(raw, home_for_tilde))
        if os.path.exists(path) and not _under(path, work) and not any(_under(r, path) for r in roots):
            shown[:] = [s for s in shown if not _under(s, path)]
            if not any(_under(path, s) for s in shown):
                shown.append(path)

    masked: list[str] = []
    for base in shown:
        for home in home_dirs:
            if not (_under(base, home) or _under(home, base)):
                continue
            for rel in SECRET_STORES:
                store = os.path.join(home, rel)
                if _under(store, base) and os.path.lexists(store):
                    masked.append(store)
    pools = [os.path.join(root, WORKTREE_BASE)] if root is not None else []
    pools += [os.path.join(t, TEMP_WORKTREE_BASE) for t in temp_roots]
    for pool in pools:  # other jobs' worktrees, wherever a shown path holds them
        if (any(_under(pool, s) for s in shown) or (modules is not None and _under(pool, modules))) \
                and os.path.isdir(pool) and pool not in masked:
            masked.append(pool)
    if "/etc" in system:  # macOS: /etc is a link to /private/etc
        masked += etc_masks(os.path.realpath("/etc"))
    links = tuple((os.path.relpath(s, home), Path(s)) for s in shown for home in home_dirs
                  if _under(s, home) and s != home and os.path.relpath(s, home) in TOOLCHAIN_DIRS)
    git = os.path.join(work, ".git")
    # Never a symlink: bwrap would mount its target (the engine never makes one; apply_patch refuses .git).
    git_metadata = (Path(git),) if os.path.lexists(git) and not os.path.islink(git) else ()
    return SandboxPlan(cwd=Path(work), temp_dir=temp_dir, network=network, writable=(Path(work),),
                       git_metadata=git_metadata,
                       hidden=tuple(Path(h) for h in hidden),
                       read_only=tuple(Path(p) for p in sorted(shown, key=lambda p: p.count("/"))),
                       masked=tuple(Path(m) for m in masked), homes=tuple(Path(h) for h in home_dirs),
                       system=tuple(Path(p) for p in system), modules=Path(modules) if modules else None,
                       home_links=links)
