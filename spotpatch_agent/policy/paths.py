"""Path policy: which worktree files the agent may read or write (docs/design.md §7, §6).

One module, used by the file tools now and by changeset validation later:

- :func:`normalize_rel_path` — untrusted text → canonical relative POSIX path, or :class:`PathDenied`.
- :func:`is_protected` — the protected list, compared case-insensitively on every segment.
- :func:`is_readable_name` / :func:`readable_names` — the name half of the read policy (canonical and not
  protected) for one path, or for a batch of git's path bytes in one pass (the listing's filter).
- :func:`load_allowed` / :func:`resolve_allowed` — the filesystem half: no symlink on the path, a regular
  file inside the root, size bound, UTF-8 text. :func:`load_allowed` returns the bytes it checked, so a
  caller never reads the file twice (and never reads something other than what was checked).
- :func:`is_ignored` — git's half: a path git ignores is not allowed (async, one fixed-argv git call).

:class:`PathDenied` is internal. Its ``reason`` is for logs only and is never shown to the model: the
read tool answers every denial with one uniform message, the write tools fail the job (docs/design.md §6).
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.git_runner import GIT_ENV_ALLOWLIST, git_env, run_git_process

__all__ = [
    "BOM",
    "MAX_PATH_CHARS",
    "GIT_ENV_ALLOWLIST",
    "AllowedFile",
    "PathDenied",
    "git_env",
    "is_env_example",
    "is_ignored",
    "is_protected",
    "is_readable_name",
    "is_text",
    "load_allowed",
    "normalize_rel_path",
    "readable_names",
    "resolve_allowed",
]

#: The UTF-8 byte order mark; allowed at the start of a text file (docs/design.md §7).
BOM = b"\xef\xbb\xbf"

#: Longest relative path accepted, in characters.
MAX_PATH_CHARS = 1024

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")
# Windows-specific: device names and 8.3 short names would alias other files there.
_DEVICE_NAMES = r"con|prn|aux|nul|com[0-9]|lpt[0-9]"
_WIN_DEVICE = re.compile(rf"^({_DEVICE_NAMES})(\..*)?$", re.IGNORECASE)
_WIN_SHORT_NAME = re.compile(r"~[0-9]")

_PROTECTED_ANY_SEGMENT = frozenset({".git", ".spotpatch", "node_modules"})
_GENERATED_DIRS = frozenset({"dist", "build", ".vite", "coverage", ".next", ".nuxt", ".svelte-kit", "out"})
_CREDENTIAL_FILES = frozenset({".npmrc", ".netrc", ".pypirc"})
_LOCKFILES = frozenset(
    {"package-lock.json", "pnpm-lock.yaml", "yarn.lock", "bun.lockb", "poetry.lock", "uv.lock", "cargo.lock"}
)
_KEY_SUFFIXES = (".pem", ".key", ".p12")
_KEY_SUFFIX_ALTERNATIVES = "|".join(re.escape(s) for s in _KEY_SUFFIXES)

# Fast path of normalize_rel_path: plain ASCII segments (no control, backslash, colon, percent, '~'), none
# empty, none ending in '.' or ' ' (so no '.'/'..'), no Windows device name. Such a path is already canonical.
_FAST_SEGMENT = rf"(?!(?:{_DEVICE_NAMES})(?:[./]|\Z))[A-Za-z0-9._ +@-]*[A-Za-z0-9_+@-]"
_FAST_PATH = re.compile(rf"{_FAST_SEGMENT}(?:/{_FAST_SEGMENT})*", re.IGNORECASE)


def _protected_pattern(
    for_write: bool, *, start: str = "(?:^|/)", end: str = r"\Z", in_name: str = "[^/]", keys: bool = True
) -> str:
    """The protected list as one regex over a casefolded path (the rules of :func:`is_protected`).

    The defaults match one whole path. :func:`readable_names` scans many paths joined by newlines instead,
    each segment start after a literal "/": it passes ``start=""``, ``end="$"`` (MULTILINE),
    ``in_name="[^/\\n]"`` and scans the key-file suffixes on their own (``keys=False``)."""
    any_seg = "|".join(re.escape(s) for s in sorted(_PROTECTED_ANY_SEGMENT))
    gen = "|".join(re.escape(s) for s in sorted(_GENERATED_DIRS))
    names = "|".join(re.escape(s) for s in sorted(_CREDENTIAL_FILES | _LOCKFILES))
    env = rf"\.env(?:\.{in_name}*)?" if for_write else rf"\.env(?:\.(?!example{end}){in_name}*)?"
    key_files = f"{in_name}*(?:{_KEY_SUFFIX_ALTERNATIVES})|" if keys else ""
    return (
        rf"{start}(?:{any_seg})(?:/|{end})"
        rf"|{start}(?:{gen})/"
        rf"|{start}(?:{env}|{key_files}id_{in_name}*|{names}){end}"
    )


_PROTECTED_READ = re.compile(_protected_pattern(False))
_PROTECTED_WRITE = re.compile(_protected_pattern(True))


class PathDenied(Exception):
    """A path is not an allowed file. ``reason`` is a short log-only diagnostic (never sent to the model)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class AllowedFile:
    """A file that passed the filesystem policy: ``rel`` (normalized), ``path`` (root / rel), ``data`` (bytes)."""

    rel: str
    path: Path
    data: bytes


