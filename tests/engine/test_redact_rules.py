"""Which values are registered for redaction, and key fragments (issue 25; docs/security.md §1 "Redaction").

- A value found only by its variable's name is registered when it looks like a secret:
  ``SECRET_KEY_BASE=development`` no longer masks every "development".
- A provider's key is registered whatever its shape, except a key under 8 characters of a provider on the
  loopback (``x`` for a local llama.cpp); a remote provider's key is registered even when short.
- Every 8-character fragment of a key's body (its public prefix left out) is masked, in one pass.
"""

from __future__ import annotations

import secrets
import string
import time

import pytest

from spotpatch_agent.policy import redact
from spotpatch_agent.policy.redact import SECRET_MARK, Redactor, is_loopback_url, key_body, looks_secret

ALPHABET = string.ascii_letters + string.digits


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Redactor:
    """A redactor of its own in place of the process-wide one (the functions under test use ``REDACTOR``)."""
    redactor = Redactor()
    monkeypatch.setattr(redact, "REDACTOR", redactor)
    return redactor


def random_key(prefix: str = "sk-proj-", size: int = 40) -> str:
    return prefix + "".join(secrets.choice(ALPHABET) for _ in range(size))


def test_a_credential_named_variable_holding_a_common_word_masks_nothing(fresh: Redactor, monkeypatch) -> None:
    words = {"SECRET_KEY_BASE": "development", "APP_TOKEN": "changeme", "USE_KEYCHAIN": "true",
             "DB_PASSWORD": "1234", "KEY_MODE": "production", "API_KEY_HINT": "aaaaaaaaaaaa"}
    for name, value in words.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "".join(secrets.choice(ALPHABET) for _ in range(36)))
    monkeypatch.setenv("RAILS_SECRET_KEY", secrets.token_hex(32))
    monkeypatch.setenv("DEV_PASSWORD", "s3cr3t-Pass")
    redact.redact_env_keys()
    text = "development build, changeme, true, 1234, production, aaaaaaaaaaaa"
    assert fresh(text) == text
    import os

    for name in ("GITHUB_TOKEN", "RAILS_SECRET_KEY", "DEV_PASSWORD"):
        assert fresh(f"x {os.environ[name]} y") == f"x {SECRET_MARK} y", name


def test_looks_secret_rule() -> None:
    assert not any(looks_secret(v) for v in ("development", "changeme", "true", "1234", "production", "",
                                             "aaaaaaaa1", "localhost", "SpotPatch", "Production", "https://spotpatch.dev",
                                             "1234567890", "correct-horse-battery"))
    assert all(looks_secret(v) for v in ("s3cr3t-Pass", "Password-2024", "hunter!!x", secrets.token_hex(20),
                                         "https://u:pw@db.example", "abcdefghijklmnopqrstuvwxyzabcdef"))


def test_a_short_key_of_a_loopback_provider_is_not_a_secret(fresh: Redactor) -> None:
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:1234/v1"):
        assert is_loopback_url(url), url
        redact.register_provider_secrets(url, "x", {})
        redact.register_provider_secrets(url, "ollama", {})
    text = "export const max = box(x); // ollama"
    assert fresh(text) == text
    # From 8 characters on, a local key is registered whole; its one-class words are not fragments.
    redact.register_provider_secrets("http://127.0.0.1:8080/v1", "sk-no-key-required", {})
    assert fresh("k=sk-no-key-required; this field is required") == f"k={SECRET_MARK}; this field is required"


def test_a_remote_providers_key_is_registered_even_short(fresh: Redactor) -> None:
    for url in ("https://api.example.com/v1", "http://10.0.0.5/v1", "http://127.0.0.1.nip.io/v1", "not a url"):
        assert not is_loopback_url(url), url
    redact.register_provider_secrets("https://api.example.com/v1", "Ab3x9", {})
    assert fresh("key Ab3x9 here") == f"key {SECRET_MARK} here"


