"""Check confinement (issue 14; docs/security.md §4, *Check sandbox*): one seam, one implementation per platform.

::

    Confinement                     the seam: ``mechanism``, ``wrap(plan, argv) -> argv``, ``prepare(plan, env)``
     ├── Bubblewrap (Linux)         bwrap.py: namespaces + an allowlist of read-only binds, no network, own /proc
     └── Seatbelt (macOS)           seatbelt.py: sandbox-exec profile (untested here)
    (Windows, other platforms)      unavailable

    await detect() -> Detection      cached: one real trial run of the mechanism on first use
    status(policy) -> ChecksSandbox  what ``initialize``/``session/get`` report (after detect())
    unavailable_message(reason)      the job's CHECK_FAILED text for ``sandbox: "required"``

Detection proves confinement instead of trusting a binary: the trial run must not see a marker file behind
a hidden directory and must run as a low pid of its own pid namespace (Linux). A container without user
namespaces, a missing ``bwrap`` or a broken ``sandbox-exec`` is therefore ``unavailable``, with the reason.

:data:`SIMULATE_ENV` (tests only): ``SPOTPATCH_SIMULATE_NO_SANDBOX=1`` makes detection answer
``unavailable``. It can only take confinement away, never select a weaker mechanism; what then happens is
decided by the trusted config's ``sandbox`` alone (``required``: the check does not run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from spotpatch_agent.checks.sandbox.plan import PRIVATE_HOME, SYSTEM_DIRS, SandboxPlan, build_plan
from spotpatch_agent.protocol.models import ChecksSandbox

__all__ = ["SIMULATE_ENV", "Confinement", "Detection", "SandboxPlan", "build_plan", "detect", "detection_cached",
           "status", "unavailable_message"]

#: Test-only: ``1`` simulates a machine where checks cannot be confined.
SIMULATE_ENV = "SPOTPATCH_SIMULATE_NO_SANDBOX"
#: Seconds the trial run may take.
TRIAL_TIMEOUT_SEC = 10.0


class Confinement:
    """One confinement mechanism: turns a plan and the check's argv into the argv to start."""

    mechanism: str = ""
    #: Whether the worktree and ``node_modules`` appear at neutral paths (``SandboxPlan.inside``).
    relocates: bool = False

    def wrap(self, plan: SandboxPlan, argv: list[str], pass_fds: list[int]) -> list[str]:
        """The argv to start; descriptors the started process must inherit are appended to ``pass_fds``
        (the caller passes them to the spawn and closes them after it, started or not)."""
        raise NotImplementedError

    def tmpdir(self, plan: SandboxPlan) -> str:
        """The check's ``TMPDIR`` inside the sandbox."""
        return str(plan.temp_dir)

    def sizes_temp(self) -> bool:
        """Whether the private temp dir can be a tmpfs of ``plan.temp_size`` bytes (checks/limits.py)."""
        return False

    def prepare(self, plan: SandboxPlan, env: dict[str, str]) -> None:
        """Make the check's environment fit the sandbox, in place: ``TMPDIR`` the private temp dir, ``HOME``
        an empty directory in it (created here, with links to the toolchains shown from the real home:
        ``plan.home_links``), ``PATH`` only the entries the check can see, as it sees them. So no
        variable names the host's home or checkout (issue 25)."""
        home = plan.temp_dir / PRIVATE_HOME
        home.mkdir(mode=0o700, exist_ok=True)
        for name, target in plan.home_links:
            link = home / name
            link.parent.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(link):
                link.symlink_to(target)
        env["TMPDIR"] = self.tmpdir(plan)
        env["HOME"] = os.path.join(self.tmpdir(plan), PRIVATE_HOME)
        if "PATH" in env:
            env["PATH"] = plan.path_inside(env["PATH"], relocate=self.relocates)


class Bubblewrap(Confinement):
    mechanism = "bubblewrap"
    relocates = True

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def wrap(self, plan: SandboxPlan, argv: list[str], pass_fds: list[int]) -> list[str]:
        from spotpatch_agent.checks.sandbox.bwrap import args_file, bwrap_args, bwrap_argv
        from spotpatch_agent.checks.sandbox.seccomp import open_filter

        fd = open_filter()
        if fd is not None:
            pass_fds.append(fd)
        options = args_file(bwrap_args(plan, seccomp_fd=fd))
        pass_fds.append(options)
        return bwrap_argv(self.binary, plan, argv, args_fd=options)

    def tmpdir(self, plan: SandboxPlan) -> str:
        return "/tmp"

    def sizes_temp(self) -> bool:
        from spotpatch_agent.checks.sandbox.bwrap import supports_tmpfs_size

        return supports_tmpfs_size(self.binary)


class Seatbelt(Confinement):
    mechanism = "sandbox-exec"

    def wrap(self, plan: SandboxPlan, argv: list[str], pass_fds: list[int]) -> list[str]:
        from spotpatch_agent.checks.sandbox.seatbelt import seatbelt_argv

        return seatbelt_argv(plan, argv)


@dataclass(frozen=True)
class Detection:
    """``confinement`` when checks can be confined, else ``None`` and ``reason`` (one sentence with the fix);
    ``mechanism`` names what was tried (``bubblewrap``, ``sandbox-exec``) or is ``None``; ``took_ms`` the
    trial's cost."""

    confinement: Confinement | None
    mechanism: str | None
    reason: str | None
    took_ms: float = 0.0

    @property
    def state(self) -> Literal["confined", "unavailable"]:
        return "confined" if self.confinement is not None else "unavailable"