def normalize_rel_path(raw: str) -> str:
    """Return ``raw`` as a canonical relative POSIX path (NFC), or raise :class:`PathDenied`.

    Rejected (docs/design.md §7, §6 apply_patch path rules): non-strings, empty or over
    :data:`MAX_PATH_CHARS` characters, absolute paths, drive letters, any ``:``, backslashes, NUL and
    other control/format characters, percent-escapes (``%2e``), empty, ``.`` and ``..`` segments, and
    (Windows-specific, rejected everywhere) segments ending in a dot or space, device names and 8.3
    short names. Nothing is stripped or repaired: ``./a`` and ``a/`` are rejected, not rewritten.
    """
    if not isinstance(raw, str):
        raise PathDenied("not a string")
    if len(raw) <= MAX_PATH_CHARS and raw.isascii() and _FAST_PATH.fullmatch(raw):
        return raw
    path = unicodedata.normalize("NFC", raw)
    if not path or len(path) > MAX_PATH_CHARS:
        raise PathDenied("empty or too long")
    for ch in path:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            raise PathDenied("control character")
    if "\\" in path:
        raise PathDenied("backslash")
    if path.startswith("/"):
        raise PathDenied("absolute")
    if _DRIVE.match(path) or ":" in path:
        raise PathDenied("drive letter or colon")
    if _PERCENT_ESCAPE.search(path):
        raise PathDenied("percent escape")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise PathDenied("empty, '.' or '..' segment")
        if segment[-1] in ". " or _WIN_DEVICE.match(segment) or _WIN_SHORT_NAME.search(segment):
            raise PathDenied("segment that aliases another name on Windows")
    return path


def is_env_example(rel: str) -> bool:
    """True for ``.env.example`` in any directory (case-insensitive): readable, never writable."""
    return rel.rsplit("/", 1)[-1].casefold() == ".env.example"


def is_protected(rel: str, *, for_write: bool = False) -> bool:
    """Whether a normalized relative path is protected (docs/design.md §7), compared case-insensitively.

    Protected: any segment ``.git``, ``.spotpatch`` or ``node_modules``; a directory segment among the
    generated outputs (``dist build .vite coverage .next .nuxt .svelte-kit out``); file names ``.env`` and
    ``.env.*`` (``.env.example`` only when ``for_write``), ``*.pem *.key *.p12 id_*``, ``.npmrc .netrc
    .pypirc`` and the lockfiles. Pass a path from :func:`normalize_rel_path`.
    """
    return (_PROTECTED_WRITE if for_write else _PROTECTED_READ).search(rel.casefold()) is not None


