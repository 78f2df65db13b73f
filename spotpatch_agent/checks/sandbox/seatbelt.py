"""macOS: a check confined by ``sandbox-exec`` and a Seatbelt profile (docs/security.md §4).

**Untested here**: written with care for macOS (SBPL, last matching rule wins) but never run by this
project's CI, which is Linux. :func:`seatbelt_profile` renders the plan as one profile:

- ``(deny default)``, then process, sysctl, POSIX shm, the pseudo-terminals and a small set of Mach
  services a toolchain needs (no keychain: ``com.apple.SecurityServer`` and ``securityd`` are not listed);
- reads as an allowlist, like the Linux plan (issue 25): any path's metadata (``stat``, path traversal,
  ``getcwd``; not a directory's listing nor a file's content), then the content of the system paths
  (:data:`SYSTEM_READ` and the plan's ``system``), the read-only paths and the project's ``node_modules``;
  hidden paths inside those (homes, the project root) denied, the read-only paths allowed again, the masks
  (secret stores, other jobs' worktrees, ``/etc``'s entries other users cannot read) denied again;
- ``HOME`` is the private temp dir's ``home`` (``Confinement.prepare``); the worktree and ``node_modules``
  keep their paths (Seatbelt cannot relocate a directory), so the check's working directory names them;
- writes only to the worktree, the private temp dir (the check's ``TMPDIR``) and ``/dev/null``-like devices;
- network: denied unless the plan allows it (then outbound and inbound; local Unix sockets stay denied
  outside the allowed paths).

What macOS does not give here: no own pid namespace (a process that leaves the check's session survives
it; the process group is still killed), and other processes' ``ps`` listings stay visible (their
environments do not: macOS does not expose another process's environment without ``task_for_pid``).
"""

from __future__ import annotations

import os
from pathlib import Path

from spotpatch_agent.checks.sandbox.plan import SandboxPlan

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
#: macOS system locations a toolchain reads (programs, libraries, frameworks, Xcode's command-line tools,
#: Homebrew, time zones, certificates). Not ``/Users``, ``/Volumes``, ``/private/var`` and ``/private/tmp``
#: (but the time zone and the per-user temp dir the check gets as its own).
SYSTEM_READ = ("/System", "/usr", "/bin", "/sbin", "/private/etc", "/Library/Apple", "/Library/Frameworks",
               "/Library/Developer/CommandLineTools", "/Applications/Xcode.app", "/opt/homebrew", "/opt/local",
               "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select", "/dev")

#: Mach services a Node/Python toolchain looks up (name resolution, logging, notifications, fonts, time).
_MACH_SERVICES = (
    "com.apple.system.opendirectoryd.libinfo", "com.apple.system.logger", "com.apple.system.notification_center",
    "com.apple.logd", "com.apple.diagnosticd", "com.apple.trustd.agent", "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent", "com.apple.coreservices.launchservicesd", "com.apple.lsd.mapdb",
    "com.apple.fonts", "com.apple.FontObjectsServer", "com.apple.timed", "com.apple.analyticsd",
    "com.apple.system.DirectoryService.libinfo_v1", "com.apple.bsd.dirhelper",
    "com.apple.dnssd.service",
)


def _quote(path: Path | str) -> str:
    """An SBPL string literal: backslashes and double quotes escaped; NUL and newlines refused."""
    text = str(path)
    if any(c in text for c in "\x00\n\r"):
        raise ValueError("a sandbox path holds a control character")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _subpaths(paths: list[Path]) -> str:
    spellings: list[str] = []
    for p in paths:
        for variant in {str(p), os.path.realpath(p)}:  # /tmp vs /private/tmp, /var vs /private/var
            spellings.append(f"(subpath {_quote(variant)})")
    return " ".join(spellings)


def seatbelt_profile(plan: SandboxPlan) -> str:
    """The SBPL profile text for ``plan``."""
    rules = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec process-fork process-info*)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow ipc-posix-shm ipc-posix-sem)",
        "(allow pseudo-tty)",
        "(allow mach-lookup " + " ".join(f'(global-name "{s}")' for s in _MACH_SERVICES) + ")",
        # Path traversal to a shown path needs the parents' metadata (stat, getcwd), not their listing.
        "(allow file-read-metadata)",
        "(allow file-read* " + _subpaths([Path(p) for p in SYSTEM_READ] + list(plan.system)) + ")",
    ]
    shown = list(plan.read_only) + ([plan.modules] if plan.modules is not None else [])
    if shown:
        rules.append(f"(allow file-read* {_subpaths(shown)})")
    if plan.hidden:
        rules.append(f"(deny file-read* {_subpaths(list(plan.hidden))})")
        rules.append("(allow file-read-metadata " + _subpaths(list(plan.hidden)) + ")")
    if shown:
        rules.append(f"(allow file-read* {_subpaths(shown)})")
    if plan.masked:
        rules.append(f"(deny file-read* file-write* {_subpaths(list(plan.masked))})")
    writable = [*plan.writable, plan.temp_dir]
    rules.append(f"(allow file-read* file-write* {_subpaths(writable)})")
    if plan.git_metadata or plan.readonly_dirs:  # after the allow: a later rule wins (gitlinks: issue 25)
        rules.append(f"(deny file-write* {_subpaths([*plan.git_metadata, *plan.readonly_dirs])})")
    rules.append('(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper") '
                 '(regex #"^/dev/tty") (regex #"^/dev/fd/"))')
    if plan.network:
        rules.append("(allow network-outbound network-inbound network-bind system-socket)")
        rules.append('(allow mach-lookup (global-name "com.apple.SystemConfiguration.configd") '
                     '(global-name "com.apple.SystemConfiguration.DNSConfiguration") '
                     '(global-name "com.apple.networkd") (global-name "com.apple.nsurlsessiond"))')
    return "\n".join(rules) + "\n"


def seatbelt_argv(plan: SandboxPlan, argv: list[str]) -> list[str]:
    """``sandbox-exec -p <profile> -- argv…`` (``argv[0]`` absolute)."""
    return [SANDBOX_EXEC, "-p", seatbelt_profile(plan), "--", *argv]
