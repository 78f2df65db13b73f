"""Job status sets and the job's tool names: a light module, so that ``engine.service`` can answer
``initialize`` without importing the job runner, the tool loop and the tools (cold start, issue 3).
``engine.job`` builds each job's tool list with :func:`job_tools`."""

from __future__ import annotations

#: The file tools every job offers (also what ``initialize`` advertises).
JOB_TOOLS = ("list_files", "search_text", "read_file", "replace_text")


def job_tools(*, has_checks: bool) -> tuple[str, ...]:
    """The tools one job offers, in this order: the file tools, ``apply_patch``, and ``run_check`` when the
    trusted config has at least one check (docs/design.md §6, §9). Names as registered in
    ``tools/registry.py``, which is not imported here (this module stays light); a test pins that every
    name is registered (tests/engine/test_states.py)."""
    return (*JOB_TOOLS, "apply_patch", *(("run_check",) if has_checks else ()))


ACTIVE = frozenset({"preparing", "running", "validating", "applying", "reverting"})
