"""Run one trusted check as a bounded host process (docs/design.md §9; spec "检查工具", "验证").

Used by the ``run_check`` tool (the model names a ``checkId``) and by the engine's final required-check
stage; both get the same :class:`CheckRun`. Rules:

- argv only (``shell=False``): ``[check.command, *check.args]``, cwd = the job worktree, stdin closed;
- a minimal environment (:func:`check_env`): ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TMPDIR`` (and the
  Windows essentials), ``NODE_OPTIONS`` only when the check lists it in ``passEnv``, plus ``CI=1``,
  ``FORCE_COLOR=0``, ``NO_COLOR=1`` — never a provider key, session token or other credential (no name that
  :func:`~spotpatch_agent.policy.credentials.looks_like_credential`, even on the allowlist);
- its own process group (POSIX), killed on exit, timeout and cancellation, so no orphan stays
  (a process that leaves the group with ``setsid`` is outside it: docs/security.md);
- confined (docs/security.md §4, *Check sandbox*): on a platform with a sandbox the process runs inside
  it (:mod:`spotpatch_agent.checks.sandbox`: no network unless the check's trusted ``network``, read-only
  filesystem view that is an allowlist (system directories, the toolchains, ``node_modules``, ``readPaths``),
  writes only in the worktree and a private temp dir (its ``TMPDIR`` and ``HOME``, removed after the run),
  its own pid namespace).
  Where none is available the trusted config's ``sandbox`` decides: ``required`` (default) raises
  :class:`SandboxUnavailable` and nothing runs; ``warn`` runs it unconfined (``CheckRun.sandbox``);
- resource limits (Linux; :mod:`spotpatch_agent.checks.limits`, the check's trusted ``limits``): rlimits
  set by a fixed shell wrapper just before the command, a cgroup joined before anything of the check runs,
  a size-limited tmpfs as the private temp dir, and a watchdog (every :data:`WATCHDOG_INTERVAL_SEC`) that
  kills the check past ``diskMiB`` written into the worktree or on a fork the cgroup refused. A hit limit
  is named on the first line of the output; ``CheckRun.limits`` says how they were enforced;
- timeout: the check's ``timeoutSec``, else the ``checkTimeoutSec`` limit, never above that limit's cap
  (:func:`~spotpatch_agent.checks.timeouts.check_timeout`);
- stdout and stderr merged, bounded to ``checkOutputMaxBytes``, decoded leniently, ANSI and control
  characters stripped, the worktree and project root made relative, ``$HOME`` shown as ``~``, and any
  registered secret redacted.

Outcomes: exit 0 → ``passed``; a non-zero exit, a signal or a command that cannot be started →
``failed``; the deadline → ``timed-out``. Nothing here raises for a check's behaviour; cancellation of
the caller propagates after the process tree is killed.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.abc import Process

from spotpatch_agent.checks.limits import (
    CheckCgroup,
    ResolvedLimits,
    cgroup_argv,
    create_cgroup,
    disk_free,
    limit_message,
    resolve,
    rlimit_argv,
    written_since,
)
from spotpatch_agent.checks.sandbox.plan import SANDBOX_WORK
from spotpatch_agent.checks.timeouts import check_timeout
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.credentials import looks_like_credential
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
from spotpatch_agent.process import NEW_SESSION, kill_tree
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tree_remove import remove_tree

if TYPE_CHECKING:
    from spotpatch_agent.checks.sandbox import Confinement

#: Variables copied from the engine's environment (plus every ``LC_*``); everything else is dropped.
CHECK_ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT", "WINDIR", "TEMP", "TMP")
#: Variables a check may opt into with ``passEnv`` (mirrors ``CheckConfig.pass_env``).
CHECK_ENV_OPTIONAL = ("NODE_OPTIONS",)
#: Variables always set for a check: non-interactive, no colour.
CHECK_ENV_FIXED = {"CI": "1", "FORCE_COLOR": "0", "NO_COLOR": "1"}
#: Seconds to keep reading a check's output after its process group was killed.
DRAIN_GRACE_SEC = 1.0
#: Seconds between two looks of a check's resource watchdog (disk use, refused forks).
WATCHDOG_INTERVAL_SEC = 0.1
#: Appended to output cut at ``checkOutputMaxBytes``.
TRUNCATED_MARK = "\n[output truncated]"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: C0 controls but tab/newline, DEL, C1 controls (U+0080–U+009F: a terminal may read U+009B as CSI and
#: U+009D as OSC) and bidirectional overrides/isolates (display spoofing, "Trojan Source").
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

CheckStatus = Literal["passed", "failed", "timed-out"]
SandboxPolicy = Literal["required", "warn"]


class SandboxUnavailable(JobFailure):
    """``sandbox: "required"`` and this machine cannot confine checks: the check did not run (``CHECK_FAILED``,
    the message names the reason and the fix)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CHECK_FAILED, message)


