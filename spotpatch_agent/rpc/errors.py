"""JSON-RPC errors with the right codes (python-lsp-jsonrpc's InternalError wrongly uses -32602 and puts a
traceback in ``data``; ours never carry tracebacks). One conversion point: :func:`to_rpc_error`."""

from __future__ import annotations

from pylsp_jsonrpc.exceptions import JsonRpcException

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import APPLICATION_ERROR


class InvalidRequest(JsonRpcException):
    CODE = -32600
    MESSAGE = "Invalid Request"


class MethodNotFound(JsonRpcException):
    CODE = -32601
    MESSAGE = "Method not found"


class InvalidParams(JsonRpcException):
    CODE = -32602
    MESSAGE = "Invalid params"


class InternalError(JsonRpcException):
    CODE = -32603
    MESSAGE = "Internal error"


class ServerNotInitialized(JsonRpcException):
    CODE = -32002
    MESSAGE = "Server not initialized"


class RequestCancelled(JsonRpcException):
    CODE = -32800
    MESSAGE = "Request cancelled"


class ApplicationError(JsonRpcException):
    """``-32000`` with ``data: {code, message, retryable}`` (DESIGN.md §3)."""

    CODE = APPLICATION_ERROR

    def __init__(self, error: SpotPatchError) -> None:
        super().__init__(message=error.message, code=APPLICATION_ERROR, data=error.to_data())


def to_rpc_error(exc: BaseException) -> JsonRpcException:
    """Map any exception to the JSON-RPC error the client sees. Unknown exceptions become -32603 with a
    fixed message (the traceback goes to stderr only, by the caller)."""
    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, SpotPatchError):
        return ApplicationError(exc)
    return InternalError("Internal error (see the engine log)")
