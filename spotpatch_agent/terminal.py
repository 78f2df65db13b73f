"""Terminal output that shows control characters instead of obeying them (issue 12, defect 6).

``spotpatch-agent run``, ``demo`` and ``checks suggest`` print text that comes from the model, from project
files, from diffs and from check output. A terminal obeys escape sequences in such text: OSC 0 retitles the
window, OSC 52 writes the clipboard, cursor movement and erase sequences can hide a line the diff adds,
and bidirectional overrides reorder what is shown. :func:`inert` turns each such character into a visible
escape (ESC → ``\\x1b``, C1 controls → ``\\x9b``, bidi controls → ``\\u202e``); tab and newline are kept.
:func:`inert_terminal` routes ``sys.stdout``, ``sys.stderr`` and the log handlers through it, so every
line the CLI prints is covered, not only the ones a caller remembered to clean.
"""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["InertWriter", "inert", "inert_terminal"]

#: C0 controls but tab and newline, DEL, C1 controls, the bidi embeddings/overrides/isolates and marks,
#: and the Unicode line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with every character a terminal would obey (see :data:`_UNSAFE`) shown as ``\\xNN`` or
    ``\\uNNNN``; tab and newline are kept. Printable text, other Unicode included, is unchanged."""
    return _UNSAFE.sub(_visible, text)


class InertWriter(io.TextIOBase):
    """A text stream that writes :func:`inert` text to ``stream`` (the real stdout or stderr)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(inert(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)


@contextmanager
def inert_terminal() -> Iterator[None]:
    """Within the block, ``sys.stdout``, ``sys.stderr`` and every logging ``StreamHandler`` writing to
    them go through :class:`InertWriter`; everything is restored afterwards."""
    out, err = sys.stdout, sys.stderr
    wrapped = {id(out): InertWriter(out), id(err): InertWriter(err)}
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and id(h.stream) in wrapped]
    originals = [h.stream for h in handlers]
    sys.stdout, sys.stderr = wrapped[id(out)], wrapped[id(err)]
    for handler in handlers:
        handler.setStream(wrapped[id(handler.stream)])
    try:
        yield
    finally:
        for handler, stream in zip(handlers, originals, strict=True):
            handler.setStream(stream)
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err
