"""The HTTP boundary both adapters share (``provider/http.py``): status mapping, retries, timeouts,
cancellation and secret hygiene (docs/design.md §11), against the real local scripted server.

Every adapter test is parametrised over ``api`` ∈ {chat, responses}, like ``test_shared_behaviour.py``; the
request bodies on the wire and the error paths only one format has are in ``test_chat_http.py`` and
``test_responses_http.py``.
"""

from __future__ import annotations

import email.utils
import socket
import time
import traceback

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, TurnEnd
from spotpatch_agent.provider.http import MAX_EXCERPT, retry_wait

from .apis import ADAPTERS, APIS, make_adapter
from .conftest import CANARY_KEY, OK_TURN, raises, run_turn

pytestmark = pytest.mark.anyio


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    return request.param


# ---------------------------------------------------------------- request


async def test_no_api_key_sends_no_authorization(server, api):
    server.add_turns(OK_TURN)
    adapter = ADAPTERS[api](base_url=server.base_url, api_key=None)
    try:
        await run_turn(adapter)
    finally:
        await adapter.aclose()
    assert "authorization" not in server.headers[0]


# ---------------------------------------------------------------- status mapping


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_provider_auth_and_not_retried(server, adapter, status):
    server.add_turns({"status": status, "body": {"error": {"message": "Incorrect API key provided"}}}, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_AUTH and not err.retryable
    assert f"HTTP {status}" in err.message and "Incorrect API key provided" in err.message
    assert len(server.requests) == 1


async def test_404_says_the_model_may_be_missing(server, adapter):
    server.add_turns({"status": 404, "body": {"error": {"message": "model not found"}}})
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and not err.retryable and "HTTP 404" in err.message
    assert "'scripted-model' may be missing" in err.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
    "Your input exceeds the context window of this model.",
], ids=["maximum-context-length", "context-window"])
async def test_400_with_context_length_wording_is_limit_exceeded(server, adapter, message):
    server.add_turns({"status": 400, "body": {"error": {"message": message, "code": "context_length_exceeded"}}})
    err = await raises(adapter)
    assert err.code == ErrorCode.LIMIT_EXCEEDED and "HTTP 400" in err.message


