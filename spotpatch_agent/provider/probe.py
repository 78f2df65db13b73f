"""The explicit capability probe (docs/design.md §11): list the endpoint's models, then one forced tool round trip.

1. :func:`list_models` — ``GET {baseUrl}/models`` with the profile's headers and key. OpenAI's shape
   ``{"data": [{"id"}]}`` and the usual relay variants are read; an endpoint that cannot list models
   (404/405/501, another status, an unknown shape) is reported and the probe goes on. When the listing
   works and lacks the configured model, the probe stops with an error naming the configured model and
   the available ones: SpotPatch never switches models on its own.
2. :func:`probe_tool_calling` — written against :class:`~spotpatch_agent.provider.base.ProviderAdapter`
   only, so it runs the same on both wire formats: turn 1 offers one no-risk tool with ``tool_choice:
   "required"``; turn 2 answers the call and must stream a continuation. No call in turn 1 is
   ``MODEL_TOOL_CALL_UNSUPPORTED``.

3. :func:`probe_vision` — only for a model profile that says ``vision: true`` (issue 26), after tool calling
   passed: one turn whose user message carries a tiny PNG image part; the provider accepting it (the turn
   streams to its end) proves that images may be sent, a refusal is reported and no image is ever sent.

:func:`run_probe` chains them. Provider failures (auth, connection, protocol) are raised as
:class:`~spotpatch_agent.errors.ProviderError`; the caller turns them into a failed probe result. A real
job's first tool call plus continuation proves the same capability inline (``LoopStats``, engine/loop.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    ImagePart,
    ProviderAdapter,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    TurnRestart,
    UserMessage,
)
from spotpatch_agent.provider.http import loads, request_headers, sanitize_excerpt

if TYPE_CHECKING:
    import httpx

#: Model ids reported from one listing (all are searched for the configured model).
MAX_MODELS = 50
#: Model ids read from one listing at most.
MAX_READ = 10_000
#: Model ids named in a "model missing" message.
MAX_SHOWN = 10
#: Longest model id kept, in characters.
MAX_MODEL_ID = 200
#: Seconds allowed for the whole ``GET /models`` exchange.
LISTING_TIMEOUT = 20.0
#: Seconds allowed for the whole probe (listing and both turns): a provider that trickles bytes just under
#: the idle timeout must not keep ``provider/probe`` open for ever.
PROBE_TIMEOUT = 180.0
_LISTING_BYTES = 2 * 1024 * 1024
#: Text accepted in the probe's forced-call turn, in UTF-8 bytes: past it (no call started) the turn ends
#: at once with ``MODEL_TOOL_CALL_UNSUPPORTED`` — a real call needs none of it.
PROBE_TEXT_BYTES = 4 * 1024
#: Hosts whose ``/models`` lists base models, not the deployment names sent as ``model`` (Azure OpenAI).
_DEPLOYMENT_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")

PROBE_TOOL = ToolSpec(
    name="report_ready",
    description="Confirms that you can call tools. Call it with ready=true.",
    parameters={"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"],
                "additionalProperties": False},
)
_SYSTEM = "You are a capability probe. Call the report_ready tool with ready set to true, then reply OK."
_ASK = "Call report_ready now."
#: The vision probe's picture: a 4×4 red PNG (73 bytes).
PROBE_IMAGE = ImagePart("image/png", "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR42mP4z8AARwzE"
                                     "cQCukw/xOF6MEQAAAABJRU5ErkJggg==")
_VISION_ASK = "What colour is this image? Answer with one word."


@dataclass(frozen=True)
class ModelListing:
    """What ``GET /models`` said: ``ids`` in endpoint order (at most :data:`MAX_READ`), or None when the
    endpoint cannot list models; ``note`` is one sentence for the probe message."""

    ids: tuple[str, ...] | None
    note: str
    #: The server that answered, when the listing says so: ``"llama.cpp"`` (an item ``owned_by: "llamacpp"``,
    #: what ``llama-server`` lists), else None.
    server: str | None = None

    @property
    def models(self) -> tuple[str, ...] | None:
        """The ids to report: the first :data:`MAX_MODELS`."""
        return None if self.ids is None else self.ids[:MAX_MODELS]


@dataclass(frozen=True)
class ProbeOutcome:
    """``tool_calling`` is proven or not; ``code`` says why not (``MODEL_TOOL_CALL_UNSUPPORTED``,
    ``PROVIDER_UNAVAILABLE`` for a missing model, or a provider error's code) and ``retryable`` whether
    asking again unchanged may help (None: the code's default); ``models`` as listed (None: not listed)."""

    tool_calling: bool
    message: str
    code: ErrorCode | None = None
    models: tuple[str, ...] | None = None
    retryable: bool | None = None
    #: Images accepted (True), refused (False), or not asked (None): :func:`probe_vision`.
    vision: bool | None = None
    #: The server the model listing revealed (:attr:`ModelListing.server`).
    server: str | None = None


# ---------------------------------------------------------------- step 1: list models


async def list_models(
    *,
    base_url: str,
    api_key: str | None,
    headers: Mapping[str, str] | None = None,
    timeout: float = LISTING_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ModelListing:
    """``GET {base_url}/models`` with ``User-Agent``, the profile's ``headers`` and ``Authorization: Bearer
    <api_key>`` — the headers the adapters send. Shared by both APIs (Responses and Chat list models alike).

    Returns a :class:`ModelListing`; any status but 401/403 and any unreadable body is "cannot list".
    Raises :class:`ProviderError`: ``PROVIDER_AUTH`` (401/403), ``PROVIDER_UNAVAILABLE`` (connect, DNS, TLS,
    timeout). Messages never hold the key, the URL or a header.
    """
    import httpx  # lazy: keeps engine cold start free of the HTTP stack

    sent = request_headers(api_key, headers)
    url = base_url.rstrip("/") + "/models"
    try:
        with anyio.fail_after(timeout):  # httpx's timeout bounds each read, not the whole exchange
            client = httpx.AsyncClient(headers=sent, timeout=timeout, transport=transport, follow_redirects=False)
            async with client, client.stream("GET", url) as response:
                status = response.status_code
                body = await _read_bounded(response) if 200 <= status < 300 else ""
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ProviderError(ErrorCode.PROVIDER_UNAVAILABLE, _transport_wording(exc)) from None
    except TimeoutError:
        raise ProviderError(ErrorCode.PROVIDER_UNAVAILABLE,
                            f"the provider did not answer the model listing within {timeout:g} s") from None
    if status in (401, 403):
        raise ProviderError(ErrorCode.PROVIDER_AUTH,
                            f"the provider refused the credentials (HTTP {status}) when listing models")
    if status in (404, 405, 501):
        return ModelListing(None, "Model listing unsupported by this endpoint.")
    if not 200 <= status < 300:
        return ModelListing(None, f"Model listing failed (HTTP {status}); the tool round trip decides.")
    payload = loads(body)
    ids = model_ids(payload)
    if ids is None:
        return ModelListing(None, "The endpoint's model list has an unknown shape; the tool round trip decides.")
    kept = tuple(sanitize_excerpt(i, api_key)[:MAX_MODEL_ID] for i in ids[:MAX_READ])
    server = listing_server(payload)
    found = " (a llama.cpp server: tool calls will be constrained)" if server == "llama.cpp" else ""
    return ModelListing(kept, f"The endpoint lists {len(kept)} model(s){found}.", server=server)


def listing_server(payload: Any) -> str | None:
    """``"llama.cpp"`` when a ``/models`` answer comes from ``llama-server`` (an item of ``data`` says
    ``owned_by: "llamacpp"``), else None. Only the first :data:`MAX_READ` items are looked at."""
    items = payload.get("data") if isinstance(payload, dict) else None
    if isinstance(items, list) and any(isinstance(i, dict) and i.get("owned_by") == "llamacpp"
                                       for i in items[:MAX_READ]):
        return "llama.cpp"
    return None


def model_ids(payload: Any) -> list[str] | None:
    """Model ids of a ``/models`` answer, or None for an unknown shape. Accepts ``{"data": [...]}``
    (OpenAI, OpenRouter, vLLM, Ollama's ``/v1``), ``{"models": [...]}`` (Ollama's native list, some
    relays) and a bare list; items are strings or objects with ``id`` (else ``name``, else ``model``)."""
    if isinstance(payload, dict):
        payload = payload.get("data") if isinstance(payload.get("data"), list) else payload.get("models")
    if not isinstance(payload, list):
        return None
    ids: dict[str, None] = {}  # ordered, without repeats
    for item in payload:
        if isinstance(item, dict):
            item = next((item[k] for k in ("id", "name", "model") if isinstance(item.get(k), str)), None)
        if isinstance(item, str) and item.strip():
            ids[item] = None
    return list(ids)


def is_listed(model: str, ids: Sequence[str]) -> bool:
    """Whether ``model`` is among ``ids``: exactly, with Ollama's implicit ``:latest`` tag, or under
    a ``models/`` prefix (Gemini's OpenAI-compatible listing). Never a fuzzy match."""
    names = {i.removeprefix("models/") for i in ids}
    return model in names or (":" not in model and f"{model}:latest" in names)


def lists_deployments_elsewhere(base_url: str) -> bool:
    """Azure OpenAI: ``/models`` lists base models while ``model`` is a deployment name, so absence from
    the list proves nothing there."""
    host = (urlsplit(base_url).hostname or "").lower()
    return host.endswith(_DEPLOYMENT_HOSTS)


def missing_model(
    model: str, listing: ModelListing, *, base_url: str, api_key: str | None = None,
) -> ProbeOutcome | None:
    """The failed outcome when a working listing lacks ``model`` (named, with up to :data:`MAX_SHOWN`
    available ids, closest first); None when the model is listed or the listing says nothing."""
    if listing.ids is None or is_listed(model, listing.ids) or lists_deployments_elsewhere(base_url):
        return None
    shown_model = sanitize_excerpt(model, api_key)[:MAX_MODEL_ID]  # redact, then cut
    close = difflib.get_close_matches(model, listing.ids, n=3, cutoff=0.5)
    ordered = [*close, *(m for m in listing.ids[:MAX_SHOWN] if m not in close)][:MAX_SHOWN]
    if ordered:
        more = len(listing.ids) - len(ordered)
        available = ", ".join(ordered) + (f" (and {more} more)" if more > 0 else "")
        tail = f"It lists: {available}."
    else:
        tail = "It lists no models."
    message = (f"The configured model {shown_model!r} is not offered by this endpoint. {tail} "
               "Set the model profile's \"model\" to one of them; SpotPatch never switches models on its own.")
    return ProbeOutcome(False, message, ErrorCode.PROVIDER_UNAVAILABLE, listing.models, retryable=False)


# ---------------------------------------------------------------- step 2: forced tool round trip


async def probe_tool_calling(adapter: ProviderAdapter, model: str, *,
                             max_output_tokens: int | None = None) -> ProbeOutcome:
    """Run the two-turn round trip through ``adapter`` (any wire format).

    Both turns send ``max_output_tokens`` (the model profile's output cap, as every job turn does), so a
    provider that rejects the cap says so here, not in the middle of a job. Turn 1's text is bounded to
    :data:`PROBE_TEXT_BYTES`: a model that answers the forced call with text is cut off there (the stream is
    closed at once) instead of streaming until the cap or the probe's timeout. Raises :class:`ProviderError`
    for transport and protocol failures (also in turn 2); returns ``tool_calling=False`` with
    ``MODEL_TOOL_CALL_UNSUPPORTED`` when turn 1 holds no valid call to the offered tool.
    """
    first = TurnRequest(system=_SYSTEM, items=(UserMessage(_ASK),), tools=(PROBE_TOOL,), model=model,
                        tool_choice="required", max_output_tokens=max_output_tokens, max_text_bytes=PROBE_TEXT_BYTES)
    calls: list[ToolCallEvent] = []
    stop_reason: str | None = None
    replay: tuple[dict[str, Any], ...] = ()
    async with aclosing(adapter.stream_turn(first)) as events:
        async for event in events:
            if isinstance(event, ToolCallEvent):
                calls.append(event)
            elif isinstance(event, TurnRestart):
                calls.clear()
            elif isinstance(event, TurnEnd):
                stop_reason, replay = event.stop_reason, event.replay
    valid = [c for c in calls if c.name == PROBE_TOOL.name and c.invalid is None]
    if not valid:
        return ProbeOutcome(False, no_call_message(calls, stop_reason), ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED)
    records = tuple(ToolCallRecord(id=c.id, name=c.name, arguments_json=c.arguments_json) for c in calls)
    answers = tuple(ToolResultMessage(call_id=c.id, output="ok" if c in valid else "ERROR: not offered")
                    for c in calls)  # every call of the turn gets exactly one result
    second = TurnRequest(system=_SYSTEM,
                         items=(UserMessage(_ASK), AssistantTurn(text="", tool_calls=records, replay=replay), *answers),
                         tools=(PROBE_TOOL,), model=model, tool_choice="none", max_output_tokens=max_output_tokens)
    async with aclosing(adapter.stream_turn(second)) as events:
        async for _ in events:
            pass
    return ProbeOutcome(True, "Tool calling works: one forced tool call and its continuation succeeded.")


async def probe_vision(adapter: ProviderAdapter, model: str, *,
                       max_output_tokens: int | None = None) -> tuple[bool, str]:
    """One turn whose user message carries :data:`PROBE_IMAGE` (any wire format): ``(True, sentence)`` when
    the provider streamed the turn to its end, ``(False, why)`` when it refused it (a provider error: HTTP 400
    for an unsupported content part, an error inside the stream, …). Never raises a ProviderError."""
    request = TurnRequest(system="", items=(UserMessage(_VISION_ASK, images=(PROBE_IMAGE,)),), tools=(PROBE_TOOL,),
                          model=model, tool_choice="none", max_output_tokens=max_output_tokens,
                          max_text_bytes=PROBE_TEXT_BYTES)
    try:
        async with aclosing(adapter.stream_turn(request)) as events:
            async for _ in events:
                pass
    except ProviderError as exc:
        return False, (f"Images: the provider refused an image part ({exc.message}); no images are sent to this "
                       "model. Remove \"vision\" from the model profile or choose a model that accepts images.")
    return True, "Images: the provider accepted an image part; the targets' pictures are sent with each job."


def no_call_message(calls: Sequence[ToolCallEvent], stop_reason: str | None) -> str:
    """The diagnosis of a forced tool call answered without a valid call: the same for a short text-only
    answer and for one cut off by the text budget (``text_limit``); an answer that reached the output cap
    (``length``) says it was cut off at the output limit."""
    what = "no tool call" if not calls else "a malformed or unexpected tool call"
    if stop_reason == "length":
        cut = " (its answer was cut off at the output limit)"
    elif stop_reason == "text_limit":
        cut = " (it wrote text instead; SpotPatch stopped reading after the probe's text budget)"
    else:
        cut = ""
    return (f"The model answered the forced tool call with {what}{cut}; it cannot drive SpotPatch's "
            "tools. Choose a model with tool calling, or copy the prompt instead.")


async def run_probe(
    adapter: ProviderAdapter,
    *,
    model: str,
    base_url: str,
    api_key: str | None,
    headers: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: float = PROBE_TIMEOUT,
    max_output_tokens: int | None = None,
    vision: bool = False,
) -> ProbeOutcome:
    """:func:`list_models`, then (unless the model is missing) :func:`probe_tool_calling` (with the output
    cap ``max_output_tokens``), then with ``vision`` (the profile says the model accepts images) and tool
    calling proven, :func:`probe_vision`, all within
    ``timeout`` seconds. The message starts with what the listing said. Raises :class:`ProviderError` as
    those two do, and ``PROVIDER_UNAVAILABLE`` when the whole probe takes longer than ``timeout``."""
    try:
        with anyio.fail_after(timeout):
            listing = await list_models(base_url=base_url, api_key=api_key, headers=headers, transport=transport)
            missing = missing_model(model, listing, base_url=base_url, api_key=api_key)
            if missing is not None:
                return missing
            outcome = await probe_tool_calling(adapter, model, max_output_tokens=max_output_tokens)
            if vision and outcome.tool_calling:
                accepted, said = await probe_vision(adapter, model, max_output_tokens=max_output_tokens)
                outcome = replace(outcome, vision=accepted, message=f"{outcome.message} {said}")
    except TimeoutError:
        raise ProviderError(ErrorCode.PROVIDER_UNAVAILABLE, f"the probe took longer than {timeout:g} s") from None
    return replace(outcome, message=f"{listing.note} {outcome.message}", models=listing.models,
                   server=listing.server)


# ---------------------------------------------------------------- helpers


async def _read_bounded(response: httpx.Response) -> str:
    buf = bytearray()
    async for part in response.aiter_bytes():
        buf += part
        if len(buf) >= _LISTING_BYTES:
            return ""  # a listing this large is not a model list we can use
    return bytes(buf).decode("utf-8", errors="replace")


def _transport_wording(exc: Exception) -> str:
    """A fixed wording per httpx failure (the exception's own text, which may hold the URL, is dropped)."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return "the provider did not answer the model listing in time"
    if isinstance(exc, httpx.ConnectError):
        return "could not connect to the provider (refused, DNS or TLS failure)"
    if isinstance(exc, httpx.InvalidURL):
        return "the provider's base URL is not a valid URL"
    return f"the model listing failed ({type(exc).__name__})"
