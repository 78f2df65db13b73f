"""The engine's exception tree. Foreign errors (git, OS, httpx) are translated at their boundary.

::

    SpotPatchError(code, message, retryable)   an application error; becomes JSON-RPC -32000
     ├── ProviderError        the model provider failed (PROVIDER_*, MODEL_TOOL_CALL_UNSUPPORTED)
     ├── GitError             a fixed-argv git command failed unexpectedly (INTERNAL unless mapped)
     └── JobFailure           the running job must stop now (limits, terminal tool failures, …)

Every message is sanitized by its raiser: no absolute path, no key, no environment content, no file
content (docs/design.md §3, invariant 3). ``retryable`` defaults to the code's entry in
:data:`spotpatch_agent.protocol.errors.RETRYABLE`.
"""

from __future__ import annotations

from spotpatch_agent.protocol.errors import RETRYABLE, ErrorCode


class SpotPatchError(Exception):
    """An application error with a wire code. Raised anywhere; converted once, in ``rpc``."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.retryable = RETRYABLE[self.code] if retryable is None else retryable

    def to_data(self) -> dict[str, object]:
        """The ``data`` member of the JSON-RPC error: ``{code, message, retryable}``."""
        return {"code": self.code.value, "message": self.message, "retryable": self.retryable}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.value}, {self.message!r})"


class ProviderError(SpotPatchError):
    """The provider could not be reached, refused us, or spoke a stream we cannot parse."""


class GitError(SpotPatchError):
    """A git command failed. ``message`` holds git's sanitized stderr (bounded)."""

    def __init__(self, message: str, *, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        super().__init__(code, message)


class JobFailure(SpotPatchError):
    """The job stops here with this code; diagnostics and any reviewable diff are kept (docs/design.md §5)."""