@pytest.mark.parametrize(("status", "message"), [
    (400, "tools[0].function.parameters is invalid"),
    (422, "tools[0].function.parameters is invalid"),
    (400, "Unknown parameter: 'store'."),
], ids=["400-parameters", "422-parameters", "400-unknown-parameter"])
async def test_other_4xx_are_protocol_errors_not_retried(server, adapter, status, message):
    server.add_turns({"status": status, "body": {"error": {"message": message}}}, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and f"HTTP {status}" in err.message and message in err.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_retryable_statuses_are_retried_twice_then_unavailable(server, adapter, status):
    turn = {"status": status, "headers": {"retry-after-ms": "5"}}
    server.add_turns(turn, turn, turn, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and err.retryable and f"HTTP {status}" in err.message
    assert len(server.requests) == 3 and server.remaining == 1


async def test_retry_honours_retry_after_ms_then_succeeds(server, adapter):
    server.add_turns({"status": 429, "headers": {"retry-after-ms": "200"}}, OK_TURN)
    started = time.monotonic()
    events = await run_turn(adapter)
    assert time.monotonic() - started >= 0.19
    assert events == [TextDelta("ok"), TurnEnd("stop", events[-1].usage)]
    assert len(server.requests) == 2


async def test_retry_honours_retry_after_seconds(server, adapter):
    server.add_turns({"status": 503, "headers": {"retry-after": "0.2"}}, OK_TURN)
    started = time.monotonic()
    assert (await run_turn(adapter))[0] == TextDelta("ok")
    assert time.monotonic() - started >= 0.19 and len(server.requests) == 2


async def test_x_should_retry_false_prevents_a_retry(server, adapter):
    server.add_turns({"status": 503, "headers": {"x-should-retry": "false"}}, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and len(server.requests) == 1


async def test_x_should_retry_true_retries_another_status(server, adapter):
    server.add_turns({"status": 400, "headers": {"x-should-retry": "true", "retry-after-ms": "1"}}, OK_TURN)
    events = await run_turn(adapter)
    assert events[0] == TextDelta("ok") and len(server.requests) == 2


def test_retry_wait_uses_headers_capped_at_ten_seconds_else_default_backoff():
    assert retry_wait({"retry-after-ms": "1500"}, 0) == 1.5
    assert retry_wait({"retry-after": "2"}, 0) == 2.0
    assert retry_wait({"retry-after": "3600"}, 0) == 10.0
    assert retry_wait({"retry-after-ms": "999999"}, 1) == 10.0
    future = email.utils.formatdate(time.time() + 4, usegmt=True)
    assert 2.5 < retry_wait({"retry-after": future}, 0) <= 4.0
    assert retry_wait({}, 0) == 0.5 and retry_wait({}, 1) == 1.0
    assert retry_wait({"retry-after": "soon", "retry-after-ms": "-3"}, 1) == 1.0


async def test_connection_refused_is_unavailable(api):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = ADAPTERS[api](base_url=f"http://127.0.0.1:{port}/v1", api_key=CANARY_KEY, timeout=2)
    try:
        err = await raises(adapter)
    finally:
        await adapter.aclose()
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and err.retryable


async def test_non_event_stream_content_type_is_a_protocol_error(server, adapter):
    server.add_turns({"status": 200, "body": "<html>proxy login</html>", "headers": {"Content-Type": "text/html"}})
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "text/html" in err.message


@pytest.mark.parametrize("turn", [
    {"status": 200, "body": {"error": {"message": "prompt is too long"}}},
    {"raw": ['data: {"error": {"message": "prompt is too long"}}\n\n']},
], ids=["json-body", "event-stream"])
async def test_json_error_with_status_200_is_a_typed_error(server, adapter, turn):
    server.add_turns(turn)
    err = await raises(adapter)
    assert err.code == ErrorCode.LIMIT_EXCEEDED


# ---------------------------------------------------------------- secret hygiene


def _all_text(err: BaseException) -> str:
    parts = [str(err), repr(err), "".join(traceback.format_exception(err))]
    if isinstance(err, ProviderError):
        parts += [err.message, str(err.to_data())]
    return "\n".join(parts)


async def test_error_excerpt_is_bounded_and_redacted(server, adapter):
    message = f"bad key {CANARY_KEY} " + "x" * 2000
    server.add_turns({"status": 400, "body": {"error": {"message": message}}})
    err = await raises(adapter)
    assert CANARY_KEY not in err.message and "[REDACTED]" in err.message
    assert len(err.message) <= MAX_EXCERPT + 80


@pytest.mark.parametrize(
    "turn",
    [
        {"status": 401, "body": {"error": {"message": f"Incorrect API key provided: {CANARY_KEY}"}}},
        {"status": 400, "body": {"error": {"message": f"Bearer {CANARY_KEY} rejected"}}},
        {"status": 500, "body": {"error": {"message": CANARY_KEY}}, "headers": {"x-should-retry": "false"}},
        {"status": 404, "body": {"detail": f"no model for key {CANARY_KEY[:-1]}"}},
        {"status": 200, "body": {"error": {"message": f"key {CANARY_KEY} is over quota"}}},
        {"raw": [f'data: {{"error": {{"message": "key {CANARY_KEY} is over quota"}}}}\n\n']},
        {"raw": [f"event: error\ndata: {CANARY_KEY}\n\n"]},
        {"stall": True},
    ],
    ids=["401", "400-bearer", "500", "404-partial-key", "200-json-error", "error-in-stream", "error-event", "stall"],
)
async def test_canary_key_never_appears_in_errors(server, api, turn):
    server.add_turns(turn)
    # Only the stall case needs the idle timeout to fire; the others must reach the server first, even on
    # a loaded machine (0.2 s for every case made the 401 case fail under load before any request landed).
    adapter = make_adapter(api, server, idle_timeout=0.2 if turn.get("stall") else 10.0)
    try:
        err = await raises(adapter)
    finally:
        await adapter.aclose()
    text = _all_text(err)
    assert CANARY_KEY not in text and CANARY_KEY[:-1] not in text
    assert "authorization" not in text.lower()
    assert err.__cause__ is None
    assert server.headers[0]["authorization"] == f"Bearer {CANARY_KEY}"


async def test_canary_key_not_in_connect_error(api):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = ADAPTERS[api](base_url=f"http://127.0.0.1:{port}/v1?api-version=1", api_key=CANARY_KEY, timeout=2)
    try:
        err = await raises(adapter)
    finally:
        await adapter.aclose()
    text = _all_text(err)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and err.retryable
    assert CANARY_KEY not in text and "api-version" not in text and str(port) not in text
