"""Project checks (docs/configuration.md "Checks"): the host-side runner, its sandbox and the ``checks suggest`` helper.

Public surface::

    run_check_process(check, cwd, limits, *, project_root=None, sandbox="required") -> CheckRun   (async;
        runs confined by ``checks.sandbox`` under the check's resource limits, ``checks.limits``; raises
        ``runner.SandboxUnavailable`` for "required" without one)
    CheckRun(check_id, name, required, status, exit_code, signal, duration_ms, output, truncated,
             sandbox, network, limits).ok
    check_env(pass_env=()) -> dict[str, str]
    check_timeout(check, limits) -> int                                          (seconds)
    suggest_checks(root) -> Suggestion(checks, notes).config_json()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotpatch_agent.protocol.lazy import lazy_exports

if TYPE_CHECKING:
    from spotpatch_agent.checks.runner import CheckRun, check_env, run_check_process
    from spotpatch_agent.checks.suggest import Suggestion, suggest_checks
    from spotpatch_agent.checks.timeouts import check_timeout

__all__ = ["CheckRun", "Suggestion", "check_env", "check_timeout", "run_check_process", "suggest_checks"]

# Loaded on first use: a job's ``run_check`` needs only the runner, ``checks suggest`` only the suggester.
_HOME = {"CheckRun": "runner", "check_env": "runner", "check_timeout": "timeouts", "run_check_process": "runner",
         "Suggestion": "suggest", "suggest_checks": "suggest"}


__getattr__ = lazy_exports(__name__, globals(), _HOME)
