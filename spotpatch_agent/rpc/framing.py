"""LSP base-protocol framing: ``Content-Length: N\\r\\n\\r\\n`` + N bytes of UTF-8 JSON (docs/design.md §3).

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
_RESYNC = re.compile(rb"(?i)content-length[ \t]{0,32}:")
#: A possible start of a ``_RESYNC`` match cut off by the end of the buffer (kept while resynchronising).
_RESYNC_PARTIAL = re.compile(
    rb"(?i)c(?:o(?:n(?:t(?:e(?:n(?:t(?:-(?:l(?:e(?:n(?:g(?:t(?:h[ \t]{0,32})?)?)?)?)?)?)?)?)?)?)?)?)?\Z"
)


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
    """Incremental decoder. ``feed(bytes)`` returns the frames and faults completed by those bytes.

    A bad header block costs exactly one fault: the decoder then discards bytes until the next
    ``Content-Length:`` (resync), so the junk that followed a bad header is never parsed as a header.
    """

    def __init__(self, *, max_body_bytes: int) -> None:
        self._buf = bytearray()
        self._max_body = max_body_bytes
        self._body_len: int | None = None  # set while waiting for a body
        self._skip = 0  # bytes of an oversized body still to discard
        self._syncing = False  # discarding until the next Content-Length after a bad header

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
            if self._syncing and not self._resync():
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

    def pending(self) -> tuple[str, int]:
        """What the decoder is waiting for (diagnostics; a test uses it to resynchronise on purpose):

        ``("idle", 0)`` on a frame boundary; ``("header", n)`` with ``n`` bytes of an unfinished header
        block buffered; ``("body", n)`` with ``n`` more bytes of a body to come (also of an oversized body
        being skipped); ``("sync", 0)`` discarding input until the next ``Content-Length`` after a fault.
        """
        if self._skip:
            return ("body", self._skip)
        if self._syncing:
            return ("sync", 0)
        if self._body_len is not None:
            return ("body", self._body_len - len(self._buf))
        return ("header", len(self._buf)) if self._buf else ("idle", 0)

    def _read_header(self, out: list[Frame | FrameFault]) -> bool:
        """Parse one header block; True when parsing may go on with the buffer as it is now."""
        # Blank lines between frames are harmless: drop them.
        while self._buf[:2] == b"\r\n" or self._buf[:1] == b"\n":
            del self._buf[: 2 if self._buf[:2] == b"\r\n" else 1]
        # Look for the blank line in the first MAX_HEADER_BYTES (+ its own bytes) only, so that the verdict
        # does not depend on how much of the stream one read delivered (a blank line far behind would
        # otherwise make junk plus the next frame's header one "header block").
        match = _HEADER_END.search(self._buf, 0, MAX_HEADER_BYTES + 4)
        if match is None:
            if len(self._buf) >= MAX_HEADER_BYTES + 4:
                out.append(FrameFault(PARSE_ERROR, "Header block too long or missing blank line"))
                del self._buf[:1]
                self._syncing = True
                return True
            return False
        block = bytes(self._buf[: match.start()])
        length, problem, resync_at = _parse_header_block(block)
        if problem is not None:
            out.append(FrameFault(PARSE_ERROR, problem))
            if resync_at is not None:  # a header glued behind junk: start over there
                del self._buf[:resync_at]
            else:  # the whole block is bad: skip it and whatever body follows it
                del self._buf[: match.end()]
                self._syncing = True
            return True
        del self._buf[: match.end()]
        assert length is not None
        if length > self._max_body:
            out.append(FrameFault(INVALID_REQUEST,
                                  f"Frame body of {length} bytes exceeds the maximum of {self._max_body}"))
            self._skip = length
            return True
        self._body_len = length
        return True

    def _resync(self) -> bool:
        """Drop bytes up to the next ``Content-Length:``; False (keeping a possible prefix) if none yet."""
        m = _RESYNC.search(self._buf)
        if m is None:
            partial = _RESYNC_PARTIAL.search(self._buf)  # e.g. "Content-Len" + the rest in the next read
            del self._buf[: partial.start() if partial else len(self._buf)]
            return False
        del self._buf[: m.start()]
        self._syncing = False
        return True


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _parse_header_block(block: bytes) -> tuple[int | None, str | None, int | None]:
    """``(length, problem, resync_at)``: ``resync_at`` is where a ``Content-Length`` header starts
    after a malformed line of this block (junk glued in front of a real header), else None."""
    length: int | None = None
    for line_start, raw_line in _lines(block):
        try:
            line = raw_line.decode("ascii")
        except UnicodeDecodeError:
            line = ""
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name.strip()):
            m = _RESYNC.search(block, line_start + 1)
            return None, "Malformed header line (expected 'Name: value')", (m.start() if m else None)
        if name.strip().lower() != "content-length":
            continue
        value = value.strip()
        if not value.isdigit() or not value.isascii():
            return None, "Content-Length is not a non-negative integer", None
        n = int(value)
        if length is not None and n != length:
            return None, "Conflicting Content-Length headers", None
        length = n
    if length is None:
        return None, "Missing Content-Length header", None
    return length, None, None


def _lines(block: bytes) -> list[tuple[int, bytes]]:
    """``(offset, line)`` pairs of a header block; lines end in ``\n`` or ``\r\n``."""
    out, pos = [], 0
    while True:
        nl = block.find(b"\n", pos)
        end = len(block) if nl < 0 else nl
        out.append((pos, block[pos:end].rstrip(b"\r")))
        if nl < 0:
            return out
        pos = nl + 1


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
