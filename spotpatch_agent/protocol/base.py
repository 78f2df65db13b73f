"""The two bases of every wire model (docs/design.md §3): camelCase on the wire, snake_case in Python.

:class:`WireModel` is what the engine sends (unknown keys ignored on read, ``dump()`` gives the wire dict);
:class:`InModel` is what a client or the trusted configuration sends (unknown keys are errors). Both are
built on first use (``defer_build``): a process pays for the models it touches, not for all of them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["InModel", "WireModel"]


class WireModel(BaseModel):
    """Base of every model sent by the engine (unknown keys ignored on read)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=False, defer_build=True)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class InModel(WireModel):
    """Base of every model received from a client or trusted config: unknown keys are errors."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True)