def test_headers_named_like_credentials_are_registered_others_only_when_secret_shaped(fresh: Redactor) -> None:
    token = "rly" + secrets.token_hex(12) + "9Z"  # letters and digits: secret-shaped whatever the draw
    redact.register_provider_secrets("https://relay.example/v1", None, {
        "X-Title": "SpotPatch", "HTTP-Referer": "https://spotpatch.dev", "X-Api-Key": "Short1", "X-Relay": token})
    assert fresh("SpotPatch at https://spotpatch.dev") == "SpotPatch at https://spotpatch.dev"
    assert fresh(f"Short1 {token}") == f"{SECRET_MARK} {SECRET_MARK}"
    bearer = random_key()
    redact.register_provider_secrets("https://relay.example/v1", None, {"Authorization": f"Bearer {bearer}"})
    assert key_body(f"Bearer {bearer}") == bearer[len("sk-proj-"):]
    assert fresh("keys start with sk-proj-") == "keys start with sk-proj-"
    assert bearer[10:20] not in fresh(f"x {bearer[10:20]}")


def test_every_fragment_of_eight_characters_or_more_of_the_keys_body_is_masked(fresh: Redactor) -> None:
    key = random_key()
    body = key_body(key)
    assert body == key[len("sk-proj-"):]
    fresh.add_secret(key)
    for size in (8, 10, 17, 39):
        for start in (0, 5, len(body) - size):
            fragment = body[start:start + size]
            if redact.char_classes(fragment[:8]) < 2 or redact.char_classes(fragment[-8:]) < 2:
                continue  # a one-class run (rare in a random key) is left on purpose
            out = fresh(f"see {fragment}, then {fragment}{fragment[:3]}")
            assert fragment not in out and SECRET_MARK in out, (size, start, out)
    # The public prefix and short pieces are no secret; ordinary text is left alone.
    text = f"keys look like sk-proj-…; {body[:7]} and {body[9:16]}; useState, 2026-12-05"
    assert fresh(text) == text


def test_fragments_of_a_long_named_value_too_but_not_of_a_password(fresh: Redactor, monkeypatch) -> None:
    token = "3f9a1c7e55d04b2b8c6e0a9d4f7b1e2c5a8d3f6b9e0c4a7d"  # no one-class run of 8 in it
    monkeypatch.setenv("SERVICE_TOKEN", token)
    monkeypatch.setenv("DB_PASSWORD", "Password-2024")
    redact.redact_env_keys()
    assert fresh(f"tail {token[10:20]}") == f"tail {SECRET_MARK}"
    assert fresh("Password-2024") == SECRET_MARK
    assert fresh("the Password-2 field") == "the Password-2 field"


def test_fragment_scan_is_one_pass_over_a_large_text(fresh: Redactor) -> None:
    for _ in range(4):
        fresh.add_secret(random_key(size=120))
    words = " ".join(["useState", "component", "Button2ComponentWrapper", "0123456789abcdef"] * 20_000)
    started = time.perf_counter()
    assert fresh(words) == words
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, elapsed  # ~1.2 MB of key characters: measured about 0.1 s on the 2-core runner


def test_a_fragment_in_a_log_record_or_an_rpc_error_is_masked() -> None:
    import logging

    from spotpatch_agent.policy.redact import REDACTOR, RedactingFilter
    from spotpatch_agent.rpc.errors import sanitize_message

    key = random_key()
    REDACTOR.add_secret(key)  # the process-wide one (tests/conftest.py drops it after the test)
    fragment = key_body(key)[5:15]
    record = logging.LogRecord("t", logging.WARNING, __file__, 1, "saw %s", (fragment,), None)
    RedactingFilter().filter(record)
    assert fragment not in record.getMessage() and SECRET_MARK in record.getMessage()
    assert fragment not in sanitize_message(f"bad value {fragment}")
