"""Request params against their model (docs/design.md §3): a rejection becomes ``-32602`` whose message names
field locations and pydantic's messages only, never the offending input (it may hold paths or secrets)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.rpc.errors import InvalidParams

__all__ = ["parse_params", "summarise_validation"]


def parse_params(model: type[BaseModel] | None, params: Any) -> Any:
    """``params`` validated by ``model`` (``None``: passed through). Raises :class:`InvalidParams`."""
    if model is None:
        return params
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidParams(summarise_validation(exc)) from None


def summarise_validation(exc: ValidationError, limit: int = 5) -> str:
    """Field locations and messages only; never the offending input (it may hold paths or secrets)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:limit]:
        loc = ".".join(redact_cut(str(p), 40, ellipsis="") for p in err["loc"]) or "params"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - limit
    return "Invalid params: " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
