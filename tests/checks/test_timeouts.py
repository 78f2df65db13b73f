"""One check timeout and one run_check deadline (issue 30): ``checks/timeouts.py``."""

from __future__ import annotations

from spotpatch_agent.checks.timeouts import CHECK_GRACE_SEC, check_deadline, check_timeout
from spotpatch_agent.engine.loop import LoopBudget
from spotpatch_agent.protocol.limits import LIMITS
from spotpatch_agent.protocol.models import CheckConfig, Limits

CAP = LIMITS["checkTimeoutSec"][1]


def check(timeout: int | None = None) -> CheckConfig:
    return CheckConfig(id="c", name="C", command="tsc", timeout_sec=timeout)


def test_a_check_runs_under_its_own_timeout_else_the_limit_never_past_the_cap() -> None:
    limits = Limits(check_timeout_sec=30)
    assert (check_timeout(check(5), limits), check_timeout(check(), limits)) == (5, 30)
    assert check_timeout(check(CAP * 10), limits) == CAP


def test_a_run_check_call_may_take_the_longest_check_timeout_plus_the_one_grace() -> None:
    limits = Limits(check_timeout_sec=30)
    assert CHECK_GRACE_SEC == 20  # the wider of the two graces there were (the loop's 20 s bounded the executor's 10 s)
    assert check_deadline([check(5), check()], limits) == 30 + CHECK_GRACE_SEC
    assert check_deadline([check(90), check()], limits) == 90 + CHECK_GRACE_SEC
    assert check_deadline([check(CAP * 10)], limits) == CAP + CHECK_GRACE_SEC  # the runner kills it at the cap
    assert check_deadline([], limits) == 30 + CHECK_GRACE_SEC
    assert LoopBudget(max_turns=1, max_tool_calls=1, tool_timeout_sec=1).check_deadline_sec == check_deadline(
        [], Limits())
