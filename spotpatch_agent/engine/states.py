"""Job status sets and the job's tool names: a light module, so that ``engine.service`` can answer
``initialize`` without importing the job runner, the tool loop and the tools (cold start, issue 3).
``engine.job`` builds each job's tool list with :func:`job_tools`."""

from __future__ import annotations

from collections.abc import Collection

#: The file tools every job offers (also what ``initialize`` advertises).
JOB_TOOLS = ("list_files", "search_text", "read_file", "replace_text")


def job_tools(*, registered: Collection[str], has_checks: bool) -> tuple[str, ...]:
    """The tools one job offers, in this order: the file tools, ``apply_patch`` when it is registered, and
    ``run_check`` when it is registered and the trusted config has at least one check (docs/design.md §6, §9).
    ``registered``: the registry's tool names (passed in, so this module stays light)."""
    names = [*JOB_TOOLS]
    if "apply_patch" in registered:
        names.append("apply_patch")
    if has_checks and "run_check" in registered:
        names.append("run_check")
    return tuple(names)
ACTIVE = frozenset({"preparing", "running", "validating", "applying", "reverting"})
