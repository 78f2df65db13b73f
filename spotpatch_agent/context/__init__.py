"""The project context the agent and the copy prompt are given: each target's checked
location with a bounded excerpt, and the project's conventions (nearest-first configuration, libraries,
``AGENTS.md``, same-directory samples), bounded and redacted. See docs/architecture.md, "What the model sees".
"""

from __future__ import annotations

from spotpatch_agent.protocol.lazy import lazy_exports

__all__ = [
    "ContextFile",
    "Conventions",
    "LocationCheck",
    "PromptContext",
    "build_prompt_context",
    "check_locations",
    "collect_conventions",
    "excerpt_of",
    "project_prompt_context",
]

_HOME = {
    "PromptContext": "build", "build_prompt_context": "build", "project_prompt_context": "build",
    "ContextFile": "conventions", "Conventions": "conventions", "collect_conventions": "conventions",
    "LocationCheck": "excerpt", "check_locations": "excerpt", "excerpt_of": "excerpt",
}


# Lazy: the service imports context.digest at cold start (no tools).
__getattr__ = lazy_exports(__name__, globals(), _HOME)
