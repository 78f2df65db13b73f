"""Job status sets and the tool names ``initialize`` advertises: a light module, so that ``engine.service`` can
answer ``initialize`` without importing the job runner, the tool loop and the tools (cold start, issue 3).

A job's tool list is derived from the tools' declarations (``tools.registry.offered_tools``); ``initialize``
cannot import them before its reply, so :func:`job_tools` is their light copy, and nothing else reads it:
tests/engine/test_states.py pins it equal to the derived list for every case.
"""

from __future__ import annotations

#: ``offered_tools(has_checks=False)``, copied for ``initialize`` (pinned by tests/engine/test_states.py).
_OFFERED = ("list_files", "search_text", "read_file", "replace_text", "apply_patch")
#: ``offered_tools(has_checks=True)`` adds these.
_WITH_CHECKS = ("run_check",)


def job_tools(*, has_checks: bool) -> tuple[str, ...]:
    """The tools a job of this config offers, for ``initialize``'s ``capabilities.tools``: the light copy of
    ``tools.registry.offered_tools`` (docs/design.md §6, §9)."""
    return (*_OFFERED, *(_WITH_CHECKS if has_checks else ()))


ACTIVE = frozenset({"preparing", "running", "validating", "applying", "reverting"})
