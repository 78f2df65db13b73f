"""Images to vision models (issue 26): the ``vision`` model-profile flag, its proof by the probe, the targets'
pictures in the first message (Chat ``image_url`` and Responses ``input_image`` parts), the size bounds, and
the audit ledger recording only SHA-256 and size — through the real engine service, the real adapters and the
real local scripted server (its request log is what the provider received)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import (
    MAX_IMAGE_BYTES,
    MAX_JOB_IMAGE_BYTES,
    JobCreateParams,
    JobIdParams,
    ProbeResult,
    ProviderProbeParams,
    SpotAnnotation,
    TrustedConfig,
)
from spotpatch_agent.provider.base import ImagePart, TurnRequest, UserMessage
from spotpatch_agent.provider.chat import to_chat_messages
from spotpatch_agent.provider.responses_convert import to_responses_input
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from spotpatch_agent.rpc.errors import InvalidParams
from spotpatch_agent.rpc.params import parse_params
from tests.conftest import make_repo
from tests.support.annotations import annotation, target

from .conftest import CANARY_KEY

pytestmark = pytest.mark.anyio

KEY_ENV = "SPOTPATCH_VISION_TEST_KEY"
PROBE_OK = [{"toolCalls": [{"id": "call_probe", "name": "report_ready", "arguments": {"ready": True}}]},
            {"text": "OK", "finishReason": "stop"}]
VISION_OK = {"text": "Red", "finishReason": "stop"}
FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n', ".gitignore": "node_modules\n"}
JOB_TURNS = [{"toolCalls": [{"id": "w1", "name": "replace_text",
                             "arguments": {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}}]},
             {"text": "Done.", "finishReason": "stop"}]


def png(size: int, seed: int = 1) -> bytes:
    """``size`` bytes starting with the PNG signature (the engine checks the type, not the pixels)."""
    body = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    return (b"\x89PNG\r\n\x1a\n" + body)[:size]


def webp(size: int) -> bytes:
    return (b"RIFF" + (size - 8).to_bytes(4, "little") + b"WEBPVP8L" + bytes(size))[:size]


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def image_annotation(*images: tuple[str, bytes] | None) -> dict[str, Any]:
    """One target per entry of ``images``, with its picture (``None``: none)."""
    return annotation(*(target(index=i, instruction=f"Make button {i} say Start",
                               **({} if image is None else {"image": {"mediaType": image[0], "data": b64(image[1])}}))
                        for i, image in enumerate(images, 1)))


def config(server: ScriptedProviderServer, *, api: str, vision: bool) -> TrustedConfig:
    model: dict[str, Any] = {"id": "m", "model": "scripted-model", "displayName": "M"}
    if vision:
        model["vision"] = True
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "api": api, "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
        "models": [model]}]})


@asynccontextmanager
async def engine(tmp_path: Path, server: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch, *,
                 api: str = "chat", vision: bool = True,
                 events: list[Any] | None = None) -> AsyncIterator[EngineService]:
    monkeypatch.setenv(KEY_ENV, CANARY_KEY)
    service = EngineService(send_event=(events.append if events is not None else lambda _event: None))
    async with service.running():
        await service.configure(make_repo(tmp_path / "repo", FILES), config(server, api=api, vision=vision))
        yield service


async def probe(service: EngineService) -> ProbeResult:
    return await service.provider_probe(ProviderProbeParams(model_profile_id="m"))


async def run_job(service: EngineService, ann: dict[str, Any]) -> str:
    snap = await service.job_create(JobCreateParams.model_validate({"annotation": ann, "modelProfileId": "m"}))
    await service.wait_job(snap.job_id)
    return snap.job_id


def image_parts(body: dict[str, Any], api: str) -> list[str]:
    """The data URLs of the image parts in a recorded request body's user messages."""
    if api == "chat":
        users = [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
        return [p["image_url"]["url"] for content in users for p in content if p["type"] == "image_url"]
    return [p["image_url"] for m in body["input"] if m.get("role") == "user"
            for p in m["content"] if p["type"] == "input_image"]


# ---------------------------------------------------------------- the probe proves (or refuses) vision


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_the_probe_sends_one_tiny_image_part_and_records_that_it_was_accepted(tmp_path, monkeypatch, api):
    with ScriptedProviderServer([*PROBE_OK, VISION_OK]) as server:
        async with engine(tmp_path, server, monkeypatch, api=api) as service:
            result = await probe(service)
            again = await probe(service)
    assert (result.ok, result.tool_calling, result.vision) == (True, True, True)
    assert "accepted an image part" in result.message
    assert again.cached and again.vision is True and len(server.requests) == 3
    parts = image_parts(server.requests[2], api)
    assert len(parts) == 1 and parts[0].startswith("data:image/png;base64,iVBORw0KGgo")
    assert base64.b64decode(parts[0].split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert not image_parts(server.requests[0], api) and not image_parts(server.requests[1], api)


async def test_a_refused_image_part_is_reported_and_tool_calling_still_passes(tmp_path, monkeypatch):
    refused = {"status": 400, "body": {"error": {"message": "image_url is not supported by this model",
                                                 "type": "invalid_request_error"}}}
    with ScriptedProviderServer([*PROBE_OK, refused, *JOB_TURNS]) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
            await run_job(service, image_annotation(("image/png", png(500))))
    assert (result.ok, result.tool_calling, result.vision) == (True, True, False)
    assert "refused an image part" in result.message and "no images are sent" in result.message
    assert not image_parts(server.requests[3], "chat")  # the job after the refusal sends none


async def test_a_profile_without_vision_is_never_sent_an_image_not_even_by_the_probe(tmp_path, monkeypatch):
    with ScriptedProviderServer([*PROBE_OK, *JOB_TURNS]) as server:
        async with engine(tmp_path, server, monkeypatch, vision=False) as service:
            result = await probe(service)
            await run_job(service, image_annotation(("image/png", png(500))))
    assert result.ok and result.vision is None and "Images" not in result.message
    assert len(server.requests) == 4
    assert not any(image_parts(body, "chat") for body in server.requests)
    assert isinstance(server.requests[2]["messages"][1]["content"], str)  # the first message is unchanged


async def test_an_inline_proof_does_not_prove_vision_and_the_next_probe_asks(tmp_path, monkeypatch):
    with ScriptedProviderServer([*JOB_TURNS, *PROBE_OK, VISION_OK]) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            await run_job(service, image_annotation(("image/png", png(500))))
            result = await probe(service)
    assert not image_parts(server.requests[0], "chat")  # vision unproven: the job sent no picture
    assert result.source == "probe" and result.vision is True and not result.cached


# ---------------------------------------------------------------- a vision job's first message


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_vision_job_sends_each_targets_picture_in_the_first_message_only(tmp_path, monkeypatch, api):
    first, second = png(700, seed=1), webp(900)
    with ScriptedProviderServer([*PROBE_OK, VISION_OK, *JOB_TURNS]) as server:
        async with engine(tmp_path, server, monkeypatch, api=api) as service:
            assert (await probe(service)).vision is True
            job_id = await run_job(service, image_annotation(("image/png", first), None, ("image/webp", second)))
            status = (await service.job_get(JobIdParams(job_id=job_id))).status
    assert status == "awaiting-review"
    turn1, turn2 = server.requests[3], server.requests[4]
    assert image_parts(turn1, api) == [f"data:image/png;base64,{b64(first)}", f"data:image/webp;base64,{b64(second)}"]
    text = json.dumps(turn1)
    assert "picture 1 shows target 1, picture 2 shows target 3" in text
    assert image_parts(turn2, api) == image_parts(turn1, api)  # the conversation is replayed unchanged


async def test_the_ledger_and_events_record_the_pictures_sha256_and_size_never_the_bytes(tmp_path, monkeypatch):
    raw = png(4000, seed=7)
    events: list[Any] = []
    with ScriptedProviderServer([*PROBE_OK, VISION_OK, *JOB_TURNS]) as server:
        async with engine(tmp_path, server, monkeypatch, events=events) as service:
            await probe(service)
            job_id = await run_job(service, image_annotation(("image/png", raw), None))
            audit = await service.job_audit(JobIdParams(job_id=job_id))
    start = next(r for r in audit.dump()["records"] if r["type"] == "job_start")
    t1, t2 = start["targets"]
    assert (t1["imageSha256"], t1["imageBytes"], t1["imageSent"]) == (hashlib.sha256(raw).hexdigest(), 4000, True)
    assert "imageSha256" not in t2
    everything = json.dumps(audit.dump()) + json.dumps([getattr(e, "dump", lambda e=e: e)() for e in events],
                                                       default=str)
    assert b64(raw)[:64] not in everything and b64(raw)[-64:] not in everything


# ---------------------------------------------------------------- bounds and types


def rejected(ann: dict[str, Any]) -> str:
    with pytest.raises(InvalidParams) as info:
        parse_params(JobCreateParams, {"annotation": ann, "modelProfileId": "m"})
    return str(info.value)


def test_an_image_over_the_per_target_bound_is_refused_naming_the_target() -> None:
    message = rejected(image_annotation(None, ("image/png", png(MAX_IMAGE_BYTES + 1))))
    assert f"target 2: its image is {MAX_IMAGE_BYTES + 1} bytes" in message and "256 KiB" in message
    assert b64(png(MAX_IMAGE_BYTES + 1))[:40] not in message  # never the input
    SpotAnnotation.model_validate(image_annotation(None, ("image/png", png(MAX_IMAGE_BYTES))))  # at the bound: fine


def test_images_over_the_per_job_bound_are_refused_naming_each_target() -> None:
    each = MAX_IMAGE_BYTES - 10
    n = MAX_JOB_IMAGE_BYTES // each + 1
    message = rejected(image_annotation(*[("image/png", png(each, seed=i)) for i in range(n)]))
    assert "per job" in message and f"target {n}: {each}" in message


@pytest.mark.parametrize(("media_type", "raw", "why"), [
    ("image/png", b"GIF89a" + bytes(40), "is not a PNG image"),
    ("image/webp", png(100), "is not a WEBP image"),
    ("image/jpeg", png(100), "annotation.targets.0.image.mediaType"),
])
def test_an_image_must_be_png_or_webp(media_type: str, raw: bytes, why: str) -> None:
    assert why in rejected(image_annotation((media_type, raw)))


def test_an_image_must_be_plain_base64() -> None:
    ann = image_annotation(("image/png", png(100)))
    ann["targets"][0]["image"]["data"] = "data:image/png;base64," + ann["targets"][0]["image"]["data"]
    assert "standard base64" in rejected(ann)


def test_pure_conversion_puts_the_text_first_and_never_logs_the_bytes() -> None:
    image = ImagePart("image/webp", b64(webp(64)))
    message = UserMessage("Look.", images=(image,))
    chat = to_chat_messages(TurnRequest(system="", items=(message,), tools=(), model="m"))
    assert chat == [{"role": "user", "content": [{"type": "text", "text": "Look."},
                                                 {"type": "image_url", "image_url": {"url": image.data_url}}]}]
    assert to_responses_input((message,)) == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Look."}, {"type": "input_image", "image_url": image.data_url}]}]
    assert image.data not in repr(message)
    assert to_chat_messages(TurnRequest(system="", items=(UserMessage("x"),), tools=(), model="m"))[0]["content"] == "x"



def test_the_ledgers_target_entries_say_whether_the_picture_was_sent() -> None:
    from spotpatch_agent.audit.ledger import target_entries

    ann = SpotAnnotation.model_validate(image_annotation(("image/png", png(300)), None))
    sent, unsent = target_entries(ann, {}, images_sent=True), target_entries(ann, {})
    assert (sent[0]["imageBytes"], sent[0]["imageSent"], unsent[0]["imageSent"]) == (300, True, False)
    assert "imageBytes" not in sent[1] and b64(png(300)) not in json.dumps(sent)
