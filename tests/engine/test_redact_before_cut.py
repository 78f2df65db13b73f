"""Redaction runs before every cut (issue 12, defect 5).

A text shortened before the redactor sees it can keep the beginning of a secret, which the redactor no longer
recognises. Each place that shortens a text reaching the model, an event, a log, an error or check output is
fed a registered secret that straddles its cut; no prefix of it (4 characters or more) may come out.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from spotpatch_agent.checks.runner import TRUNCATED_MARK, clean_output
from spotpatch_agent.engine.loop import _model_output
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.provider.http import MAX_EXCERPT, sanitize_excerpt
from spotpatch_agent.rpc.params import summarise_validation as _summarise
from spotpatch_agent.tools import ToolExecutor
from spotpatch_agent.tools.search_text import HIT_TEXT_MAX_CHARS
from spotpatch_agent.worktree.git import MAX_ERROR_CHARS, sanitize
from tests.tools.conftest import call

#: Registered like an environment token (``redact_env_keys``), not the provider key itself.
SECRET = "ghp_CutCanary0123456789abcdefABCDEF"


@pytest.fixture(autouse=True)
def _registered() -> None:
    REDACTOR.add_secret(SECRET)


def assert_no_prefix(text: str, what: str) -> None:
    leaked = [SECRET[:n] for n in range(4, len(SECRET) + 1) if SECRET[:n] in text]
    assert not leaked, f"{what} leaks {leaked[-1]!r}: {text[-120:]!r}"


def straddling(cut: int, offset: int = 9) -> str:
    """Filler, then the secret starting ``offset`` characters before position ``cut``."""
    return "x" * (cut - offset) + SECRET + " tail"


@pytest.mark.anyio
async def test_search_text_redacts_the_whole_line_before_cutting_it(repo_factory) -> None:
    line = "const a = '" + straddling(HIT_TEXT_MAX_CHARS - 11) + "';"
    root = repo_factory({"src/a.ts": line + "\n"})
    executor = ToolExecutor(root, Limits())
    result = await executor.execute("search_text", call(query="const a", glob=None, maxResults=5))
    assert result.ok and "src/a.ts:1:" in result.output
    assert_no_prefix(_model_output(result), "search_text")
    read = await executor.execute("read_file", call(path="src/a.ts", startLine=None, endLine=None))
    assert "[REDACTED]" in _model_output(read)


@pytest.mark.anyio
async def test_read_file_redacts_a_long_line_before_cutting_it(repo_factory) -> None:
    root = repo_factory({"big.txt": straddling(4096) + "\n"})
    executor = ToolExecutor(root, Limits(readMaxBytes=4096))
    result = await executor.execute("read_file", call(path="big.txt", startLine=None, endLine=None))
    assert result.ok and "was cut" in result.output
    assert_no_prefix(result.output, "read_file (tool output)")
    assert_no_prefix(_model_output(result), "read_file")


def test_check_output_cut_at_the_read_bound_drops_a_half_secret() -> None:
    raw = (straddling(4000) * 3).encode()
    # The runner keeps the first N bytes of a check's output: here the read bound falls inside the secret.
    text, truncated = clean_output(raw[:4000], max_bytes=4000, truncated=True)
    assert truncated and text.endswith(TRUNCATED_MARK)
    assert_no_prefix(text, "check output")
    whole, _ = clean_output(straddling(4000).encode(), max_bytes=4000, truncated=False)
    assert_no_prefix(whole, "check output cut after redaction")


def test_provider_error_excerpt_redacts_registered_secrets_before_the_cut() -> None:
    excerpt = sanitize_excerpt(straddling(MAX_EXCERPT), api_key="sk-provider-key-000000")
    assert len(excerpt) <= MAX_EXCERPT
    assert_no_prefix(excerpt, "provider error excerpt")


def test_git_diagnostics_are_redacted_before_the_cut() -> None:
    assert_no_prefix(sanitize(straddling(MAX_ERROR_CHARS), "/nonexistent/project"), "git stderr excerpt")


def test_rpc_invalid_params_names_fields_redacted_before_the_cut() -> None:
    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    with pytest.raises(ValidationError) as info:
        Params.model_validate({straddling(40, offset=6): 1})
    assert_no_prefix(_summarise(info.value), "INVALID_PARAMS message")


def test_redact_cut_and_a_half_secret_at_the_end_of_a_cut_source() -> None:
    from spotpatch_agent.policy.redact import redact_cut  # the helpers every cut goes through

    assert_no_prefix(redact_cut(straddling(100), 100), "redact_cut")
    assert redact_cut("short", 10) == "short" and redact_cut("abcdefghijkl", 5) == "abcd…"
    assert REDACTOR.redact_cut_source("ok " + SECRET[:12]) == "ok "
    assert REDACTOR.redact_cut_source("ok " + SECRET) == "ok [REDACTED]"
    assert REDACTOR.redact_cut_source("nothing secret here") == "nothing secret here"
