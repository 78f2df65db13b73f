"""Job status sets and the job's tool names: a light module, so that ``engine.service`` can answer
``initialize`` without importing the job runner, the tool loop and the tools (cold start, issue 3).
``engine.job`` re-exports both names."""

from __future__ import annotations

JOB_TOOLS = ("list_files", "search_text", "read_file", "replace_text")
ACTIVE = frozenset({"preparing", "running", "validating", "applying", "reverting"})
