"""What a confined check may see and touch, independent of the mechanism (docs/security.md §4, *Check sandbox*).

:func:`build_plan` turns one check, its working directory, the project root and the check's environment into
a :class:`SandboxPlan`; a mechanism (``bwrap.py``, ``seatbelt.py``) turns the plan into its own argv. The
rules (issue 14):

- the whole filesystem is readable but **read-only**, except ``writable`` (the job worktree) and the
  check's private temp dir;
- ``hidden`` directories are replaced by an empty read-only view: the user's home (``$HOME`` and the
  account's home from the password database) and the project root (the user's checkout: the job's
  baseline is the worktree's copy of it);
- ``read_only`` paths are shown again inside a hidden one (never a hidden directory itself or one of its
  ancestors, however it is named: a ``PATH`` entry ``$HOME``, a ``readPaths`` symlink to a home): the
  toolchains' installs and package-manager caches in the home (:data:`TOOLCHAIN_DIRS`, every ``PATH`` entry
  under a hidden directory and the resolved check command), the project's ``node_modules`` and ``.venv``, and
  the check's ``readPaths``;
- ``masked`` paths are hidden again inside a shown one: every secret store (:data:`SECRET_STORES`) below a
  ``read_only`` path, the project's ``node_modules/.spotpatch`` (other jobs' worktrees and the pool);
- ``git_metadata``: the ``.git`` of each writable path (a linked worktree's gitfile, or a ``.git`` directory),
  read-only inside it: a check that rewrites the gitfile to a git directory of its own making (with a
  ``filter.<name>.clean`` command in its config) would otherwise make the engine's next ``git add``
  run that command on the host, unconfined;
- ``network``: the check's trusted ``network`` flag.

:func:`read_path_problem` is the trusted-config rule for ``readPaths`` (models.py calls it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["SECRET_STORES", "TOOLCHAIN_DIRS", "SandboxPlan", "build_plan", "expand_read_path",
           "read_path_problem", "resolve_command"]

#: Secret stores under a home directory (relative POSIX paths): never readable by a check, refused in
#: ``readPaths``, and masked inside any path the sandbox shows.
SECRET_STORES = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".gnupg", ".pki", ".password-store",
    ".netrc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".git-credentials", ".gem/credentials",
    ".cargo/credentials", ".cargo/credentials.toml", ".terraform.d", ".vault-token", ".config/git/credentials",
    ".config/gh", ".config/hub", ".config/op", ".1password", ".config/configstore",
    ".local/share/keyrings", ".local/share/kwalletd", ".mozilla", ".config/google-chrome", ".config/chromium",
    ".config/BraveSoftware", ".config/microsoft-edge", ".config/vivaldi", ".config/opera",
    ".bash_history", ".zsh_history", ".python_history", ".node_repl_history", ".psql_history",
    ".local/share/fish", ".local/share/recently-used.xbel",
    # macOS
    "Library/Keychains", "Library/Cookies", "Library/Safari", "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox", "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge", "Library/Application Support/com.apple.TCC",
)
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


@dataclass(frozen=True)
class SandboxPlan:
    """Absolute host paths (see the module docstring). ``cwd`` is the check's working directory (inside
    ``writable``); ``temp_dir`` the private temp dir (Linux: mounted as ``/tmp``; macOS: ``TMPDIR``)."""

    cwd: Path
    temp_dir: Path
    network: bool
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()
    homes: tuple[Path, ...] = field(default=())
    git_metadata: tuple[Path, ...] = ()
    #: Bytes: the private temp dir is a tmpfs of this size instead of ``temp_dir`` (Linux; checks/limits.py).
    temp_size: int | None = None


def homes() -> tuple[Path, ...]:
    """The user's home directories: ``$HOME`` and the account's home (they differ under ``sudo -E`` or a
    test's temporary ``HOME``). Only existing absolute directories other than ``/``."""
    found: list[Path] = []
    candidates = [os.environ.get("HOME") or ""]
    try:
        import pwd  # POSIX only

        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, AttributeError):
        pass
    for raw in candidates:
        if not raw or not os.path.isabs(raw):
            continue
        path = Path(os.path.realpath(raw))
        if path != Path("/") and path.is_dir() and path not in found:
            found.append(path)
    return tuple(found)


def expand_read_path(raw: str, home: str | None = None) -> Path:
    """``~/x`` → ``<home>/x`` (``home``: default ``$HOME``); an absolute path as is."""
    if raw == "~" or raw.startswith("~/"):
        base = home if home is not None else (os.environ.get("HOME") or str(Path.home()))
        return Path(base) / raw[2:] if raw != "~" else Path(base)
    return Path(raw)


