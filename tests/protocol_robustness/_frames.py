"""Hypothesis strategies for JSON-RPC frames, valid and hostile: the fuzz test's generator, also
fed to the decoder's chunking test."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import strategies as st

from spotpatch_agent.rpc.framing import encode_frame

MAX = 64 * 1024
FORBIDDEN = ("shutdown", "exit")


_ids = itertools.count(1)


def uid() -> int:
    return next(_ids)


KNOWN = ["job/list", "provider/list", "job/get", "job/events", "job/diff", "job/audit", "job/cancel",
         "job/apply", "job/revert", "job/close", "prompt/render", "provider/probe", "job/create",
         "initialize", "health/get"]


UNKNOWN = ["no/such", "Job/List", "job/list ", "", "$/unknown", "rpc.discover", "\u0000", "job/l\u00efst",
           "exit/now", "/etc/passwd", "\ud800", "x" * 3000]


NOTIFICATIONS = ["initialized", "$/cancelRequest", "$/setTrace", "$/progress", "textDocument/didOpen",
                 "no/such/notification", "$/logTrace"]


def _safe(name: str) -> str:
    return name + "!" if name in FORBIDDEN else name


methods = st.one_of(st.sampled_from(KNOWN), st.sampled_from(UNKNOWN), st.text(max_size=12).map(_safe))


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    st.text(max_size=12), st.sampled_from(["\ud800", "/home/user/.ssh/id_rsa", "sk-" + "x" * 40]))


junk_json = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10)


params = st.one_of(
    st.dictionaries(st.sampled_from(["jobId", "afterSeq", "annotation", "modelProfileId", "applyMode", "x"]),
                    junk_json, max_size=4),
    st.fixed_dictionaries({"jobId": st.text(max_size=20)}),
    st.fixed_dictionaries({"jobId": st.text(max_size=10), "afterSeq": st.integers(-5, 2**64)}),
    st.fixed_dictionaries({"annotation": junk_json, "modelProfileId": st.text(max_size=5)}),
    st.fixed_dictionaries({}),
)


bad_ids = st.one_of(st.booleans(), st.floats(), st.none(), st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def valid_id(draw: st.DrawFn) -> Any:
    """A fresh id (unique in the session: a counter). Its serialised length never depends on the counter,
    so that Hypothesis sees the same draws when it replays an example."""
    n = 10**12 + uid()
    kind = draw(st.sampled_from(["int", "str", "big", "neg", "unicode"]))
    return {"int": n, "str": f"fz-{n}", "big": 10**30 + n, "neg": -n,
            "unicode": f"\u4fa1-{n}-\ud83c\udf89" if draw(st.booleans()) else f"\ud800-{n}"}[kind]


@st.composite
def request(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(valid_id()), "method": draw(methods)}
    if draw(st.booleans()):
        msg["params"] = draw(params)
    if draw(st.integers(0, 9)) == 0:
        msg["extra"] = draw(junk_json)
    return msg


@st.composite
def notification(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(st.one_of(st.sampled_from(NOTIFICATIONS), methods))
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if method == "$/cancelRequest":
        msg["params"] = draw(st.one_of(st.fixed_dictionaries({"id": st.one_of(valid_id(), bad_ids)}),
                                       st.just({}), junk_json))
    elif draw(st.booleans()):
        msg["params"] = draw(st.one_of(params, junk_json))
    return msg


@st.composite
def wrong_types(draw: st.DrawFn) -> Any:
    """Objects with a wrong ``id``/``method``/``params``/``jsonrpc``, responses, member-less objects."""
    kind = draw(st.sampled_from(["id", "method", "params", "jsonrpc", "no-method", "response", "empty"]))
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(valid_id()), "method": draw(methods)}
    if kind == "id":
        msg["id"] = draw(bad_ids)
    elif kind == "method":
        msg["method"] = draw(st.one_of(st.integers(), st.none(), st.booleans(),
                                       st.lists(st.text(max_size=3), max_size=2),
                                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
    elif kind == "params":
        msg["params"] = draw(st.one_of(st.lists(junk_json, max_size=3), st.text(max_size=5), st.integers(),
                                       st.booleans()))
    elif kind == "jsonrpc":
        msg["jsonrpc"] = draw(st.one_of(st.sampled_from(["1.0", "2", "2.0 ", "", "3.0"]), st.just(2.0), st.none()))
        if draw(st.booleans()):
            del msg["jsonrpc"]
    elif kind == "no-method":
        del msg["method"]
        if draw(st.booleans()):
            del msg["id"]
    elif kind == "response":
        del msg["method"]
        msg[draw(st.sampled_from(["result", "error"]))] = draw(junk_json)
    else:
        msg = draw(st.dictionaries(st.text(max_size=5), junk_json, max_size=3))
    return msg


@st.composite
def non_object(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["scalar", "batch", "empty-batch", "junk"]))
    if kind == "scalar":
        return draw(scalars)
    if kind == "batch":
        return draw(st.lists(st.one_of(request(), notification(), junk_json), min_size=1, max_size=4))
    if kind == "empty-batch":
        return []
    return draw(junk_json)


def dumps(value: Any, ascii_only: bool) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate with ensure_ascii=False: send the escaped form
        return json.dumps(value, ensure_ascii=True).encode("ascii")


@st.composite
def body(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["request"] * 6 + ["notification"] * 2 + ["wrong"] * 3 + ["non-object"] * 2
                                + ["deep", "utf8", "bad-json", "huge", "at-max", "empty"]))
    if kind == "deep":
        # Python's json decoder gives up at about the interpreter's recursion limit (1000 in the engine;
        # Hypothesis raises it in this process while it runs): depths between are ambiguous, so avoid them.
        depth = draw(st.sampled_from([50, 400, 10_000, 30_000]))
        open_, close = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        core = (open_ * depth + "1" + close * depth) if draw(st.booleans()) else (open_ * depth)
        return core.encode()
    if kind == "huge":  # over the configured maximum, actually sent
        msg = dumps(draw(request()), True)
        return msg + b" " * (MAX + draw(st.integers(1, 64 * 1024)) - len(msg))
    if kind == "at-max":
        msg = dumps(draw(request()), True)
        return msg + b"\n" * (MAX - len(msg))
    if kind == "empty":
        return b""
    value = {"request": request, "notification": notification, "wrong": wrong_types,
             "non-object": non_object}.get(kind, request)()
    raw = dumps(draw(value), draw(st.booleans()))
    if kind == "utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\x80", b"\xf4\x90\x80\x80",
                                    b"\xe4\xbe", b"\xc3"]))
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + bad + raw[at:]
    elif kind == "bad-json":
        at = draw(st.integers(0, len(raw)))
        raw = draw(st.sampled_from([raw[:at], raw[:at] + b"}" + raw[at:], raw + b",", raw + raw, b"{" + raw,
                                    raw.replace(b":", b"=", 1), raw + b"\x00"]))
    return raw


NAMES = ["Content-Length", "content-length", "CONTENT-LENGTH", "Content-length", "cOnTeNt-LeNgTh"]
SEPARATORS = [": ", ":", ":   ", ":\t", " : ", ": \t "]
EXTRA = [b"Content-Type: application/vscode-jsonrpc; charset=utf-8", b"content-type: application/json",
         b"X-Extra: 1", b"X-Empty:", b"Accept: */*", b"X-Unicode: \xc3\xa9"]


@st.composite
def frame(draw: st.DrawFn) -> bytes:
    """One generated frame: a body and a header block, each possibly mutated, maybe glued to junk."""
    if draw(st.integers(0, 24)) == 0:  # raw junk, sometimes with protocol-looking fragments
        parts = draw(st.lists(st.one_of(st.binary(max_size=40), st.sampled_from(
            [b"Content-Length:", b"Content-Length: 12", b"\r\n", b"\r\n\r\n", b"\n\n", b"{", b"}", b"12", b"\r"])),
            max_size=8))
        return b"".join(parts)
    if draw(st.integers(0, 14)) == 0:  # a request and its $/cancelRequest in one piece
        req = draw(request())
        cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": req["id"]}}
        return encode_frame(req) + encode_frame(cancel)
    data = draw(body())
    n = len(data)
    length_kind = draw(st.sampled_from(["right"] * 12 + ["missing", "duplicate", "conflict", "negative", "text",
                                                         "short", "long", "zeros", "over-max"]))
    values: list[str] = [str(n)]
    if length_kind == "missing":
        values = []
    elif length_kind == "duplicate":
        values = [str(n), str(n)]
    elif length_kind == "conflict":
        values = [str(n), str(n + draw(st.integers(1, 5)))]
    elif length_kind == "negative":
        values = [f"-{n}"]
    elif length_kind == "text":
        values = [draw(st.sampled_from(["abc", f"{n}a", "0x1f", "1e2", "", f"+{n}", f"{n}.0", "\u0663",
                                        f"{n} {n}", "-0"]))]
    elif length_kind == "short":
        values = [str(max(0, n - draw(st.integers(1, 40))))]
    elif length_kind == "long":
        values = [str(n + draw(st.integers(1, 3 * MAX)))]
    elif length_kind == "zeros":
        values = ["000" + str(n)]
    elif length_kind == "over-max":
        values = [str(MAX + draw(st.integers(1, 2 * MAX)))]
    name = draw(st.sampled_from(NAMES))
    lines = [f"{name}{draw(st.sampled_from(SEPARATORS))}{v}".encode() for v in values]
    extras = draw(st.lists(st.sampled_from(EXTRA), max_size=2))
    for extra in extras:
        lines.insert(draw(st.integers(0, len(lines))), extra)
    if not lines:
        lines = [b"X-Nothing: here"]
    eol = draw(st.sampled_from([b"\r\n"] * 6 + [b"\n", b"\r\r\n", b"mixed"]))
    if eol == b"mixed":
        block = b"".join(line + draw(st.sampled_from([b"\r\n", b"\n"])) for line in lines) + b"\n"
    else:
        block = eol.join(lines) + eol + eol
    prefix = draw(st.sampled_from([b""] * 8 + [b"\r\n", b"\n\n", b"junk", b"\x00\xff", b"}\r\n"]))
    return prefix + block + data
