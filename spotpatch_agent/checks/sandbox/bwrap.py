"""Linux: a check confined by bubblewrap (``bwrap``, Debian package ``bubblewrap``; docs/security.md §4).

:func:`bwrap_argv` turns a :class:`~spotpatch_agent.checks.sandbox.plan.SandboxPlan` into one ``bwrap``
command line; :func:`bwrap_args` is the option list itself, which the caller hands bwrap through a
descriptor (``--args FD``), so the sandbox's ``/proc/1/cmdline`` reads ``bwrap --args 3 -- <command>`` and
names no host path. Every namespace is new (user, mount, pid, ipc, uts, cgroup; network too unless the plan
allows it), every capability is dropped and no further user namespace can be created inside, so the check
cannot undo a mount. The root is an empty read-only tmpfs; mounts, in this order (a later mount covers an
earlier one):

1. the plan's system directories read-only (a merged-usr ``/bin`` as the same symlink), a new ``/dev`` (null,
   zero, random, tty, pts, its own ``shm``), a new ``/proc`` of the check's own pid namespace (no other
   process, so no ``/proc/<pid>/environ`` of the engine or Vite), of ``/sys`` only the CPU topology;
2. an empty ``/run`` (``/etc/resolv.conf``'s target is shown again when it lies there and the check has the
   network) and the private temp dir as ``/tmp`` (``/var/tmp`` links to it; a tmpfs of ``plan.temp_size``
   bytes when set: checks/limits.py);
3. an empty read-only directory over each hidden path inside a shown one (a project in ``/usr/src/app``),
   then the read-only paths at their own paths, the project's ``node_modules`` at
   :data:`~spotpatch_agent.checks.sandbox.plan.SANDBOX_MODULES`, the masks (secret stores, worktree pools,
   ``/etc``'s unreadable entries), then the worktree read-write at
   :data:`~spotpatch_agent.checks.sandbox.plan.SANDBOX_WORK` (the check's working directory) and its
   ``.git`` read-only again: a gitfile as an empty file (its text names the checkout's path, and git in a
   check has no repository to reach anyway), a ``.git`` directory as itself; last, an empty read-only view
   over each gitlink directory (``readonly_dirs``: a submodule's path, where a check could otherwise plant a
   repository for host git to find, issue 25).

What stays visible of the host's paths: ``/proc/self/mountinfo`` lists each bind mount's source directory
(the kernel shows it as the mount's root; bubblewrap cannot rename it): the worktree's and
``node_modules``' host paths, and the toolchains'. docs/security.md says so.

A seccomp filter (``seccomp.py``) refuses ``socket()`` but for IP and netlink, datagram ``socketpair`` calls,
io_uring and the kernel keyring: a read-only mount does not stop ``connect()`` on a visible socket file, the
filter does.

``--die-with-parent`` ends the sandbox when the engine dies; with a new pid namespace every process of the
check, also one that left its session, is killed when the check's leader exits.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from pathlib import Path

from spotpatch_agent.checks.sandbox.plan import PRIVATE_HOME, SANDBOX_MODULES, SYSTEM_SYS_DIRS, SandboxPlan

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


def bwrap_argv(bwrap: str, plan: SandboxPlan, argv: list[str], *, seccomp_fd: int | None = None,
               args_fd: int | None = None) -> list[str]:
    """The full command line: ``[bwrap, options…, "--", *argv]`` (``argv[0]`` absolute, a host path: shown
    where the sandbox has it). ``seccomp_fd``: a descriptor holding the filter of ``seccomp.py``, passed to
    bwrap. ``args_fd``: a descriptor holding :func:`bwrap_args` NUL-separated (see :func:`args_file`); the
    command line then is ``[bwrap, "--args", fd, "--", *argv]``."""
    command = [plan.inside(argv[0], relocate=True) or argv[0], *argv[1:]]
    if args_fd is not None:
        return [bwrap, "--args", str(args_fd), "--", *command]
    return [bwrap, *bwrap_args(plan, seccomp_fd=seccomp_fd), "--", *command]


def args_file(options: list[str]) -> int:
    """A readable descriptor holding ``options`` NUL-separated at offset 0, for ``bwrap --args FD`` (the
    caller passes it to the spawn and closes it after). Raises ``ValueError`` for an option holding NUL."""
    if any("\x00" in o for o in options):
        raise ValueError("a sandbox option holds NUL")
    data = b"".join(o.encode() + b"\x00" for o in options)
    try:
        fd = os.memfd_create("spotpatch-check-bwrap-args", os.MFD_CLOEXEC)
    except (OSError, AttributeError):  # no memfd: an unlinked temp file does the same
        import tempfile

        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_args(plan: SandboxPlan, *, seccomp_fd: int | None = None) -> list[str]:
    """bwrap's options for ``plan`` (see the module docstring), without the command."""
    args = ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if plan.network:
        args.append("--share-net")
    for path in plan.system:
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        else:
            args += ["--ro-bind", str(path), str(path)]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    for sys_dir in SYSTEM_SYS_DIRS:
        if os.path.isdir(sys_dir):
            args += ["--ro-bind", sys_dir, sys_dir]
    resolv = os.path.realpath("/etc/resolv.conf")
    if plan.network and resolv.startswith("/run/") and os.path.isfile(resolv):
        args += ["--ro-bind", resolv, resolv]
    if plan.temp_size is not None:  # a sized tmpfs (its pages are memory: the check's cgroup pays)
        home = f"{SANDBOX_TMP}/{PRIVATE_HOME}"  # the private HOME of Confinement.prepare, made again in it
        args += ["--size", str(plan.temp_size), "--perms", "1777", "--tmpfs", str(SANDBOX_TMP),
                 "--perms", "0700", "--dir", home]
        for name, link_to in plan.home_links:
            args += ["--symlink", str(link_to), f"{home}/{name}"]
    else:
        args += ["--bind", str(plan.temp_dir), str(SANDBOX_TMP)]
    args += ["--symlink", "../tmp", "/var/tmp"]

    # A hidden path inside a shown one gets its own empty view: made read-only below, so a write there
    # fails instead of landing in a scratch directory.
    shown = [*plan.system, *plan.read_only]
    emptied: list[Path] = []
    for hidden in sorted(plan.hidden, key=lambda p: len(p.parts)):
        if any(_under(hidden, s) and hidden != s for s in shown) and not any(_under(hidden, e) for e in emptied):
            args += ["--perms", "0755", "--tmpfs", str(hidden)]
            emptied.append(hidden)
    for path in plan.read_only:
        args += ["--ro-bind", str(path), str(path)]
    if plan.modules is not None:
        args += ["--ro-bind", str(plan.modules), SANDBOX_MODULES]
    for path in plan.masked:
        target = _target(plan, path)
        if target is not None:
            args += _mask(path, target)
            if path.is_dir() and not path.is_symlink():
                emptied.append(Path(target))
    for pattern in SYSTEM_SECRETS:  # by name too: also where /etc's modes are looser than they should be
        for found in sorted(glob.glob(pattern)):
            if not any(_under(Path(found), m) for m in plan.masked):
                args += _mask(Path(found), found)
    for path in plan.writable:
        args += ["--bind", str(path), plan.inside(path, relocate=True) or str(path)]
    for path in plan.git_metadata:  # the worktree's .git: neither written, replaced nor removed (a mount point)
        inside = plan.inside(path, relocate=True) or str(path)
        source = str(path) if path.is_dir() and not path.is_symlink() else "/dev/null"
        args += ["--ro-bind", source, inside]
    # Every directory between a writable root and a gitlink is bound onto itself: a mount point cannot be
    # renamed (EBUSY), so a check cannot move the gitlink's read-only view away with its parent and make a
    # new directory at its path (``rename("vendor", "vendor2")``; issue 25 break). Writing inside them works.
    for path in _gitlink_ancestors(plan):
        args += ["--bind", str(path), plan.inside(path, relocate=True) or str(path)]
    for path in plan.readonly_dirs:  # a gitlink's directory: an empty view, made read-only below (issue 25)
        inside = plan.inside(path, relocate=True) or str(path)
        args += ["--perms", "0555", "--tmpfs", inside]
        emptied.append(Path(inside))
    for path in emptied:  # after every mount below them: the empty views themselves take no writes
        args += ["--remount-ro", str(path)]
    args += ["--remount-ro", "/", "--chdir", plan.inside(plan.cwd, relocate=True) or str(plan.cwd),
             "--setenv", "TMPDIR", str(SANDBOX_TMP)]
    return args


