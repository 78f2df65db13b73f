"""``engine.states.job_tools``: the light tool list ``initialize`` advertises equals the list a job offers,
which is derived from the tools' declarations (``tools.registry.offered_tools``; not imported by states.py,
for cold start)."""

from __future__ import annotations

import pytest

from spotpatch_agent.engine.states import job_tools
from spotpatch_agent.tools.registry import TOOL_DEFS, offered_tools


def test_with_checks_a_job_offers_every_registered_tool_in_the_documented_order() -> None:
    offered = job_tools(has_checks=True)
    assert offered == ("list_files", "search_text", "read_file", "replace_text", "apply_patch", "run_check")
    # every registered tool is offered under some edit format
    assert set(offered) | set(offered_tools(has_checks=True, edit_format="anchors")) == set(TOOL_DEFS)


def test_without_checks_run_check_is_not_offered() -> None:
    offered = job_tools(has_checks=False)
    assert "run_check" not in offered and offered == offered_tools(has_checks=True)[:-1]


@pytest.mark.parametrize("has_checks", [False, True])
def test_initialize_advertises_exactly_what_the_declarations_offer(has_checks: bool) -> None:
    assert job_tools(has_checks=has_checks) == offered_tools(has_checks=has_checks)