def is_text(data: bytes) -> bool:
    """True for UTF-8 text: an optional leading BOM, no NUL byte, valid UTF-8 (docs/design.md §7)."""
    body = data[len(BOM) :] if data.startswith(BOM) else data
    if b"\x00" in body:
        return False
    try:
        body.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def is_readable_name(rel: str) -> bool:
    """Whether the relative path ``rel`` passes the name half of the read policy: it is already canonical
    (``normalize_rel_path(rel) == rel``) and not protected for reading (:func:`is_protected`). The
    filesystem half (:func:`load_allowed`) and git's half (:func:`is_ignored`) still apply. Never raises."""
    try:
        return normalize_rel_path(rel) == rel and not is_protected(rel)
    except PathDenied:
        return False


# readable_names' joined scan. Over "/" + "\n/".join(paths) every segment start follows a "/", so the
# protected list's leading "(?:^|/)" becomes a literal "/" that the regex engine finds quickly, and "$"
# (MULTILINE) ends each path. A device-name segment sends the batch to the per-path check (a fast-path
# segment never is one). The key-file branch (a last segment ending in .pem/.key/.p12) may start anywhere
# in a segment, so the engine would try it at every "/" and scan the segment each time (over a second at
# 200,000 paths): it is scanned on its own instead, as line ends (the last segment of each path).
_JOINED_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._ +@-/\n"
_JOINED_BAD = (b"//", b"/\n", b"\n/", b"\n\n", b"./", b".\n", b" /", b" \n")
_JOINED_PROTECTED = _protected_pattern(False, start="", end="$", in_name="[^/\\n]", keys=False)
_JOINED_SCAN = re.compile(
    rf"/(?:(?P<device>(?:{_DEVICE_NAMES})(?:[./\n]|\Z))|{_JOINED_PROTECTED})",
    _PROTECTED_READ.flags | re.MULTILINE,
)
_JOINED_KEY_SCAN = re.compile(f"(?:{_KEY_SUFFIX_ALTERNATIVES})$", re.MULTILINE)


def readable_names(raw: list[bytes]) -> list[str]:
    """The entries of ``raw`` (path bytes as git prints them) that decode as UTF-8 and pass
    :func:`is_readable_name`, decoded, in their order.

    The same decision per path as :func:`is_readable_name` (tests/tools/test_listing_fast_path.py compares
    them), but for a batch of plain ASCII paths (segments of ``[A-Za-z0-9._ +@-]``, the common listing)
    both the normalization and the protected check are a few passes over the joined batch, O(total
    bytes) with no call per path; any other batch takes the per-path check.
    """
    blob = b"\n".join(raw)
    if (
        not raw
        or blob.translate(None, _JOINED_CHARS)  # a character outside the fast set (so also non-ASCII, "\n")
        or blob.count(b"\n") != len(raw) - 1  # a "\n" inside a path
        or max(map(len, raw)) > MAX_PATH_CHARS
        or any(bad in blob for bad in _JOINED_BAD)
        or blob.startswith(b"/")
        or blob.endswith((b"/", b".", b" "))
    ):
        return _readable_names_per_path(raw)
    text = "/" + blob.decode("ascii").replace("\n", "\n/")
    hits: list[int] = []
    lowered = text.lower()
    for m in _JOINED_SCAN.finditer(lowered):
        if m.lastgroup == "device":
            return _readable_names_per_path(raw)
        hits.append(m.start())
    hits.extend(m.start() for m in _JOINED_KEY_SCAN.finditer(lowered))
    rels = text[1:].split("\n/")
    if not hits:
        return rels
    starts = list(itertools.accumulate((len(rel) + 2 for rel in rels[:-1]), initial=0))
    bad = {bisect.bisect_right(starts, pos) - 1 for pos in hits}
    return [rel for i, rel in enumerate(rels) if i not in bad]


def _readable_names_per_path(raw: list[bytes]) -> list[str]:
    kept: list[str] = []
    for item in raw:
        try:
            rel = item.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if is_readable_name(rel):
            kept.append(rel)
    return kept