@dataclass(frozen=True)
class CheckRun:
    """One finished run of a check. ``exit_code`` is None when it timed out, died of a signal or never
    started; ``signal`` is set only when the check itself died of one (a timeout kill is ``timed-out``).
    ``output`` is clean and bounded (see the module docstring); ``truncated`` says it was cut."""

    check_id: str
    name: str
    required: bool
    status: CheckStatus
    exit_code: int | None
    signal: int | None
    duration_ms: int
    output: str
    truncated: bool
    #: ``confined`` (ran in the sandbox) or ``unconfined`` (``sandbox: "warn"`` on a machine without one).
    sandbox: Literal["confined", "unconfined"] = "confined"
    #: Whether the check could reach the network: its trusted ``network: true``, or it ran unconfined.
    network: bool = False
    #: How its resource limits were enforced (checks/limits.py), one phrase; empty when none were applied.
    limits: str = ""

    def sandbox_note(self) -> str:
        """One sentence for the model and the CLI: how the check ran."""
        if self.sandbox == "unconfined":
            return ("WARNING: this check ran UNCONFINED (no sandbox on this machine; the trusted config has "
                    'sandbox: "warn"): it could read your files and secrets and use the network.'
                    + (f" Still, {self.limits} (no process count rlimit outside a sandbox)." if self.limits else ""))
        return ("Ran confined (sandbox): " + ("network allowed by the trusted config" if self.network else "no network")
                + ", writes only in the worktree and a private temp dir, your home and checkout hidden"
                + (f"; {self.limits}." if self.limits else "."))

    @property
    def ok(self) -> bool:
        """True only for ``passed``; the model cannot turn anything else into success."""
        return self.status == "passed"

    @property
    def started(self) -> bool:
        """False when the command could not be started (missing, not executable)."""
        return not (self.status == "failed" and self.exit_code is None and self.signal is None)

    def outcome(self) -> str:
        """A short human phrase: ``exit code 0``, ``killed by signal 9``, ``timed out``, ``not started``."""
        if self.status == "timed-out":
            return "timed out"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        if self.exit_code is None:
            return "could not be started"
        return f"exit code {self.exit_code}"


