"""JSON-RPC errors with the right codes (python-lsp-jsonrpc's InternalError wrongly uses -32602 and puts a
traceback in ``data``; ours never carry tracebacks). One conversion point: :func:`to_rpc_error`."""

from __future__ import annotations

from pylsp_jsonrpc.exceptions import JsonRpcException

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
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
    """``-32000`` with ``data: {code, message, retryable}`` (docs/design.md §3)."""

    CODE = APPLICATION_ERROR

    def __init__(self, error: SpotPatchError) -> None:
        data = error.to_data()
        data["message"] = sanitize_message(error.message)
        super().__init__(message=data["message"], code=APPLICATION_ERROR, data=data)


MAX_ERROR_MESSAGE = 1000


def sanitize_message(message: str) -> str:
    """Redact secrets and absolute paths and bound the length of any error text sent to a client."""
    return shorten_paths(REDACTOR(message))[:MAX_ERROR_MESSAGE]


def to_rpc_error(exc: BaseException) -> JsonRpcException:
    """Map any exception to the JSON-RPC error the client sees. Unknown exceptions become -32603 with a
    fixed message (the traceback goes to stderr only, by the caller)."""
    if isinstance(exc, JsonRpcException):
        exc.message = sanitize_message(str(exc.message))
        return exc
    if isinstance(exc, SpotPatchError):
        return ApplicationError(exc)
    return InternalError("Internal error (see the engine log)")
