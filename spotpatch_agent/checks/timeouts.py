"""How long a check may run, and how long a ``run_check`` call may take: the one rule (issue 30).

- :func:`check_timeout` — one check's own timeout: its ``timeoutSec``, else the ``checkTimeoutSec`` limit,
  never above that limit's hard cap. The runner (``checks.runner``) kills the check's process tree there
  and reports ``timed-out``: that is what normally ends a slow check.
- :func:`check_deadline` — the outer deadline of one ``run_check`` call (the executor's, ``tools.executor``,
  and the loop's, ``engine.loop``, which backs it up): the longest :func:`check_timeout` of the job's
  checks plus :data:`CHECK_GRACE_SEC`. Past it the job fails with ``LIMIT_EXCEEDED``.

``tests/architecture/test_one_rule_each.py`` fails when a grace constant or a timeout formula is written
anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from spotpatch_agent.protocol.limits import LIMITS

if TYPE_CHECKING:
    from spotpatch_agent.protocol.models import CheckConfig, Limits

__all__ = ["CHECK_GRACE_SEC", "check_deadline", "check_timeout"]

#: Seconds a ``run_check`` call may take beyond the longest check timeout before the job fails. The grace
#: covers what the call does outside the check's own timeout: waiting for the worktree's write gate, the
#: worktree scans before and after the check (``worktree.scan``, a whole tree), the sandbox detection's
#: trial run on first use, killing the process tree and draining its output, removing the private temp dir.
#: 20 s, the wider of the two graces there were (the loop's 20 s bounded the executor's 10 s): the check's
#: own timeout ends a slow check with a result the model can act on, so this deadline only fires when that
#: clean-up hangs; a wide one costs nothing in a normal run, a tight one fails a job over a slow clean-up.
CHECK_GRACE_SEC = 20


def check_timeout(check: CheckConfig, limits: Limits) -> int:
    """Seconds: the check's ``timeoutSec``, else the ``checkTimeoutSec`` limit; never above its hard cap."""
    return min(check.timeout_sec or limits.get("checkTimeoutSec"), LIMITS["checkTimeoutSec"][1])


def check_deadline(checks: Iterable[CheckConfig], limits: Limits) -> int:
    """Seconds one ``run_check`` call of a job with these ``checks`` may take: the longest
    :func:`check_timeout` (the ``checkTimeoutSec`` limit when there is no check) plus :data:`CHECK_GRACE_SEC`."""
    longest = max((check_timeout(check, limits) for check in checks), default=limits.get("checkTimeoutSec"))
    return longest + CHECK_GRACE_SEC