def check_env(pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a check process: the allowlist, ``LC_*``, the listed optional variables
    (only names in :data:`CHECK_ENV_OPTIONAL`) and :data:`CHECK_ENV_FIXED`. A name that
    :func:`looks_like_credential` never, whatever list it is on (redaction masks the same names' values)."""
    wanted = set(CHECK_ENV_ALLOWLIST) | (set(pass_env) & set(CHECK_ENV_OPTIONAL))
    env = {
        key: value for key, value in os.environ.items()
        if (key in wanted or re.fullmatch(r"LC_[A-Z]+", key)) and not looks_like_credential(key)
    }
    if "PATH" in env:  # an empty or relative entry resolves in the cwd: the worktree the model writes
        env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if d and os.path.isabs(d))
    env.update(CHECK_ENV_FIXED)
    return env


_PROTECTED = False

log = logging.getLogger("spotpatch.checks")

#: ``prctl(2)`` options: set and read this process's "dumpable" flag.
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3

#: ``prctl(option, value)``: returns on success, raises ``OSError`` (with its ``errno``) on failure.
Prctl = Callable[[int, int], None]


def libc_prctl(option: int, value: int) -> None:
    """``prctl(option, value, 0, 0, 0)`` through libc (Linux). Raises ``OSError`` with the call's ``errno``
    when it returns non-zero, and ``OSError``/``AttributeError`` when libc or ``prctl`` cannot be loaded."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_non_dumpable(prctl: Prctl = libc_prctl) -> bool:
    """``PR_SET_DUMPABLE`` 0 for this process through ``prctl`` (the seam tests inject a failing call
    through). Returns whether it held. A failure is logged on stderr as a warning (redacted, absolute paths
    shortened: issue 21, never silently) and checks still run: the hardening is defence in depth, the
    check's own environment never holds a key (:func:`check_env`). Never raises."""
    try:
        prctl(PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError) as exc:
        detail = f"errno {exc.errno}: {exc.strerror}" if isinstance(exc, OSError) and exc.errno else str(exc)
        log.warning("check hardening failed: prctl(PR_SET_DUMPABLE, 0) did not take effect (%s); a check "
                    "running as this user may read the engine's environment through /proc",
                    shorten_paths(REDACTOR(detail))[:300])
        return False
    return True


def protect_engine_environ() -> None:
    """Linux: make this (the engine) process non-dumpable, once, before its first check runs.

    A check runs project code the model may have written (tests, configs) as the same user; without this
    it could read the provider key from ``/proc/<engine pid>/environ`` (its parent), whatever
    :func:`check_env` keeps out of its own environment. A non-dumpable process's ``/proc`` entries
    (``environ``, ``mem``, ``fd``) are closed to other processes without ``CAP_SYS_PTRACE``; the
    engine's children get the normal setting back at ``exec``. No effect elsewhere; a failure is logged
    (:func:`set_non_dumpable`), not raised."""
    global _PROTECTED
    if _PROTECTED or not sys.platform.startswith("linux"):
        return
    _PROTECTED = True
    set_non_dumpable()


def _path_variants(path: Path | str | None) -> set[str]:
    if path is None:
        return set()
    variants = {str(path).rstrip("/\\")}
    try:
        variants.add(str(Path(path).resolve()))
    except OSError:
        pass
    return {v for v in variants if len(v) > 1}


def clean_output(raw: bytes, *, max_bytes: int, truncated: bool, relative_to: Sequence[Path | str] = (),
                 home: Path | str | None = None) -> tuple[str, bool]:
    """(text, truncated): lenient UTF-8, CRLF → LF, ANSI and control characters removed, every path under
    one of ``relative_to`` made relative (the root itself is ``.``), ``home`` shown as ``~``, registered
    secrets redacted, bounded to ``max_bytes`` bytes plus :data:`TRUNCATED_MARK`."""
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _ANSI.sub("", text))
    labels: dict[str, tuple[str, str]] = {}  # root -> (label alone, label before a separator)
    for root in _path_variants(home):
        labels[root] = ("~", "~/")
    for path in relative_to:
        for root in _path_variants(path):
            labels[root] = (".", "")
    if labels:
        alternatives = "|".join(re.escape(k) for k in sorted(labels, key=len, reverse=True))
        pattern = re.compile(rf"({alternatives})(?:([/\\])|(?![\w.\-]))")
        text = pattern.sub(lambda m: labels[m.group(1)][1 if m.group(2) else 0], text)
    # Redact before the cut; when the read itself was cut, a trailing half-secret is dropped as well.
    text = REDACTOR.redact_cut_source(text) if truncated else REDACTOR(text)
    encoded = text.encode("utf-8")
    if len(encoded) > max_bytes or truncated:
        return encoded[:max_bytes].decode("utf-8", errors="ignore") + TRUNCATED_MARK, True
    return text, False


