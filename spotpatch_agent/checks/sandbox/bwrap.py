"""Linux: a check confined by bubblewrap (``bwrap``, Debian package ``bubblewrap``; docs/security.md §4).

:func:`bwrap_argv` turns a :class:`~spotpatch_agent.checks.sandbox.plan.SandboxPlan` into one ``bwrap``
command line. Every namespace is new (user, mount, pid, ipc, uts, cgroup; network too unless the plan
allows it), every capability is dropped and no further user namespace can be created inside, so the check
cannot undo a mount. Mounts, in this order (a later mount covers an earlier one):

1. ``/`` read-only; a new ``/dev`` (null, zero, random, tty, pts, its own ``shm``) and a new ``/proc`` of
   the check's own pid namespace (no other process, so no ``/proc/<pid>/environ`` of the engine or Vite);
2. an empty ``/run`` (the D-Bus, keyring, ssh-agent, gpg-agent and container-engine sockets live there;
   ``/etc/resolv.conf``'s target is shown again when it lies there) and the private temp dir as ``/tmp``
   (a tmpfs of ``plan.temp_size`` bytes when set and bwrap knows ``--size``: checks/limits.py);
3. an empty read-only directory over each hidden path (homes, the project root), then the read-only paths,
   then the masks (secret stores, other jobs' worktrees; ``/etc/shadow``-like files), then the worktree
   read-write and its ``.git`` read-only again.

A seccomp filter (``seccomp.py``) refuses ``socket(AF_UNIX)``, io_uring and the kernel keyring: a read-only
mount does not stop ``connect()`` on a visible socket file, the filter does.

``--die-with-parent`` ends the sandbox when the engine dies; with a new pid namespace every process of the
check, also one that left its session, is killed when the check's leader exits.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from pathlib import Path

from spotpatch_agent.checks.sandbox.plan import SandboxPlan

#: Where bwrap is looked for (fixed system locations only; never the check's or the engine's ``PATH``).
BWRAP_PATHS = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap", "/run/current-system/sw/bin/bwrap")
#: Files readable by root only that a check running as root (CI) must still not read.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                  "/etc/ssh/ssh_host_*_key", "/etc/ssl/private")
#: The private temp dir's mount point inside the sandbox (the check's ``TMPDIR``).
SANDBOX_TMP = Path("/tmp")


def find_bwrap() -> str | None:
    """The first executable :data:`BWRAP_PATHS` entry, or ``None``."""
    return next((p for p in BWRAP_PATHS if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def bwrap_argv(bwrap: str, plan: SandboxPlan, argv: list[str], *, seccomp_fd: int | None = None) -> list[str]:
    """The full command line: ``[bwrap, options…, "--", *argv]`` (``argv[0]`` absolute). ``seccomp_fd``:
    a descriptor holding the filter of ``seccomp.py`` (no Unix sockets, io_uring or keyring), passed to bwrap."""
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if plan.network:
        args.append("--share-net")
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    resolv = os.path.realpath("/etc/resolv.conf")
    if plan.network and resolv.startswith("/run/") and os.path.isfile(resolv):
        args += ["--ro-bind", resolv, resolv]
    if plan.temp_size is not None and supports_tmpfs_size(bwrap):  # its pages are memory: the cgroup pays
        args += ["--size", str(plan.temp_size), "--perms", "1777", "--tmpfs", str(SANDBOX_TMP)]
    else:
        args += ["--bind", str(plan.temp_dir), str(SANDBOX_TMP)]

    # Each hidden path gets its own empty view, also one already behind the private /tmp or a hidden home:
    # made read-only below, so a write there fails instead of landing in a scratch directory.
    emptied: list[Path] = []
    for hidden in sorted(plan.hidden, key=lambda p: len(p.parts)):
        args += ["--perms", "0755", "--tmpfs", str(hidden)]
        emptied.append(hidden)
    for path in plan.read_only:
        args += ["--ro-bind", str(path), str(path)]
    emptied += [m for m in plan.masked if m.is_dir() and not m.is_symlink()]
    for path in plan.masked:
        # A writable path below a mask (the job's worktree below node_modules/.spotpatch) must stay reachable:
        # that mask may be traversed, not listed.
        args += _mask(path, traverse=any(_under(w, path) for w in plan.writable))
    for pattern in SYSTEM_SECRETS:
        for found in sorted(glob.glob(pattern)):
            args += _mask(Path(found))
    for path in plan.writable:
        args += ["--bind", str(path), str(path)]
    for path in plan.git_metadata:  # the worktree's .git: neither written, replaced nor removed (a mount point)
        args += ["--ro-bind", str(path), str(path)]
    for path in emptied:  # after every mount below them: the empty views themselves take no writes
        args += ["--remount-ro", str(path)]
    args += ["--chdir", str(plan.cwd), "--setenv", "TMPDIR", str(SANDBOX_TMP), "--", *argv]
    return args


def _mask(path: Path, *, traverse: bool = False) -> list[str]:
    if path.is_dir() and not path.is_symlink():
        return ["--perms", "0111" if traverse else "0000", "--tmpfs", str(path)]  # made read-only at the end
    if os.path.lexists(path) and not path.is_symlink():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


@functools.lru_cache(maxsize=8)
def supports_tmpfs_size(bwrap: str) -> bool:
    """Whether ``bwrap`` takes ``--size``: bubblewrap 0.7 and later, not installed setuid (it refuses the
    option then). Without it the private temp dir stays a directory on disk, where the disk watchdog counts
    its writes (checks/limits.py)."""
    import stat
    import subprocess

    try:
        if os.stat(bwrap).st_mode & stat.S_ISUID:
            return False
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in out.stdout + out.stderr


def bwrap_version(bwrap: str) -> str | None:
    """``bubblewrap 0.8.0`` → ``0.8.0`` (best effort, for ``doctor``)."""
    import subprocess

    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().rsplit(" ", 1)[-1] or None


def install_hint() -> str:
    """How to get bubblewrap on this machine."""
    if shutil.which("apt-get"):
        return "install bubblewrap (sudo apt-get install bubblewrap)"
    if shutil.which("dnf"):
        return "install bubblewrap (sudo dnf install bubblewrap)"
    if shutil.which("pacman"):
        return "install bubblewrap (sudo pacman -S bubblewrap)"
    return "install bubblewrap (the bwrap command) from your distribution"
