"""Redaction of secrets and absolute paths from every text that leaves the engine (docs/design.md §3, invariant 3).

One process-wide :data:`REDACTOR` holds the secret values (API keys read from the environment) and the
absolute paths (project root, worktrees, home, temp dir) known so far; :class:`RedactingFilter` applies it
to every log record, and the engine applies it to every event, error and model-facing text.

What is registered (docs/security.md §1, issue 25): a provider's key whatever its shape, except a key under
:data:`MIN_LOCAL_KEY` characters of a provider on the loopback (:func:`register_provider_secrets`); a value
found only by its name (a variable named like a credential, :func:`~.credentials.looks_like_credential`;
a header not named like one) only when it
:func:`looks_secret` (``SECRET_KEY_BASE=development`` masks nothing). Besides each whole value and its
encodings, every :data:`FRAGMENT`-character piece of a key's body (:func:`key_fragments`) is masked, in one
pass over the text (a set lookup per window).

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
from typing import Any
from urllib.parse import quote, quote_plus

from spotpatch_agent.policy.credentials import looks_like_credential

SECRET_MARK = "[REDACTED]"
#: Secrets at least this long are also redacted in their base64 and percent-encoded forms.
_MIN_ENCODED_SECRET = 8
#: A provider key shorter than this is not registered when its provider is on the loopback (a local
#: llama.cpp or Ollama server accepting ``x``): such a "key" protects nothing and would mask ordinary words.
MIN_LOCAL_KEY = 8
#: A value found only by its variable's or header's *name* is registered when it has at least this many
#: characters and two character classes (:func:`looks_secret`): ``development``, ``changeme``, ``true`` are not.
MIN_NAMED_SECRET = 8
#: Length of the key fragments masked wherever a text goes out (:class:`Redactor`).
FRAGMENT = 8
#: A value found by name is also masked by fragment only from this length on (a token, not a password).
MIN_NAMED_FRAGMENTED = 20
#: Well-known public key prefixes, longest first: never counted in a fragment (``sk-proj-`` is 8 characters
#: every OpenAI project key shares). Any other leading run of lowercase words ending in ``-``/``_``
#: (``sk-canary-``, ``nvapi-``) is treated the same way (:func:`key_body`).
PUBLIC_PREFIXES = ("sk-ant-api03-", "sk-ant-admin01-", "github_pat_", "sk-or-v1-", "sk-proj-", "sk-svcacct-",
                   "sk-admin-", "sk-ant-", "glpat-", "xoxb-", "xoxp-", "xapp-", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "gsk_", "hf_", "r8_", "AIza", "AKIA", "ASIA", "sk-", "rk-", "pk-")
_WORD_PREFIX = re.compile(r"(?:[a-z]{1,10}[-_])+")
_AUTH_SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Bot|ApiKey)\s+", re.IGNORECASE)
_LOOPBACK_HOSTS = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _classes(text: str) -> int:
    """How many of lower case, upper case, digits and other non-space characters ``text`` uses."""
    return (any(c.islower() for c in text) + any(c.isupper() for c in text) + any(c.isdigit() for c in text)
            + any(not c.isalnum() and not c.isspace() for c in text))


def looks_secret(value: str) -> bool:
    """The rule for a value registered only because of its name (an environment variable named like a
    credential, :func:`~.credentials.looks_like_credential`; a provider header not named like one): at least
    :data:`MIN_NAMED_SECRET` characters, 5 distinct ones, not a URL without credentials in it, and letters
    with digits, or a character outside letters, digits and ``-_.:/`` (``!@#$%+=…``), or 32+ characters.
    ``development``, ``Production``, ``changeme``, ``true``, ``1234``, ``https://example.com``, ``SpotPatch``
    fail it; ``s3cr3t-Pass``, ``Password-2024``, hex and any real token pass. A passphrase of words and
    hyphens under 32 characters, or digits alone, is not registered (docs/security.md §1)."""
    value = value.strip()
    if len(value) < MIN_NAMED_SECRET or len(set(value)) < 5:
        return False
    if "://" in value and "@" not in value:
        return False
    letters, digits = any(c.isalpha() for c in value), any(c.isdigit() for c in value)
    special = any(not c.isalnum() and c not in "-_.:/" for c in value)
    return (letters and digits) or special or len(value) >= 32


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is the loopback (``localhost``, ``127.0.0.0/8``, ``::1``): a provider on this
    machine. A URL that does not parse is not (the safe side: its key is registered)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host in _LOOPBACK_HOSTS or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def key_body(value: str) -> str:
    """``value`` without an HTTP auth scheme (``Bearer ``) and its well-known public prefix
    (:data:`PUBLIC_PREFIXES`, or a leading run of lowercase words each ending in ``-``/``_``): the part
    whose fragments are secret."""
    value = _AUTH_SCHEME.sub("", value, count=1)  # an Authorization header's value: "Bearer sk-proj-…"
    for prefix in PUBLIC_PREFIXES:
        if value.startswith(prefix):
            return value[len(prefix):]
    match = _WORD_PREFIX.match(value)
    return value[match.end():] if match and match.end() <= 24 else value


def key_fragments(value: str) -> set[str]:
    """Every :data:`FRAGMENT`-character substring of ``value``'s body (:func:`key_body`) that uses two
    character classes or more: a run of one class (``required`` in a dummy ``sk-no-key-required``, the
    digits of a date) is too likely to be an ordinary word or number to be masked on its own."""
    body = key_body(value)
    grams = {body[i:i + FRAGMENT] for i in range(len(body) - FRAGMENT + 1)}
    return {g for g in grams if _classes(g) >= 2 and not any(c.isspace() for c in g)}


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
        self._grams: set[str] = set()
        self._gram_run: re.Pattern[str] | None = None
        self._paths: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self.add_path(Path.home(), "~")
        self.add_path(Path(tempfile.gettempdir()), "$TMP")

    def snapshot(self) -> tuple[Any, ...]:
        """The registered secrets, opaque, for :meth:`restore` (tests: one test's keys never mask another's)."""
        with self._lock:
            return (set(self._secrets), self._grams, self._gram_run)

    def restore(self, saved: tuple[Any, ...]) -> None:
        """Put back what :meth:`snapshot` returned."""
        with self._lock:
            self._secrets, self._grams, self._gram_run = saved
            self._pattern = None

    def add_secret(self, value: str | None, *, local: bool = False) -> None:
        """Register a configured secret — a provider's key (``apiKeyEnv``) or a credential header's value —
        whatever its shape: the value, its base64 and percent-encoded forms when it has 8 characters or more
        (:func:`secret_variants`), and its fragments (:func:`key_fragments`). ``local``: the provider is on
        the loopback (:func:`is_loopback_url`); then a value shorter than :data:`MIN_LOCAL_KEY` is not a
        secret and is ignored. A remote provider's key is always registered, even one character long."""
        if not value or (local and len(value) < MIN_LOCAL_KEY):
            return
        self._register(value, key_fragments(value))

    def add_named_value(self, value: str | None) -> None:
        """Register a value found only by its name (:func:`redact_env_keys`, a provider header not named
        like a credential) when it :func:`looks_secret`; its fragments too from
        :data:`MIN_NAMED_FRAGMENTED` characters on. Others (``development``, ``true``) are ignored."""
        if not value or not looks_secret(value):
            return
        self._register(value, key_fragments(value) if len(value) >= MIN_NAMED_FRAGMENTED else set())

    def _register(self, value: str, grams: set[str]) -> None:
        with self._lock:
            self._secrets.update(secret_variants(value))
            self._pattern = None
            if not grams <= self._grams:
                self._grams = self._grams | grams  # a new set: a scan in another thread keeps its own
                chars = "".join(sorted(set("".join(self._grams))))
                self._gram_run = re.compile(f"[{re.escape(chars)}]{{{FRAGMENT},}}")

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
        return self._mask_fragments(self._whole(text))

    def _whole(self, text: str) -> str:
        pattern = self._compiled()
        return text if pattern is None else pattern.sub(self._replacement, text)

    def _mask_fragments(self, text: str) -> str:
        """``text`` with every run of characters covered by a registered key fragment replaced by
        ``[REDACTED]``: one pass over the runs of key characters, each window looked up in a set."""
        with self._lock:
            run, grams = self._gram_run, self._grams
        if run is None:
            return text
        spans: list[list[int]] = []
        for match in run.finditer(text):
            start = match.start()
            for i in range(start, match.end() - FRAGMENT + 1):
                if text[i:i + FRAGMENT] in grams:
                    if spans and spans[-1][1] >= i:
                        spans[-1][1] = i + FRAGMENT
                    else:
                        spans.append([i, i + FRAGMENT])
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for begin, end in spans:
            out += (text[last:begin], SECRET_MARK)
            last = end
        out.append(text[last:])
        return "".join(out)

    def redact_cut_source(self, text: str) -> str:
        """``text``, redacted, for a text whose end was cut before it got here (the first N bytes of a
        process's output): a tail that is the beginning of a registered secret, in any of its forms, is
        removed too, since the redactor cannot recognise a secret that was cut in half."""
        text = self._whole(text) if text else text
        with self._lock:
            secrets = tuple(self._secrets)
        drop = 0
        for secret in secrets:
            for size in range(min(len(secret) - 1, len(text)), drop, -1):
                if text.endswith(secret[:size]):
                    drop = size
                    break
        return self._mask_fragments(text[: len(text) - drop] if drop else text)

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
    """Register every environment value whose name looks like a credential (:func:`looks_like_credential`:
    the names ``checks.runner.check_env`` keeps from a check) and whose value looks like a secret
    (:meth:`Redactor.add_named_value`: ``SECRET_KEY_BASE=development`` is not)."""
    for name, value in os.environ.items():
        if looks_like_credential(name):
            REDACTOR.add_named_value(value)


def register_provider_secrets(base_url: str, key: str | None, headers: dict[str, str]) -> None:
    """Register what a provider profile holds: its key (:meth:`Redactor.add_secret`, the loopback exception
    for a short key), each header named like a credential (``Authorization``, ``X-Api-Key``, ``Cookie``, …)
    the same way, and each other header's value only when it :func:`looks_secret` (``X-Title: SpotPatch``
    is not masked everywhere)."""
    local = is_loopback_url(base_url)
    REDACTOR.add_secret(key, local=local)
    for name, value in headers.items():
        if looks_like_credential(name):
            REDACTOR.add_secret(value, local=local)
        else:
            REDACTOR.add_named_value(value)


#: Public name of the character-class count (the tests read it as their oracle).
char_classes = _classes