async def _collect(process: Process, limit: int, into: list[bytes]) -> bool:
    """Read the merged output to EOF, keeping the first ``limit`` bytes; True when more was discarded."""
    size = 0
    assert process.stdout is not None
    async for chunk in process.stdout:  # keep draining past the bound so the check never blocks on a pipe
        if size < limit:
            into.append(chunk[: limit - size])
        size += len(chunk)
    return size > limit


async def run_check_process(check: CheckConfig, cwd: Path, limits: Limits, *,
                            project_root: Path | None = None, sandbox: SandboxPolicy = "required") -> CheckRun:
    """Run ``check`` in ``cwd`` (the job worktree) under ``limits`` and return its :class:`CheckRun`.

    ``project_root`` (the user's checkout), when given, is hidden from the confined check (the worktree is
    its copy) and made relative in the output like ``cwd``. ``sandbox``: the trusted config's policy for a
    machine without confinement. Raises :class:`SandboxUnavailable` (nothing ran) for ``required`` there,
    else only the caller's cancellation (after killing the process tree)."""
    from spotpatch_agent.checks.sandbox import detect, unavailable_message

    detection = await detect()
    if detection.confinement is None and sandbox != "warn":
        raise SandboxUnavailable(unavailable_message(detection))
    max_bytes = limits.get("checkOutputMaxBytes")
    timeout = check_timeout(check, limits)
    started = time.perf_counter()
    confined = detection.confinement is not None
    # The check's working directory as it sees it (bubblewrap: a neutral path), made relative like ``cwd``.
    inside = SANDBOX_WORK if detection.confinement is not None and detection.confinement.relocates else None

    def finish(status: CheckStatus, exit_code: int | None, sig: int | None, raw: bytes, cut: bool) -> CheckRun:
        output, truncated = clean_output(raw, max_bytes=max_bytes, truncated=cut,
                                         relative_to=[p for p in (cwd, project_root, inside) if p is not None],
                                         home=os.environ.get("HOME") or Path.home())
        return CheckRun(check_id=check.id, name=check.name, required=check.required, status=status,
                        exit_code=exit_code, signal=sig, duration_ms=int((time.perf_counter() - started) * 1000),
                        output=output, truncated=truncated, sandbox="confined" if confined else "unconfined",
                        network=check.network or not confined)

    protect_engine_environ()
    env = check_env(check.pass_env)
    argv = [check.command, *check.args]
    temp_dir: Path | None = None
    fds: list[int] = []
    enforced = _Enforcement(resolve(check.limits) if sys.platform.startswith("linux") else None)
    try:
        if detection.confinement is not None:
            from spotpatch_agent.checks.gitlinks import gitlink_dirs

            argv, temp_dir = _confine(detection.confinement, check, cwd, env, project_root, fds, enforced,
                                      readonly_dirs=await gitlink_dirs(cwd))
            if not argv:
                return finish("failed", None, None, b"the command could not be started: not found or not executable",
                              False)
        elif enforced.limits is not None:
            from spotpatch_agent.checks.sandbox.plan import resolve_command

            command = resolve_command(check.command, cwd, env)
            if command is None:
                return finish("failed", None, None, b"the command could not be started: not found or not executable",
                              False)
            argv = rlimit_argv(enforced.limits, [str(command), *check.args], processes=False)
        if enforced.limits is not None:
            enforced.cgroup = create_cgroup(enforced.limits)
            if enforced.cgroup is not None:
                argv = cgroup_argv(enforced.cgroup.procs_files, argv)
            enforced.disk_start = disk_free(cwd)
        try:
            process = await anyio.open_process(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                               stderr=subprocess.STDOUT, start_new_session=NEW_SESSION,
                                               pass_fds=fds)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return finish("failed", None, None, f"the command could not be started: {reason}".encode(), False)
        finally:
            for fd in fds:  # the sandbox has its own copy (or never started)
                os.close(fd)
            fds.clear()
        run = await _supervise(process, timeout, max_bytes, finish, signal_codes=temp_dir is not None,
                               watchdog=enforced.watch(cwd) if enforced.limits is not None else None)
        return enforced.annotate(run)
    finally:
        if enforced.cgroup is not None:
            enforced.cgroup.close()
        if temp_dir is not None:
            try:  # any depth: the check may nest directories past shutil.rmtree's recursion limit
                remove_tree(temp_dir, onerror=lambda *_: None)
            except OSError:
                pass


