"""Kernel-enforced resource limits of one check run (docs/security.md §4, *Resource limits*; issue 25).

A check runs project code the model may have written, so a fork bomb, a memory balloon or a disk fill must
end at a bound the trusted config sets (``checks[].limits``, :class:`~spotpatch_agent.protocol.config.CheckLimits`),
not at the check's timeout. Four layers, each enforced by the kernel or by the engine outside the check:

- **rlimits**, set by a fixed ``/bin/sh`` wrapper just before the check's command is executed
  (:func:`rlimit_argv`; inside the sandbox, so ``RLIMIT_NPROC`` counts the processes of the check's own
  user namespace, not every process of the user; Linux 5.14 and later): ``RLIMIT_NPROC`` (``processes``),
  ``RLIMIT_DATA``
  (``memoryMiB``: heap and private writable mappings of one process; *not* ``RLIMIT_AS``, which breaks
  Node/V8's large address-space reservations), ``RLIMIT_FSIZE`` (``fileSizeMiB``: ``SIGXFSZ``),
  ``RLIMIT_CPU`` (``cpuSec``: ``SIGXCPU``, ``SIGKILL`` 2 s later), ``RLIMIT_NOFILE`` (``openFiles``) and
  ``RLIMIT_CORE`` 0. Soft and hard limits both: the check cannot raise them again. An unconfined check
  (``sandbox: "warn"``) gets the same rlimits except ``RLIMIT_NPROC`` (outside a user namespace it counts
  every process of the user, so it would refuse a desktop session's check at once);
- **a cgroup** (:class:`CheckCgroup`) when the engine can create one: ``RLIMIT_NPROC`` does not bind uid 0
  (the kernel exempts it) and counts per user, so the check's processes also go into a fresh cgroup below
  the engine's own (cgroup v2 where the engine's cgroup delegates ``pids``/``memory``; else the v1
  ``pids`` and ``memory`` hierarchies when writable) with ``pids.max`` = ``processes`` and the memory limit
  = ``memoryMiB`` (swap included where the kernel accounts it). A second fixed ``/bin/sh`` wrapper,
  outside the sandbox, moves itself into the cgroup before it executes ``bwrap``, so nothing of the check
  runs outside it; after the run every process left in it is killed and the cgroup removed;
- **the private temp dir** is a tmpfs of ``tmpMiB`` (``bwrap --size``): ``ENOSPC`` past it. Its pages are
  memory, charged to the check's cgroup;
- **the worktree's disk** (the worktree is on disk, not a tmpfs): ``RLIMIT_FSIZE`` bounds each file, and
  the engine's watchdog (polled by the runner every 0.1 s) stops the check once it wrote more than
  ``diskMiB``. With a cgroup it adds up the kernel's per-process write counters of every process in it
  (:meth:`CheckCgroup.written`: also bytes written into a file the check deleted but holds open, not the
  tmpfs). Without one (or when a counter cannot be read): when the free space of the worktree's filesystem
  (:func:`disk_free`, cheap) has shrunk by more than ``diskMiB`` since the last look that found nothing,
  a walk of the worktree (:func:`written_since`) sums the files created or changed since the check
  started, and that sum over ``diskMiB`` — or a walk that cannot see everything — stops it (another writer
  on the same filesystem alone does not). A fill is seen within one poll, so it overshoots by about what
  the check writes in 0.1 s.

A limit hit is named in the check's result (:func:`limit_message`): ``SIGXCPU`` → CPU time, ``SIGXFSZ`` →
file size, the cgroup's ``pids`` events → processes, its OOM kills → memory, the watchdog → disk, and the
usual error texts in the output (``EMFILE``, ``ENOSPC``, ``ENOMEM``, ``EAGAIN`` from ``fork``) as a
probable cause. Linux only; elsewhere :func:`resolve` still gives the values and nothing is enforced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from spotpatch_agent.protocol.config import CheckLimits

__all__ = ["CheckCgroup", "ResolvedLimits", "cgroup_argv", "create_cgroup", "disk_free", "limit_message",
           "nproc_per_namespace", "resolve", "rlimit_argv", "written_since"]

log = logging.getLogger("spotpatch.checks")

MIB = 1 << 20
#: Defaults of :class:`~spotpatch_agent.protocol.config.CheckLimits` (``memoryMiB``: half the RAM).
DEFAULT_PROCESSES = 2048
DEFAULT_FILE_SIZE_MIB = 1024
DEFAULT_TMP_MIB = 1024
DEFAULT_CPU_SEC = 1800
DEFAULT_OPEN_FILES = 8192
DEFAULT_DISK_MIB = 4096
#: ``memoryMiB`` when the RAM cannot be read.
FALLBACK_MEMORY_MIB = 4096
#: Seconds between ``SIGXCPU`` (the soft CPU limit) and ``SIGKILL`` (the hard one).
CPU_KILL_GRACE_SEC = 2
#: Exit code of a limits wrapper that could not set a limit or join the cgroup (nothing of the check ran).
WRAPPER_FAILED = 125
#: Where cgroup hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ResolvedLimits:
    """The effective limits of one run: counts, bytes and seconds (defaults applied)."""

    processes: int
    memory_bytes: int
    file_size_bytes: int
    tmp_bytes: int
    cpu_sec: int
    open_files: int
    disk_bytes: int

    def summary(self) -> str:
        """``processes 2048, memory 8192 MiB, …`` for the check's result."""
        return (f"processes {self.processes}, memory {self.memory_bytes // MIB} MiB, file size "
                f"{self.file_size_bytes // MIB} MiB, temp {self.tmp_bytes // MIB} MiB, CPU {self.cpu_sec} s per "
                f"process, open files {self.open_files}, disk {self.disk_bytes // MIB} MiB")