def _gitlink_ancestors(plan: SandboxPlan) -> list[Path]:
    """The directories strictly between a writable path and each of ``plan.readonly_dirs`` below it,
    outermost first, each once (``vendor`` for ``<worktree>/vendor/lib``). Only real directories: a symlink
    on the way (never mounted over, bwrap would land on its target) ends the list for that gitlink."""
    found: list[Path] = []
    for gitlink in plan.readonly_dirs:
        root = next((w for w in plan.writable if _under(gitlink, w) and gitlink != w), None)
        if root is None:
            continue
        between = [p for p in reversed(gitlink.parents) if _under(p, root) and p != root]
        for path in between:
            if path.is_symlink() or not path.is_dir():
                break
            if path not in found:
                found.append(path)
    return found


def _target(plan: SandboxPlan, path: Path) -> str | None:
    """Where a masked host path lies in the sandbox (``None``: nothing shows it, nothing to mask)."""
    text = str(path)
    for host, inside in ((plan.modules, SANDBOX_MODULES),):
        if host is not None and _under(path, host):
            return inside + text[len(str(host)):]
    if any(_under(path, s) for s in (*plan.system, *plan.read_only)):
        return text
    return None


def _mask(path: Path, target: str) -> list[str]:
    if path.is_dir() and not path.is_symlink():
        return ["--perms", "0000", "--tmpfs", target]  # made read-only at the end
    if os.path.lexists(path) and not path.is_symlink():
        return ["--ro-bind", "/dev/null", target]
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