@dataclass
class _Enforcement:
    """How one run's resource limits (checks/limits.py) are enforced, and whether its watchdog stopped it."""

    limits: ResolvedLimits | None
    cgroup: CheckCgroup | None = None
    disk_start: int | None = None
    stopped: str | None = None  # "disk" or "processes": the watchdog killed the check
    temp_on_disk: bool = False  # confined, but the sandbox could not make the temp dir a sized tmpfs

    def watch(self, cwd: Path) -> Callable[[], bool]:
        """The watchdog's probe (blocking: run in a worker thread): True (and :attr:`stopped` set) once the
        check must be killed: it wrote more than ``diskMiB`` into the worktree (checks/limits.py), or the
        cgroup refused it a process."""
        since = time.time() - 1  # mtime granularity: never miss a file written in the first second

        def probe() -> bool:
            assert self.limits is not None
            bound = self.limits.disk_bytes
            written = self.cgroup.written() if self.cgroup is not None else None
            free = disk_free(cwd) if written is None else None
            if written is not None and written > bound:
                self.stopped = "disk"
            elif free is not None and self.disk_start is not None and self.disk_start - free > bound:
                found = written_since(cwd, since)
                if found is None or found > bound:
                    self.stopped = "disk"
                else:  # another writer on this filesystem: look again after diskMiB more
                    self.disk_start = free
            if self.stopped is None and self.cgroup is not None and self.cgroup.pids_refused():
                self.stopped = "processes"
            if self.stopped is not None and self.cgroup is not None:
                self.cgroup.kill()
            return self.stopped is not None
        return probe

    def note(self) -> str:
        """How the limits were enforced, for :meth:`CheckRun.sandbox_note`."""
        if self.limits is None:
            return "no resource limits on this platform (only the timeout)"
        how = "rlimits" + (f" and a {self.cgroup.describe()}" if self.cgroup is not None else
                           " only (no cgroup could be created here)")
        summary = self.limits.summary()
        if self.temp_on_disk:
            summary += " (the private temp dir is on disk here, its writes counted in the disk limit)"
        return f"limits enforced by the kernel ({how}): {summary}"

    def annotate(self, run: CheckRun) -> CheckRun:
        """``run`` with :attr:`CheckRun.limits` set and a hit limit named at the top of its output."""
        found = None
        if self.limits is not None:
            found = limit_message(self.limits, sig=run.signal, cgroup=self.cgroup,
                                  disk_stopped=self.stopped == "disk", failed=not run.ok, output=run.output)
        if found is None:
            return replace(run, limits=self.note())
        hit, certain = found
        output = f"[{hit}]\n{run.output}"
        # A check a limit stopped (or whose process the kernel refused or killed) did not pass.
        status: CheckStatus = "failed" if certain and run.status == "passed" else run.status
        return replace(run, output=output, status=status, limits=self.note())


