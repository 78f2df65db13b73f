"""Line anchors of the ``anchors`` edit format (docs/design.md §6, "Edit formats"; issue 27).

An anchor names one line of a file as it is now: ``<line>#<hash>``, e.g. ``12#KT``. ``<line>`` is the 1-based
line number; ``<hash>`` is two characters of the RFC 4648 base32 alphabet (``A``–``Z``, ``2``–``7``): the first
10 bits of the SHA-256 of the line's bytes, without its line break (``\\n`` or ``\\r\\n``) and, on line 1,
without a UTF-8 BOM. The hash is of the bytes on disk, before any redaction: an edit is verified against the
file itself. Ten bits reveal nothing usable of a line, and a line whose content changed keeps its hash only
by chance (1 in 1024 per anchor; an edit checks two).

``read_file`` shows each line as ``   12#KT| text`` and ``search_text`` each hit as ``path:12#KT: text``;
``edit_lines`` takes two anchors and refuses one whose hash does not match the current line or whose line is
past the end (tools/edit_lines.py). Parsing is lenient only about what surrounds an anchor (spaces, and the
``| text`` of a copied ``read_file`` row), never about its number or hash.
"""

from __future__ import annotations

import base64
import hashlib
import re

#: Characters of an anchor's hash.
HASH_CHARS = 2

_ANCHOR = re.compile(r"\s*(\d{1,9})#([A-Za-z2-7]{2})\s*(?:\|.*)?", re.DOTALL)
_BARE_LINE = re.compile(r"\s*(\d{1,9})\s*(?:\|.*)?", re.DOTALL)


def line_hash(text: str) -> str:
    """The anchor hash of one display line (its text without line break or BOM): ``HASH_CHARS`` base32
    characters of the SHA-256 of its UTF-8 bytes (``surrogatepass``, so any str hashes)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return base64.b32encode(digest[:2]).decode("ascii")[:HASH_CHARS]


def anchor(number: int, text: str) -> str:
    """The anchor of line ``number`` (1-based) whose display text is ``text``: ``12#KT``."""
    return f"{number}#{line_hash(text)}"


def parse_anchor(raw: str) -> tuple[int, str] | None:
    """``(line, hash)`` of an anchor as the model sent it, hash in upper case; None when ``raw`` is not one
    (surrounding spaces and a trailing ``| text`` are allowed). The line may be 0 or past the end: the
    caller checks it against the file."""
    match = _ANCHOR.fullmatch(raw)
    if match is None:
        return None
    return int(match.group(1)), match.group(2).upper()


def bare_line(raw: str) -> int | None:
    """The line number when ``raw`` is a bare line number instead of an anchor (``12``, or a copied ``12| text``
    row of the plain numbering the first message's excerpt uses); None otherwise."""
    match = _BARE_LINE.fullmatch(raw)
    return int(match.group(1)) if match else None