def read_path_problem(raw: str) -> str | None:
    """Why ``raw`` cannot be a ``readPaths`` entry, or ``None``: it must be absolute or ``~/…``, without
    ``..`` or NUL, not ``/`` or a whole home directory, and not a secret store or inside one."""
    if "\x00" in raw or not raw:
        return "must be a non-empty path"
    if not raw.startswith(("/", "~/")):
        return "must be absolute or start with ~/"
    parts = PurePosixPath(raw[2:] if raw.startswith("~/") else raw).parts
    if ".." in parts:
        return "must not contain .."
    if raw.startswith("~/"):
        if not [p for p in parts if p not in (".", "")]:
            return "must not be your whole home directory"
    else:
        path = Path(os.path.normpath(raw))
        if path == Path("/"):
            return "must not be /"
        if path in homes() or path.parent == Path("/home") or path == Path("/root"):
            return "must not be a whole home directory"
    # A secret store anywhere on the path (``~/.ssh``, ``/home/other/.aws/config``, ``/mnt/backup/.gnupg``).
    # Case-insensitively: on macOS (and Windows) ``~/.SSH`` is ``~/.ssh``.
    names = [p.casefold() for p in parts if p not in (".", "", "/")]
    for i in range(len(names)):
        tail = "/".join(names[i:])
        for store in SECRET_STORES:
            store = store.casefold()
            if tail == store or tail.startswith(store + "/"):
                return f"is a secret store (~/{store}): checks never read it"
    return None


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


def _under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (normalised absolute strings: pathlib is ~10x slower here)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


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
    shown: list[str] = []
    # The host's /tmp is replaced by the private temp dir: a toolchain installed there (a venv or a
    # node install in a temp checkout, the check's own command) is shown again read-only, like one in a home.
    replaced = sorted({"/tmp", os.path.realpath("/tmp")})

    def is_hidden(path: str) -> bool:
        return any(_under(path, h) for h in (*hidden, *replaced))

    def covers_hidden_root(path: str) -> bool:
        # A home, the checkout or /tmp itself (or one of their ancestors): showing it would undo the hiding,
        # so a PATH entry ``$HOME``, or a ``readPaths`` symlink that resolves to a home, is never shown.
        return any(_under(h, path) for h in (*hidden, *replaced))

    def show(path: str) -> None:
        path = os.path.normpath(path)
        if (is_hidden(path) and not covers_hidden_root(path) and not _under(path, work)
                and not any(_under(path, s) for s in shown) and os.path.exists(path)):
            shown[:] = [s for s in shown if not _under(s, path)] + [path]

    for home in home_dirs:
        for rel in TOOLCHAIN_DIRS:
            show(os.path.join(home, rel))
    for entry in env.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            for p in {os.path.normpath(entry), os.path.realpath(entry)}:
                if is_hidden(p):
                    show(p)
                    pre = _prefix(p)
                    # An install prefix, but never a whole top-level home directory (``~/.local/bin``
                    # shows ``~/.local/bin``, not all of ``~/.local``; ``~/.nvm/versions/…/bin`` its version).
                    if pre != p and pre not in hidden and os.path.dirname(pre) not in home_dirs:
                        show(pre)
    if command is not None:
        for p in {os.path.normpath(command), os.path.realpath(command)}:
            directory = os.path.dirname(p)
            if is_hidden(directory):
                pre = _prefix(directory)
                show(pre if pre not in hidden and os.path.dirname(pre) not in home_dirs else directory)
    if root is not None:
        for rel in PROJECT_TOOL_DIRS:
            show(os.path.join(root, rel))
    home_for_tilde = os.environ.get("HOME")
    for raw in read_paths:
        path = os.path.realpath(expand_read_path(raw, home_for_tilde))
        if os.path.exists(path) and not _under(path, work) and not covers_hidden_root(path):
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
    if root is not None:
        pool = os.path.join(root, WORKTREE_BASE)
        if any(_under(pool, s) for s in shown) and os.path.isdir(pool):
            masked.append(pool)
    git = os.path.join(work, ".git")
    # Never a symlink: bwrap would mount its target (the engine never makes one; apply_patch refuses .git).
    git_metadata = (Path(git),) if os.path.lexists(git) and not os.path.islink(git) else ()
    return SandboxPlan(cwd=Path(work), temp_dir=temp_dir, network=network, writable=(Path(work),),
                       git_metadata=git_metadata,
                       hidden=tuple(Path(h) for h in hidden),
                       read_only=tuple(Path(p) for p in sorted(shown, key=lambda p: p.count("/"))),
                       masked=tuple(Path(m) for m in masked), homes=tuple(Path(h) for h in home_dirs))