def _ram_mib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MIB
    except (OSError, ValueError, AttributeError):
        return 2 * FALLBACK_MEMORY_MIB


def resolve(limits: CheckLimits) -> ResolvedLimits:
    """The configured values with the defaults for absent keys."""
    memory_mib = limits.memory_mib or max(256, _ram_mib() // 2)
    return ResolvedLimits(
        processes=limits.processes or DEFAULT_PROCESSES, memory_bytes=memory_mib * MIB,
        file_size_bytes=(limits.file_size_mib or DEFAULT_FILE_SIZE_MIB) * MIB,
        tmp_bytes=(limits.tmp_mib or DEFAULT_TMP_MIB) * MIB, cpu_sec=limits.cpu_sec or DEFAULT_CPU_SEC,
        open_files=limits.open_files or DEFAULT_OPEN_FILES, disk_bytes=(limits.disk_mib or DEFAULT_DISK_MIB) * MIB)


# $1 processes ("-": not set), $2 data KiB, $3 file size in 512-byte blocks (POSIX ulimit -f), $4 soft CPU s,
# $5 hard CPU s, $6 open files; then the command. dash names the process limit -p, bash/busybox/zsh -u.
_RLIMIT_SCRIPT = (
    'fail() { echo "spotpatch: the check did not run: its resource limits could not be set" >&2; '
    f'exit {WRAPPER_FAILED}; }}\n'
    'ulimit -c 0 && ulimit -d "$2" && ulimit -f "$3" && ulimit -S -t "$4" && ulimit -H -t "$5" '
    '&& ulimit -n "$6" || fail\n'
    'if [ "$1" != - ]; then ulimit -p "$1" 2>/dev/null || ulimit -u "$1" 2>/dev/null || fail; fi\n'
    'shift 6\nexec "$@"'
)
# The cgroup.procs files up to "--", then the command: "0" moves this shell itself, before it forks anything.
# The shell's own error would name the cgroup's absolute path: a fixed message instead.
_CGROUP_SCRIPT = (
    'for f do if [ "$f" = -- ]; then shift; break; fi; '
    '{ echo 0 > "$f"; } 2>/dev/null || { echo "spotpatch: the check did not run: it could not join its cgroup" >&2; '
    f'exit {WRAPPER_FAILED}; }}; shift; done\nexec "$@"'
)


def _clamp(value: int, which: int) -> int:
    """``value`` no higher than the engine's own hard limit (an unprivileged process cannot raise it)."""
    try:
        hard = resource.getrlimit(which)[1]
    except (OSError, ValueError):
        return value
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


#: Linux counts ``RLIMIT_NPROC`` per user namespace since 5.14 (ucounts); before, per user on the whole host.
NPROC_PER_NAMESPACE_SINCE = (5, 14)


def nproc_per_namespace(release: str | None = None) -> bool:
    """Whether this kernel (``release``: default ``uname -r``) counts ``RLIMIT_NPROC`` in the check's own
    user namespace. On an older one the limit would count every process of the user (a desktop session's
    browser threads included) and refuse the check's forks at once: it is then not set (the cgroup's
    ``pids.max`` still is)."""
    found = re.match(r"(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return found is not None and (int(found[1]), int(found[2])) >= NPROC_PER_NAMESPACE_SINCE


def rlimit_argv(limits: ResolvedLimits, argv: list[str], *, processes: bool) -> list[str]:
    """``argv`` behind the rlimit wrapper (see the module docstring). ``processes``: also ``RLIMIT_NPROC``
    (only where the wrapper runs in the check's own user namespace, on a kernel that counts it there:
    :func:`nproc_per_namespace`)."""
    processes = processes and nproc_per_namespace()
    cpu = _clamp(limits.cpu_sec, resource.RLIMIT_CPU)
    cpu_hard = _clamp(cpu + CPU_KILL_GRACE_SEC, resource.RLIMIT_CPU)
    values = [str(_clamp(limits.processes, resource.RLIMIT_NPROC)) if processes else "-",
              str(_clamp(limits.memory_bytes, resource.RLIMIT_DATA) // 1024),
              str(_clamp(limits.file_size_bytes, resource.RLIMIT_FSIZE) // 512),
              str(min(cpu, cpu_hard)), str(cpu_hard), str(_clamp(limits.open_files, resource.RLIMIT_NOFILE))]
    return ["/bin/sh", "-c", _RLIMIT_SCRIPT, "spotpatch-limits", *values, *argv]


def cgroup_argv(procs_files: list[Path], argv: list[str]) -> list[str]:
    """``argv`` started inside the cgroups whose ``cgroup.procs`` files are given (see the module docstring)."""
    if not procs_files:
        return argv
    return ["/bin/sh", "-c", _CGROUP_SCRIPT, "spotpatch-cgroup", *map(str, procs_files), "--", *argv]


@dataclass
class CheckCgroup:
    """The cgroup(s) of one check run: one directory per hierarchy (one on v2; ``pids`` and/or ``memory``
    on v1). ``kinds`` names what is limited (``pids``, ``memory``); ``version`` is 1 or 2."""

    version: int
    dirs: list[Path]
    kinds: tuple[str, ...]
    _removed: bool = field(default=False, repr=False)

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def describe(self) -> str:
        return f"cgroup v{self.version} ({' and '.join(self.kinds)})"

    def _counter(self, name: str, key: str) -> int:
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                for line in (d / name).read_text().splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        return 0

    def pids_refused(self) -> int:
        """How many forks the ``pids`` limit refused so far."""
        return self._counter("pids.events", "max") if "pids" in self.kinds else 0

    def oom_kills(self) -> int:
        """How many processes the memory limit's OOM killer ended so far."""
        if "memory" not in self.kinds:
            return 0
        return self._counter("memory.events" if self.version == 2 else "memory.oom_control", "oom_kill")

    def written(self) -> int | None:
        """Bytes the check's processes wrote to disk so far (``/proc/<pid>/io``: ``write_bytes`` less
        ``cancelled_write_bytes`` of every process in the cgroup; a reaped child's count is in its
        parent's, tmpfs writes are not counted), or ``None`` when one process's count cannot be read."""
        total = 0
        for pid in self._pids():
            try:
                fields = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
                total += int(fields["write_bytes"]) - int(fields.get("cancelled_write_bytes", 0))
            except FileNotFoundError:
                continue  # exited (its count went to its parent)
            except (OSError, ValueError, KeyError):
                return None
        return total

    def _pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """``SIGKILL`` every process in the cgroup now (the watchdog; :meth:`close` repeats it)."""
        for pid in self._pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def close(self, *, timeout: float = 2.0) -> None:
        """Kill every process left in the cgroup, then remove it (logged, never raised, when it stays)."""
        if self._removed:
            return
        self._removed = True
        deadline = time.monotonic() + timeout
        for d in self.dirs:
            with contextlib.suppress(OSError):
                if (d / "cgroup.kill").exists():
                    (d / "cgroup.kill").write_text("1")
        while True:
            left = self._pids()
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            removed = True
            for d in self.dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    removed = False
            if removed or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if not removed:
            log.warning("a check's cgroup could not be removed (processes left: %d)", len(self._pids()))


def _own_cgroups() -> dict[str, str]:
    """``/proc/self/cgroup`` as controller → path (``""`` for the v2 line)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                for name in parts[1].split(",") if parts[1] else [""]:
                    found[name] = parts[2]
    return found


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _v2(own: str, limits: ResolvedLimits, name: str) -> CheckCgroup | None:
    mount = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
    base = mount / own.lstrip("/")
    try:
        available = set((base / "cgroup.controllers").read_text().split())
        enabled = set((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    wanted = [k for k in ("pids", "memory") if k in available]
    for kind in wanted:
        if kind not in enabled and _write(base / "cgroup.subtree_control", f"+{kind}"):
            enabled.add(kind)
    kinds = tuple(k for k in wanted if k in enabled)
    if not kinds:
        return None
    if not os.access(base / "cgroup.procs", os.W_OK):  # moving a process needs the common ancestor's file
        return None
    try:
        (base / name).mkdir()
    except OSError:
        return None
    group = CheckCgroup(2, [base / name], kinds)
    ok = ("pids" not in kinds or _write(base / name / "pids.max", str(limits.processes))) and (
        "memory" not in kinds or _write(base / name / "memory.max", str(limits.memory_bytes)))
    if "memory" in kinds:
        _write(base / name / "memory.swap.max", "0")
    if not ok:
        group.close()
        return None
    return group


def _v1(cgroups: dict[str, str], limits: ResolvedLimits, name: str) -> CheckCgroup | None:
    group = CheckCgroup(1, [], ())
    for kind, setting, value in (("pids", "pids.max", limits.processes),
                                 ("memory", "memory.limit_in_bytes", limits.memory_bytes)):
        if kind not in cgroups:
            continue
        directory = CGROUP_ROOT / kind / cgroups[kind].lstrip("/") / name
        try:
            directory.mkdir()
        except OSError:
            continue
        group.dirs.append(directory)
        group.kinds += (kind,)
        if not _write(directory / setting, str(value)):
            group.close()
            return None
        if kind == "memory":
            _write(directory / "memory.memsw.limit_in_bytes", str(value))  # swap too, where accounted
    if not group.dirs:
        return None
    return group


def _sweep(group: CheckCgroup) -> None:
    """Remove the empty cgroups an engine that is gone left next to ``group`` (a crash before its cleanup)."""
    for d in group.dirs:
        for stale in d.parent.glob("spotpatch-check-*-*"):
            pid = stale.name.split("-")[2]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    stale.rmdir()  # fails while a process is still in it: left alone


def create_cgroup(limits: ResolvedLimits) -> CheckCgroup | None:
    """A fresh cgroup for one check run below the engine's own, or ``None`` when none can be created here
    (not Linux, no delegated subtree, not writable): then only the rlimits apply."""
    if not sys.platform.startswith("linux"):
        return None
    own = _own_cgroups()
    name = f"spotpatch-check-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    found = _v2(own[""], limits, name) if "" in own else None
    if found is None:
        found = _v1(own, limits, name)
    if found is not None:
        _sweep(found)
    return found


#: Entries :func:`written_since` looks at before it stops counting (a lower bound then).
WALK_MAX_ENTRIES = 200_000


def written_since(root: Path, since: float, *, max_entries: int = WALK_MAX_ENTRIES) -> int | None:
    """Bytes on disk (allocated blocks) of the files under ``root`` created or changed at or after ``since``
    (epoch seconds), symlinks not followed; ``.git`` is skipped (read-only to a confined check). ``None``
    when a directory cannot be listed (a check that hides its files behind ``chmod 000``) or more than
    ``max_entries`` entries exist: the caller then assumes the worst."""
    total = 0
    seen = 0
    stack = [str(root)]
    while stack:
        if seen >= max_entries:
            return None
        try:
            entries = os.scandir(stack.pop())
        except FileNotFoundError:
            continue
        except OSError:
            return None
        with entries:
            for entry in entries:
                seen += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            stack.append(entry.path)
                    elif max(st.st_mtime, st.st_ctime) >= since:
                        total += st.st_blocks * 512
                except OSError:
                    continue
    return total


def disk_free(path: Path) -> int | None:
    """Free bytes (for an unprivileged writer) on the filesystem holding ``path``; ``None`` when unknown."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


_OUTPUT_HINTS = (
    (re.compile(r"Too many open files|\bEMFILE\b"), "open files", "openFiles"),
    (re.compile(r"No space left on device|\bENOSPC\b"), "temp size", "tmpMiB"),  # or a full disk: said below
    (re.compile(r"Cannot allocate memory|\bENOMEM\b|out of memory|MemoryError|Out of memory", re.I),
     "memory", "memoryMiB"),
    (re.compile(r"Resource temporarily unavailable|\bEAGAIN\b|Cannot fork|fork: retry"), "processes",
     "processes"),
    (re.compile(r"File too large|\bEFBIG\b|File size limit exceeded"), "file size", "fileSizeMiB"),
    (re.compile(r"CPU time limit exceeded"), "CPU time", "cpuSec"),
)


def _value(limits: ResolvedLimits, key: str) -> str:
    return {"processes": str(limits.processes), "memoryMiB": f"{limits.memory_bytes // MIB} MiB",
            "fileSizeMiB": f"{limits.file_size_bytes // MIB} MiB", "tmpMiB": f"{limits.tmp_bytes // MIB} MiB",
            "cpuSec": f"{limits.cpu_sec} s", "openFiles": str(limits.open_files),
            "diskMiB": f"{limits.disk_bytes // MIB} MiB"}[key]


def _named(what: str, key: str, limits: ResolvedLimits) -> str:
    return f"{what} limit (limits.{key} = {_value(limits, key)})"


def limit_message(limits: ResolvedLimits, *, sig: int | None, cgroup: CheckCgroup | None, disk_stopped: bool,
                  failed: bool, output: str) -> tuple[str, bool] | None:
    """(one sentence naming the limit the check hit and its value, whether that is certain), or ``None``.
    Certain causes (the check's own signal, the cgroup's counters, the watchdog) first; for a failed check,
    an error text in its output next (a probable cause)."""
    if disk_stopped:
        return ((f"Stopped: the check hit its {_named('disk', 'diskMiB', limits)}: it wrote more than that to "
                "disk."), True)
    if sig == signal.SIGXCPU:
        return f"Stopped: the check hit its {_named('CPU time', 'cpuSec', limits)} (SIGXCPU).", True
    if sig == signal.SIGXFSZ:
        return f"Stopped: the check hit its {_named('file size', 'fileSizeMiB', limits)} (SIGXFSZ).", True
    if cgroup is not None and cgroup.pids_refused():
        return f"Stopped: the check hit its {_named('process', 'processes', limits)}: a fork was refused.", True
    if cgroup is not None and cgroup.oom_kills():
        return ((f"The check hit its {_named('memory', 'memoryMiB', limits)}: the kernel killed a process of it "
                "(out of memory in its cgroup; private temp files count as memory)."), True)
    if not failed:
        return None
    for pattern, what, key in _OUTPUT_HINTS:
        if pattern.search(output):
            also = " (or the disk is full)" if key == "tmpMiB" else ""
            return f"The check failed probably on its {_named(what, key, limits)}{also}: its output reports it.", False
    return None