def load_allowed(root: Path, raw: str, *, for_write: bool, max_bytes: int) -> AllowedFile:
    """Check ``raw`` against the whole filesystem policy and return the file's bytes.

    ``root`` is the worktree root; ``raw`` untrusted text; ``max_bytes`` the size bound in bytes
    (``editableFileMaxBytes``). Checks, in order: :func:`normalize_rel_path`; :func:`is_protected`
    (``for_write`` also refuses ``.env.example``); every component from ``root`` down is ``lstat``-ed and
    none may be a symlink (a dangling link counts); the file is opened without following links
    (``O_NOFOLLOW`` where the platform has it) and ``fstat`` must show a regular file of at most
    ``max_bytes`` with no other hard link (git never makes one; a check could, to a file outside); its
    realpath lies inside ``realpath(root)``; its bytes are UTF-8 text (:func:`is_text`).
    Git ignore rules are *not* checked here (see :func:`is_ignored`).

    Raises :class:`PathDenied` on any failure, including OS errors.
    """
    rel = normalize_rel_path(raw)
    if is_protected(rel, for_write=for_write):
        raise PathDenied("protected")
    path = root.joinpath(*rel.split("/"))
    try:
        current = root
        for segment in rel.split("/"):
            current = current / segment
            st = os.lstat(current)
            if stat.S_ISLNK(st.st_mode):
                raise PathDenied("symlink on the path")
        # `st` is bound: str.split always yields at least one segment (mypy cannot know that).
        if not stat.S_ISREG(st.st_mode):  # type: ignore[possibly-undefined]  # checked before open: a FIFO would block
            raise PathDenied("not a regular file")
        real_root = os.path.realpath(root)
        real = os.path.realpath(path)
        if os.path.commonpath([real_root, real]) != real_root or real == real_root:
            raise PathDenied("outside the root")
        flags = os.O_RDONLY
        for extra in ("O_NOFOLLOW", "O_NONBLOCK", "O_BINARY"):  # O_BINARY: Windows-specific
            flags |= getattr(os, extra, 0)
        fd = os.open(path, flags)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PathDenied("not a regular file")
            if st.st_nlink > 1:  # a hard link (made by a check) may be another file's bytes, outside the root
                raise PathDenied("hard link")
            if st.st_size > max_bytes:
                raise PathDenied("too big")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(max_bytes + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise PathDenied(f"os error {exc.errno}") from None
    except ValueError:  # Windows-specific: commonpath across drives
        raise PathDenied("outside the root") from None
    if len(data) > max_bytes:
        raise PathDenied("too big")
    if not is_text(data):
        raise PathDenied("not UTF-8 text")
    return AllowedFile(rel=rel, path=path, data=data)


def resolve_allowed(root: Path, rel: str, *, for_write: bool, max_bytes: int) -> Path:
    """The absolute path of an allowed file (same checks as :func:`load_allowed`); raises :class:`PathDenied`."""
    return load_allowed(root, rel, for_write=for_write, max_bytes=max_bytes).path


async def is_ignored(root: Path, rel: str) -> bool:
    """Whether git ignores the normalized path ``rel`` in the work tree at ``root`` (docs/design.md §7).

    Runs ``git check-ignore -q -- <rel>`` (fixed argv). Tracked files are never "ignored" (same rule as
    ``git ls-files --others --exclude-standard``, so this agrees with ``list_files``). Fails closed: any
    git error (exit code other than 0/1, e.g. a path beyond a symlink or inside a submodule) counts as
    ignored.
    """
    return await check_ignore(root, rel) != 1


async def check_ignore(root: Path, rel: str, *, no_index: bool = False) -> int:
    """The exit code of ``git check-ignore -q [--no-index] -- <rel>`` in ``root``: 0 ignored, 1 not ignored,
    anything else an error. With ``no_index`` git matches the exclude patterns alone: it neither reads the
    index (whose size grows with the repository) nor knows which paths are tracked or inside a submodule."""
    args = ["check-ignore", "-q", *(["--no-index"] if no_index else []), "--", rel]
    result = await run_git_process(args, cwd=root, read_only=True, max_bytes=64 * 1024)
    return -1 if result.returncode is None else result.returncode
