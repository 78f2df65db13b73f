"""Redaction of secrets and absolute paths in logs (invariant 3)."""

from __future__ import annotations

import logging
from pathlib import Path

from spotpatch_agent.policy.redact import REDACTOR, RedactingFilter, shorten_paths


def test_log_records_lose_secrets_registered_paths_and_other_absolute_paths(tmp_path: Path) -> None:
    REDACTOR.add_secret("sk-canary-redact-0123456789")
    REDACTOR.add_path(tmp_path / "proj", ".")
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "key %s at %s, also %s", (
        "sk-canary-redact-0123456789", str(tmp_path / "proj" / "src" / "a.ts"), "/opt/elsewhere/lib/x.py"), None)
    try:
        raise RuntimeError("boom in /usr/lib/python3/thing.py")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    RedactingFilter().filter(record)
    text = record.getMessage()
    assert "sk-canary-redact" not in text and "[REDACTED]" in text
    assert str(tmp_path) not in text and "./src/a.ts" in text
    assert "/opt/elsewhere" not in text and "/usr/lib/python3" not in text
    assert __file__ not in text


def test_shorten_paths_keeps_urls_and_relative_paths() -> None:
    assert shorten_paths("see http://127.0.0.1:9/v1/chat and src/a.ts") == "see http://127.0.0.1:9/v1/chat and src/a.ts"
    assert "/home/u" not in shorten_paths("at /home/u/p/f.py")