def _confine(confinement: Confinement, check: CheckConfig, cwd: Path, env: dict[str, str],
             project_root: Path | None, pass_fds: list[int], enforced: _Enforcement, *,
             readonly_dirs: tuple[Path, ...] = ()) -> tuple[list[str], Path | None]:
    """The sandboxed argv (empty when the command cannot be found) and the check's private temp dir;
    sets the check's ``TMPDIR``, ``HOME`` and ``PATH`` in ``env`` (``Confinement.prepare``); descriptors
    the sandbox inherits go to ``pass_fds``. ``readonly_dirs``: the worktree's gitlink directories
    (checks/gitlinks.py), shown empty and read-only. With ``enforced.limits``: the command behind the
    rlimit wrapper (inside the sandbox) and, where the mechanism can, a ``tmpMiB`` tmpfs as the private
    temp dir."""
    from spotpatch_agent.checks.sandbox import build_plan
    from spotpatch_agent.checks.sandbox.plan import resolve_command

    command = resolve_command(check.command, cwd, env)
    if command is None:
        return [], None
    temp_dir = Path(tempfile.mkdtemp(prefix="spotpatch-check-"))
    plan = build_plan(cwd=cwd, temp_dir=temp_dir, network=check.network, env=env, project_root=project_root,
                      command=command, read_paths=check.read_paths)
    plan = replace(plan, readonly_dirs=readonly_dirs)
    confinement.prepare(plan, env)  # TMPDIR, HOME (the private one) and PATH as the check sees them
    inner = [str(command), *check.args]
    if enforced.limits is not None:
        if confinement.sizes_temp():
            plan = replace(plan, temp_size=enforced.limits.tmp_bytes)
        else:
            enforced.temp_on_disk = True
        # The mechanism shows argv[0] where the sandbox has it; behind the wrapper the command is argv[n].
        inner[0] = plan.inside(inner[0], relocate=confinement.relocates) or inner[0]
        inner = rlimit_argv(enforced.limits, inner, processes=True)
    return confinement.wrap(plan, inner, pass_fds), temp_dir


async def _supervise(process: Process, timeout: int, max_bytes: int,
                     finish: Callable[[CheckStatus, int | None, int | None, bytes, bool], CheckRun], *,
                     signal_codes: bool = False, watchdog: Callable[[], bool] | None = None) -> CheckRun:
    """Wait for ``process`` under ``timeout`` s while draining its output, kill its tree, return the run.
    ``signal_codes``: an exit code 129–192 means death by signal ``code - 128`` (bwrap reports its
    command's death that way, like a shell). ``watchdog``: called in a worker thread every
    :data:`WATCHDOG_INTERVAL_SEC` (or ten times as long as its last call took, when more);
    True kills the process tree (the run then ends as the process's death says)."""
    chunks: list[bytes] = []
    cut = False
    drained = anyio.Event()

    async def drain() -> None:
        nonlocal cut
        try:
            cut = await _collect(process, max_bytes, chunks)
        finally:
            drained.set()

    async def watch() -> None:
        assert watchdog is not None
        while True:
            looked = time.perf_counter()
            if await anyio.to_thread.run_sync(watchdog, abandon_on_cancel=True):
                break
            # A check with many processes makes a look dearer: the watchdog stays under ~10% of a core.
            await anyio.sleep(max(WATCHDOG_INTERVAL_SEC, 10 * (time.perf_counter() - looked)))
        kill_tree(process)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            if watchdog is not None:
                tg.start_soon(watch)
            with anyio.move_on_after(timeout) as scope:
                await process.wait()
            timed_out = scope.cancelled_caught
            # The leader exited or timed out: kill the whole group, then read what is left. A process that
            # left the group (setsid, a daemon) may still hold the pipe open: stop reading after a grace
            # period instead of waiting for its EOF.
            kill_tree(process)
            with anyio.move_on_after(DRAIN_GRACE_SEC):
                await drained.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            kill_tree(process)
            await process.wait()
            await process.aclose()
    raw = b"".join(chunks)
    code = process.returncode
    if timed_out:
        return finish("timed-out", None, None, raw, cut)
    if code is not None and code < 0:
        return finish("failed", None, -code, raw, cut)
    if signal_codes and code is not None and 128 < code <= 128 + 64:
        return finish("failed", None, code - 128, raw, cut)
    return finish("passed" if code == 0 else "failed", code, None, raw, cut)