_cached: Detection | None = None
_lock: anyio.Lock | None = None


def _simulated() -> Detection | None:
    if os.environ.get(SIMULATE_ENV, "") not in ("", "0"):
        return Detection(None, None, f"confinement is switched off for this engine ({SIMULATE_ENV} is set, tests only)")
    return None


def detection_cached() -> Detection | None:
    """The detection of this process if it ran (the simulation knob applies first), else ``None``."""
    return _simulated() or _cached


async def detect() -> Detection:
    """Whether checks can be confined here; cached after the first call (one trial run, a few ms)."""
    global _cached, _lock
    simulated = _simulated()
    if simulated is not None:
        return simulated
    if _cached is not None:
        return _cached
    if _lock is None:
        _lock = anyio.Lock()
    async with _lock:
        if _cached is None:
            started = time.perf_counter()
            found = await _detect()
            _cached = Detection(found.confinement, found.mechanism, found.reason,
                                (time.perf_counter() - started) * 1000)
    return _cached


def reset_detection() -> None:
    """Forget the cached detection (tests, benchmarks)."""
    global _cached
    _cached = None


async def _detect() -> Detection:
    if sys.platform.startswith("linux"):
        from spotpatch_agent.checks.sandbox.bwrap import find_bwrap, install_hint

        binary = find_bwrap()
        if binary is None:
            return Detection(None, "bubblewrap", f"bubblewrap (bwrap) is not installed: {install_hint()}")
        return await _trial(Bubblewrap(binary))
    if sys.platform == "darwin":
        from spotpatch_agent.checks.sandbox.seatbelt import SANDBOX_EXEC

        if not os.access(SANDBOX_EXEC, os.X_OK):
            return Detection(None, "sandbox-exec", f"{SANDBOX_EXEC} is missing")
        return await _trial(Seatbelt())
    return Detection(None, None, f"no check sandbox exists for this platform ({sys.platform}) yet")


_TRIAL_SCRIPT = 'test ! -e "$1" && { test "$2" = any || test "$$" -lt 10; } && echo spotpatch-confined'


async def _trial(confinement: Confinement) -> Detection:
    """Run ``/bin/sh`` once in a real plan: the marker behind a hidden directory must be invisible, and on
    Linux the shell must be a low pid of its own pid namespace. Anything else is ``unavailable``."""
    base = Path(tempfile.mkdtemp(prefix="spotpatch-sandbox-trial-"))
    fds: list[int] = []
    try:
        hidden = base / "hidden"
        work = base / "work"
        temp = base / "tmp"
        for d in (hidden, work, temp):
            d.mkdir()
        marker = hidden / "marker"
        marker.write_text("x")
        system = tuple(Path(p) for p in SYSTEM_DIRS if os.path.lexists(p))
        plan = SandboxPlan(cwd=work, temp_dir=temp, network=False, writable=(work,), hidden=(hidden,), system=system)
        pid_rule = "low" if isinstance(confinement, Bubblewrap) else "any"
        argv = confinement.wrap(plan, ["/bin/sh", "-c", _TRIAL_SCRIPT, "sh", str(marker), pid_rule], fds)
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": confinement.tmpdir(plan)}
        try:
            with anyio.fail_after(TRIAL_TIMEOUT_SEC):
                done = await anyio.run_process(argv, env=env, check=False, stdin=subprocess.DEVNULL, pass_fds=fds)
        except (OSError, TimeoutError) as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            return Detection(None, confinement.mechanism,
                             f"{confinement.mechanism} could not run a trial check ({why})")
        if done.returncode == 0 and b"spotpatch-confined" in done.stdout:
            return Detection(confinement, confinement.mechanism, None)
        detail = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        first = detail[0][:200] if detail else f"exit code {done.returncode}"
        if "namespace" in first.lower() or "permission" in first.lower():
            first += ("; user namespaces may be disabled here (a container without them, or "
                      "kernel.unprivileged_userns_clone=0)")
        return Detection(None, confinement.mechanism, f"{confinement.mechanism} cannot confine a check here: {first}")
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(base, ignore_errors=True)


def status(policy: Literal["required", "warn"], detection: Detection | None = None) -> ChecksSandbox:
    """The wire ``ChecksSandbox`` for ``policy`` (the trusted config's ``sandbox``) and ``detection``
    (default: this process's cached one; ``unavailable`` with "not detected yet" when none ran)."""
    found = detection or detection_cached()
    if found is None:
        return ChecksSandbox(state="unavailable", mechanism=None, policy=policy, reason="not detected yet")
    if found.confinement is not None:
        return ChecksSandbox(state="confined", mechanism=found.mechanism, policy=policy, reason=None)
    reason = found.reason or "checks cannot be confined here"
    if policy == "warn":
        reason += '. sandbox: "warn": checks run UNCONFINED (your files, secrets and network are reachable)'
    else:
        reason += ('. sandbox: "required": checks do not run, so jobs with checks fail; install the sandbox, or set '
                   'sandbox: "warn" to run them unconfined')
    return ChecksSandbox(state="unavailable", mechanism=found.mechanism, policy=policy, reason=reason)


def unavailable_message(detection: Detection) -> str:
    """The job failure text when ``sandbox: "required"`` and no confinement is available."""
    return ("Checks cannot run: they must run confined (sandbox: \"required\") and " + (detection.reason or
            "no sandbox is available") + ". Fix: install the sandbox, or set \"sandbox\": \"warn\" in the "
            "trusted config to run checks unconfined (shown as a warning).")
