"""SpotPatch engine: annotation jobs run by an LLM tool loop in an isolated git worktree.

Public surface: the ``spotpatch-agent`` console script (``serve``, ``run``, ``demo``) and the
wire contract in :mod:`spotpatch_agent.protocol`. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = "0.1"

__all__ = ["PROTOCOL_VERSION", "__version__"]
