"""One "looks like a credential" rule for the check environment and for redaction (issue 30; docs/security.md §1).

A security boundary: a variable kept out of a check's environment because its name looks like a credential
must also be masked wherever the engine shows text (log lines, events). Before issue 30 the check
environment dropped ``*_AUTH`` while redaction did not register it.
"""

from __future__ import annotations

import logging
import secrets

import pytest

from spotpatch_agent.checks.runner import check_env
from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.policy import redact
from spotpatch_agent.policy.credentials import looks_like_credential
from spotpatch_agent.policy.redact import SECRET_MARK, RedactingFilter, Redactor
from spotpatch_agent.protocol.models import CheckConfig


def _log_line(text: str) -> str:
    record = logging.LogRecord("spotpatch.test", logging.INFO, __file__, 1, "check said %s", (text,), None)
    assert RedactingFilter().filter(record)
    return record.getMessage()


# LC_OAUTH is on the check allowlist by its shape (every LC_*): only the credential rule keeps it out.
@pytest.mark.parametrize("name", ["NPM_CONFIG__AUTH", "LC_OAUTH", "REGISTRY_AUTH"])
def test_an_auth_variable_is_dropped_from_a_check_and_redacted_from_logs_and_events(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value = "npm-" + secrets.token_hex(16)  # looks secret: registered by name
    monkeypatch.setenv(name, value)
    assert name not in check_env() and value not in check_env().values()
    redact.redact_env_keys()  # as serve/run do at start-up
    assert value not in _log_line(f"npm error 401 with {value}") and SECRET_MARK in _log_line(value)
    event = JobEventLog("job_x", lambda _e: None).emit("status", status="running", message=f"auth={value}")
    assert value not in str(event) and SECRET_MARK in event["message"]


def test_the_rule_is_the_one_both_sides_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Redactor()
    monkeypatch.setattr(redact, "REDACTOR", fresh)
    # Every name the check environment drops by this rule is registered for redaction, and the reverse.
    names = ["LC_OAUTH", "LC_TOKEN", "LC_PASSWD", "LC_SIGNATURE", "LC_COOKIE", "LC_AUTHOR", "LC_AUTHORITY"]
    values = {name: f"v{i}-" + secrets.token_hex(12) for i, name in enumerate(names)}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    kept = check_env()
    redact.redact_env_keys()
    for name, value in values.items():
        dropped, masked = name not in kept, value not in fresh(value)
        assert dropped == masked == looks_like_credential(name), name
    assert {n for n in names if n not in kept} == {"LC_OAUTH", "LC_TOKEN", "LC_PASSWD", "LC_SIGNATURE", "LC_COOKIE"}


@pytest.mark.parametrize(("name", "looks"), [
    ("NPM_CONFIG__AUTH", True), ("Authorization", True), ("Proxy-Authorisation", True), ("OAUTH_TOKEN", True),
    ("X-Api-Key", True), ("Cookie", True), ("X-Amz-Signature", True), ("DB_PASSWD", True), ("db_password", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("GOOGLE_APPLICATION_CREDENTIALS", True),
    ("GIT_AUTHOR_NAME", False), ("GIT_AUTHOR_EMAIL", False), ("X-Title", False), ("NODE_OPTIONS", False),
    ("PATH", False), ("LC_ALL", False),
])
def test_looks_like_credential(name: str, looks: bool) -> None:
    assert looks_like_credential(name) is looks


def test_git_author_is_no_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests' own git identity (tests/conftest.py) and a user's: a name or an address masked in every event.
    fresh = Redactor()
    monkeypatch.setattr(redact, "REDACTOR", fresh)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Jane Doe 1984")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "jane.doe.1984@example.com")
    redact.redact_env_keys()
    assert fresh("by Jane Doe 1984 <jane.doe.1984@example.com>") == "by Jane Doe 1984 <jane.doe.1984@example.com>"


def test_pass_env_refuses_an_auth_name_with_its_own_message() -> None:
    with pytest.raises(ValueError, match="looks like a credential"):
        CheckConfig.model_validate({"id": "t", "name": "T", "command": "tsc", "passEnv": ["NPM_CONFIG__AUTH"]})
