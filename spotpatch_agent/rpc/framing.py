"""LSP base-protocol framing: ``Content-Length: N\\r\\n\\r\\n`` + N bytes of UTF-8 JSON (DESIGN.md §3).

:class:`FrameDecoder` is a pure, incremental parser that never raises on bad input: it turns a byte
stream into :class:`Frame` (a decoded JSON value) and :class:`FrameFault` items (something the peer
should hear about as a JSON-RPC error with ``id: null``) and resynchronises on the next
``Content-Length`` header. Rules (python-lsp-jsonrpc 1.1.2 dies or hangs on several of these):

- header names are case-insensitive; header order is free (``Content-Type`` may come first);
  unknown headers are ignored; header lines end in ``\\r\\n`` (a bare ``\\n`` is tolerated);
- ``Content-Length`` must be one decimal integer of bytes, ≤ ``max_body_bytes``; missing, non-numeric,
  negative, duplicated-with-different-values → :class:`FrameFault` ``-32700`` and resync;
- an oversized body is skipped without buffering it whole → fault ``-32600``;
- the body must be UTF-8 JSON, else fault ``-32700``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MAX_HEADER_BYTES = 8 * 1024

_HEADER_END = re.compile(rb"\r?\n\r?\n")
_RESYNC = re.compile(rb"(?i)content-length[ \t]*:")


@dataclass(frozen=True)
class Frame:
    """One decoded JSON value (any JSON type: the caller checks it is an object)."""

    value: Any


@dataclass(frozen=True)
class FrameFault:
    """A framing or decoding fault: reply ``{"code": code, "message": message}`` with ``id: null``."""

    code: int
    message: str


class FrameDecoder:
    """Incremental decoder. ``feed(bytes)`` returns the frames and faults completed by those bytes."""

    def __init__(self, *, max_body_bytes: int) -> None:
        self._buf = bytearray()
        self._max_body = max_body_bytes
        self._body_len: int | None = None  # set while waiting for a body
        self._skip = 0  # bytes of an oversized body still to discard

    def feed(self, data: bytes) -> list[Frame | FrameFault]:
        self._buf += data
        out: list[Frame | FrameFault] = []
        while True:
            if self._skip:
                n = min(self._skip, len(self._buf))
                del self._buf[:n]
                self._skip -= n
                if self._skip:
                    return out
            if self._body_len is None:
                if not self._read_header(out):
                    return out
                continue
            if len(self._buf) < self._body_len:
                return out
            body = bytes(self._buf[: self._body_len])
            del self._buf[: self._body_len]
            self._body_len = None
            out.append(_decode_body(body))

    def _read_header(self, out: list[Frame | FrameFault]) -> bool:
        """Parse one header block; True when ``_body_len`` or ``_skip`` is set and parsing may go on."""
        # Leading blank lines between frames are harmless: drop them.
        while self._buf[:2] == b"\r\n" or self._buf[:1] == b"\n":
            del self._buf[: 2 if self._buf[:2] == b"\r\n" else 1]
        match = _HEADER_END.search(self._buf)
        if match is None:
            if len(self._buf) > MAX_HEADER_BYTES:
                out.append(FrameFault(PARSE_ERROR, "Header block too long or missing blank line"))
                self._resync(start=1)
            return False
        block = bytes(self._buf[: match.start()])
        length, problem = _content_length(block)
        if problem is not None:
            out.append(FrameFault(PARSE_ERROR, problem))
            self._resync(start=1)
            return bool(self._buf)
        del self._buf[: match.end()]
        assert length is not None
        if length > self._max_body:
            out.append(FrameFault(INVALID_REQUEST, f"Frame body of {length} bytes exceeds the maximum of {self._max_body}"))
            self._skip = length
            return True
        self._body_len = length
        return True

    def _resync(self, *, start: int) -> None:
        """Drop bytes up to the next ``Content-Length:`` at or after ``start`` (keep a tail that may be
        the prefix of one), so a bad frame costs one fault and the next good frame is read."""
        m = _RESYNC.search(self._buf, start)
        if m is not None:
            del self._buf[: m.start()]
        else:
            keep = len(b"content-length:") - 1
            del self._buf[: max(start, len(self._buf) - keep)]


def _content_length(block: bytes) -> tuple[int | None, str | None]:
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        return None, "Header block is not ASCII"
    length: int | None = None
    for line in re.split(r"\r?\n", text):
        name, sep, value = line.partition(":")
        if not sep:
            return None, "Malformed header line (expected 'Name: value')"
        if name.strip().lower() != "content-length":
            continue
        value = value.strip()
        if not value.isdigit() or not value.isascii():
            return None, "Content-Length is not a non-negative integer"
        n = int(value)
        if length is not None and n != length:
            return None, "Conflicting Content-Length headers"
        length = n
    if length is None:
        return None, "Missing Content-Length header"
    return length, None


def _decode_body(body: bytes) -> Frame | FrameFault:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return FrameFault(PARSE_ERROR, "Frame body is not valid UTF-8")
    try:
        return Frame(json.loads(text))
    except (ValueError, RecursionError):
        return FrameFault(PARSE_ERROR, "Frame body is not valid JSON")


def encode_frame(message: dict[str, Any]) -> bytes:
    """Serialise one message: compact UTF-8 JSON (non-ASCII kept), Content-Length counted in bytes."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (e.g. from undecodable bytes): escape it, stay valid JSON
        body = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
