"""The output cap of a model profile (issue 16 part 3): its value range, what each API sends, and a
provider's refusal of the cap worded so the user knows which setting to change."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import DEFAULT_MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS_CAP, ModelProfile
from spotpatch_agent.provider.base import TurnRequest
from spotpatch_agent.provider.chat import build_chat_body
from spotpatch_agent.provider.responses_convert import build_responses_body

from .apis import APIS, make_adapter
from .conftest import REQUEST, raises

pytestmark = pytest.mark.anyio


def profile(**extra: object) -> ModelProfile:
    return ModelProfile.model_validate({"id": "m", "model": "x", "displayName": "X", **extra})


def test_the_profile_cap_defaults_and_zero_sends_none():
    assert profile().output_cap == DEFAULT_MAX_OUTPUT_TOKENS == 8192
    assert profile(maxOutputTokens=1024).output_cap == 1024
    assert profile(maxOutputTokens=0).output_cap is None
    for bad in (-1, MAX_OUTPUT_TOKENS_CAP + 1, 1.5, "1024", True):
        with pytest.raises(ValidationError):
            profile(maxOutputTokens=bad)


def test_each_api_puts_the_cap_in_its_own_field_and_none_when_unset():
    capped = TurnRequest(**{**REQUEST.__dict__, "max_output_tokens": 99})
    chat, responses = build_chat_body(capped), build_responses_body(capped)
    assert chat["max_completion_tokens"] == 99 and "max_tokens" not in chat and "max_output_tokens" not in chat
    assert responses["max_output_tokens"] == 99 and "max_completion_tokens" not in responses
    assert not {"max_tokens", "max_completion_tokens", "max_output_tokens"} & (
        build_chat_body(REQUEST).keys() | build_responses_body(REQUEST).keys())


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_cap_names_the_setting_to_change(server, api):
    body = {"error": {"message": "max_tokens is too large: 8192. This model supports at most 4096 completion "
                                 "tokens, whereas you provided 8192.", "type": "invalid_request_error",
                      "param": "max_tokens", "code": None}}
    server.add_turns({"status": 400, "body": body})
    adapter = make_adapter(api, server)
    try:
        err = await raises(adapter, TurnRequest(**{**REQUEST.__dict__, "max_output_tokens": 8192}))
    finally:
        await adapter.aclose()
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "HTTP 400" in err.message
    assert "lower the model profile's maxOutputTokens" in err.message and "set it to 0" in err.message
