"""The read-only suggestion lane (docs/design.md §14): when a job's model cannot call tools, the host reads
bounded excerpts of the targets' source and asks the model once, without tools, for a draft that changes
nothing. ``job/suggest`` runs it; the trusted config's ``suggestions`` switches it on (off by default).

Not to be confused with ``spotpatch_agent.checks.suggest`` (which suggests checks for a project).
"""

from __future__ import annotations

from spotpatch_agent.suggestion.lane import LABEL, LaneRun, run_suggestion

__all__ = ["LABEL", "LaneRun", "run_suggestion"]
