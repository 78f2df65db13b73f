"""The trusted-config rule for a check's ``readPaths`` (docs/configuration.md, security.md §4 *Check sandbox*),
and the secret stores it refuses, which the check sandbox also masks wherever it shows a path.

The config validator (``CheckConfig.readPaths``, ``config.py``) asks :func:`read_path_problem`; the sandbox's
plan (``checks/sandbox/plan.py``) uses :data:`SECRET_STORES` and :func:`homes` and re-exports all three. They
live here, below both, because the protocol imports nothing above it (standard library only).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

__all__ = ["SECRET_STORES", "homes", "read_path_problem"]

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
