"""Redaction of secrets and absolute paths from every text that leaves the engine (docs/design.md §3, invariant 3).

One process-wide :data:`REDACTOR` holds the secret values (API keys read from the environment) and the
absolute paths (project root, worktrees, home, temp dir) known so far; :class:`RedactingFilter` applies it
to every log record, and the engine applies it to every event, error and model-facing text.

Order rule: redact first, then shorten (:func:`redact_cut`). A cut made before redaction can leave a
prefix of a secret the redactor no longer recognises. Where the *source* was already cut (a bounded read
of a process's output), :meth:`Redactor.redact_cut_source` also drops a trailing partial secret.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote, quote_plus

SECRET_MARK = "[REDACTED]"
_MIN_SECRET = 6
#: Secrets at least this long are also redacted in their base64 and percent-encoded forms.
_MIN_ENCODED_SECRET = 8


@functools.lru_cache(maxsize=64)
def secret_variants(value: str) -> tuple[str, ...]:
    """``value`` and the forms in which a provider may echo it back (longest first): base64, standard and
    URL-safe, with and without padding; the part of any base64 text that encodes ``value`` wherever it sits
    in the encoded bytes (``Basic base64(user:key)``: the three byte alignments, only the characters that
    depend on ``value`` alone); and percent-encoding (``%XX`` upper and lower case, ``+`` for space).
    Only ``value`` itself when it is shorter than 8 characters (short encodings would match noise)."""
    variants = {value}
    if len(value) >= _MIN_ENCODED_SECRET:
        raw = value.encode("utf-8")
        for pad in range(3):  # ``pad`` bytes of unknown prefix before the key in the encoded text
            encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
            start, end = -(-8 * pad // 6), (8 * (pad + len(raw))) // 6  # characters fed only by key bits
            core = encoded[start:end]
            full = [encoded, encoded.rstrip("=")] if pad == 0 else []
            for text in (core, *full):
                variants.update((text, text.translate(_URLSAFE)))
        for text in (quote(value, safe=""), quote_plus(value, safe="")):
            variants.update((text, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)))
    return tuple(sorted((v for v in variants if v), key=len, reverse=True))


_URLSAFE = str.maketrans("+/", "-_")


class Redactor:
    """Replace registered secrets with ``[REDACTED]`` and registered absolute paths with a label."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._paths: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self.add_path(Path.home(), "~")
        self.add_path(Path(tempfile.gettempdir()), "$TMP")

    def add_secret(self, value: str | None) -> None:
        """Register a secret (ignored when shorter than 6 characters: too short to redact safely), with its
        base64 and percent-encoded forms when it has 8 characters or more (:func:`secret_variants`)."""
        if value and len(value) >= _MIN_SECRET:
            with self._lock:
                self._secrets.update(secret_variants(value))
                self._pattern = None

    def add_path(self, path: Path | str, label: str) -> None:
        """Register an absolute path (and its resolved form) to be shown as ``label``."""
        variants = {str(path)}
        try:
            variants.add(str(Path(path).resolve()))
        except OSError:
            pass
        with self._lock:
            for v in variants:
                if len(v) > 1:
                    self._paths[v.rstrip("/\\")] = label
            self._pattern = None

    def __call__(self, text: str) -> str:
        if not text:
            return text
        pattern = self._compiled()
        if pattern is None:
            return text
        return pattern.sub(self._replacement, text)

    def redact_cut_source(self, text: str) -> str:
        """``text``, redacted, for a text whose end was cut before it got here (the first N bytes of a
        process's output): a tail that is the beginning of a registered secret, in any of its forms, is
        removed too, since the redactor cannot recognise a secret that was cut in half."""
        text = self(text)
        with self._lock:
            secrets = tuple(self._secrets)
        drop = 0
        for secret in secrets:
            for size in range(min(len(secret) - 1, len(text)), drop, -1):
                if text.endswith(secret[:size]):
                    drop = size
                    break
        return text[: len(text) - drop] if drop else text

    def _replacement(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if found in self._secrets:
            return SECRET_MARK
        return self._paths.get(found, SECRET_MARK)

    def _compiled(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None:
                # Longest first, so a worktree under the project root is labelled as the worktree.
                keys = sorted([*self._secrets, *self._paths], key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(k) for k in keys)) if keys else None
            return self._pattern


REDACTOR = Redactor()


def redact_cut(text: str, limit: int, *, ellipsis: str = "…") -> str:
    """``text`` redacted by :data:`REDACTOR`, then cut to at most ``limit`` characters, the last of them
    ``ellipsis`` when something was cut. Redaction sees the whole text, so no secret prefix survives."""
    text = REDACTOR(text)
    return text if len(text) <= limit else text[: max(0, limit - len(ellipsis))] + ellipsis


_POSIX_ABS = re.compile(r"(?<![\w.~/>:-])/(?:[^\s'\"`:/]+/)+([^\s'\"`:/]+/)?([^\s'\"`:/]+)")
_WIN_ABS = re.compile(r"(?<![\w])[A-Za-z]:[\\/](?:[^\s'\"`\\/]+[\\/])+([^\s'\"`\\/]+)")


def shorten_paths(text: str) -> str:
    """Replace every absolute path left in ``text`` by ``…/<last segments>`` (for logs and tracebacks)."""
    text = _POSIX_ABS.sub(lambda m: "…/" + (m.group(1) or "") + m.group(2), text)
    return _WIN_ABS.sub(lambda m: "…\\" + m.group(1), text)


class RedactingFilter(logging.Filter):
    """A logging filter that renders the record (with its traceback), redacts secrets and registered
    paths, and shortens any other absolute path (invariant 3: no absolute path in a log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = None
        record.msg = shorten_paths(REDACTOR(message))
        record.args = None
        return True


def redact_env_keys() -> None:
    """Register every environment value whose name looks like a credential (``*KEY*``, ``*TOKEN*``, …)."""
    for name, value in os.environ.items():
        if re.search(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", name, re.I):
            REDACTOR.add_secret(value)
