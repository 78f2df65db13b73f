"""Fuzzing the stdio framing and the JSON-RPC guard of ONE real ``spotpatch-agent serve`` (issue 3).

The engine is started with ``--max-frame-bytes 65536`` and initialized on a temp git repo. Hypothesis
(derandomized: the same frames on every run) generates :data:`FRAMES` frames — random and mutated header
blocks (name case, order, extra headers, bare ``\\n``, missing / duplicate / conflicting / negative /
non-numeric / too short / too long ``Content-Length``), invalid UTF-8, deeply nested and junk JSON,
non-object JSON, batches, requests and notifications with wrong types for ``id``/``method``/``params``,
unknown methods, bodies over the maximum and raw junk. After EVERY frame a sentinel request with a
unique id is sent and must be answered, and the engine must still be running. At the end stdout must have
parsed without a single fault and the replies must be exactly the expected ones.

Resynchronisation. A ``Content-Length`` stream cannot be resynchronised from the outside by the engine
alone: a header that announces more bytes than were sent makes the decoder take the next bytes — our
sentinel — as body, and half a header block glues itself to the sentinel's header. So before the sentinel
the test pays what the decoder is still owed. It mirrors the engine's decoder in-process (a
:class:`~spotpatch_agent.rpc.framing.FrameDecoder` fed exactly the same bytes) and asks it
:meth:`~spotpatch_agent.rpc.framing.FrameDecoder.pending`: missing body bytes are sent as spaces, an
unfinished header block is ended with ``\\r\\n\\r\\n`` (repeat until the mirror stands on a frame
boundary or is discarding input up to the next ``Content-Length``, which the sentinel starts with). The
mirror then must decode the sentinel as the sentinel, which proves the padding right. If the engine ever
disagreed with the mirror (e.g. its decoding depended on how ``os.read`` split the stream), the sentinel
would not be answered or the counts below would differ.

Expected replies. Each frame the mirror decodes is classified by the guard's rules (docs/design.md §3):
a framing fault, a non-object or a batch gets one error with ``id: null``; an object with a bad
``jsonrpc``/``method``/``id`` gets one error (with its id when that id is a string or integer); a
response object and a notification get nothing; a request (unique id: every generated id comes from one
counter) gets exactly one reply, result or error. At the end the multiset of reply ids and the codes of the
``id: null`` errors must equal the expected ones exactly. Generated frames never carry ``shutdown`` or
``exit`` (asserted on the mirror's output): those would end the session on purpose.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from spotpatch_agent.rpc.errors import MAX_ERROR_MESSAGE
from spotpatch_agent.rpc.framing import Frame, FrameDecoder, FrameFault, encode_frame
from tests.conftest import make_repo
from tests.protocol_robustness._support import Engine, id_key

#: Frames checked in the default run; SPOTPATCH_FUZZ_FRAMES=N runs N instead (e.g. 20000 for a long soak),
#: SPOTPATCH_FUZZ_SEED=S explores other frames (the default run is derandomized: the same on every run).
DEFAULT_FRAMES = 2000
FRAMES = int(os.environ.get("SPOTPATCH_FUZZ_FRAMES") or DEFAULT_FRAMES)
SEED = os.environ.get("SPOTPATCH_FUZZ_SEED")
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


# ---------------------------------------------------------------------------------------------- expectations


def expected_reply(value: Any) -> str | None:
    """The reply id the guard owes for one decoded frame (``"null"`` for an id-less error), or None."""
    if not isinstance(value, dict):
        return "null"  # a batch or a non-object: -32600
    has_id = "id" in value
    msg_id = value.get("id")
    id_ok = not has_id or (isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool))
    reply = id_key(msg_id) if has_id and id_ok else "null"
    if has_id and "method" not in value and ("result" in value or "error" in value):
        return None  # a response to a request the engine never sent: ignored
    if value.get("jsonrpc") != "2.0" or "method" not in value:
        return reply
    if not isinstance(value["method"], str) or not id_ok:
        return reply
    assert value["method"] not in FORBIDDEN, f"the generator produced {value['method']!r}; fix it"
    return reply if has_id else None  # a request gets one reply; a notification none


class Expectations:
    def __init__(self) -> None:
        self.replies: Counter[str] = Counter()
        self.null_codes: Counter[int] = Counter()

    def add(self, items: list[Frame | FrameFault]) -> None:
        for item in items:
            if isinstance(item, FrameFault):
                self.replies["null"] += 1
                self.null_codes[item.code] += 1
                continue
            key = expected_reply(item.value)
            if key is None:
                continue
            self.replies[key] += 1
            if key == "null":  # the guard's id-less errors (batch, non-object, bad id/method/jsonrpc)
                self.null_codes[-32600] += 1


def resync(mirror: FrameDecoder, expect: Expectations) -> bytes:
    """The bytes that bring the decoder (mirrored in ``mirror``) back to a frame boundary."""
    out = bytearray()
    for _ in range(50):
        state, size = mirror.pending()
        if state in ("idle", "sync"):
            return bytes(out)
        pad = b" " * size if state == "body" else b"\r\n\r\n"
        assert len(out) + len(pad) < 8 * 1024 * 1024, "the generator announced an unpayable body"
        out += pad
        expect.add(mirror.feed(pad))
    raise AssertionError(f"the mirror decoder did not come back to a frame boundary: {mirror.pending()}")


# ---------------------------------------------------------------------------------------------- the test


def test_fuzzed_frames_never_kill_hang_or_desync_the_engine(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n", "src/app.ts": "export const x = 1;\n"})
    eng = Engine("--max-frame-bytes", str(MAX))
    mirror = FrameDecoder(max_body_bytes=MAX)
    expect = Expectations()
    checked = 0
    started = time.monotonic()
    try:
        init = eng.initialize(root)
        assert init["protocolVersion"] == "0.1"
        expect.replies.update(eng.reply_id_counts())  # the initialize request

        @settings(max_examples=FRAMES, deadline=None, derandomize=SEED is None, database=None,
                  phases=[Phase.explicit, Phase.generate],  # no shrinking against a shared, stateful engine
                  suppress_health_check=list(HealthCheck))
        @given(frame())
        def one_frame(data: bytes) -> None:
            nonlocal checked
            expect.add(mirror.feed(data))
            pad = resync(mirror, expect)
            sentinel_id = f"sentinel-{uid()}"  # drawn outside Hypothesis: any length
            sentinel = encode_frame({"jsonrpc": "2.0", "id": sentinel_id, "method": "job/list", "params": {}})
            got = mirror.feed(sentinel)
            sentinel_body = sentinel.split(b"\r\n\r\n", 1)[1]
            assert [i for i in got if isinstance(i, Frame)] == [Frame(json.loads(sentinel_body))], got
            expect.add(got)
            eng.send_raw(data + pad + sentinel)
            reply = eng.response(sentinel_id, timeout=15)
            assert reply.get("result") == {"jobs": []}, (data[:300], reply)
            # Id-less errors are sent by the reader before it dispatches the sentinel: all of them are in.
            assert eng.null_id_error_codes() == expect.null_codes, (data[:300], pad[:20])
            assert eng.proc.poll() is None, "the engine died"
            checked += 1

        if SEED is not None:
            one_frame = seed(int(SEED))(one_frame)
        one_frame()
        assert checked >= FRAMES, f"only {checked} of {FRAMES} frames were checked"
        assert checked >= DEFAULT_FRAMES or "SPOTPATCH_FUZZ_FRAMES" in os.environ

        # Every reply that is owed arrives (slow handlers such as health/get finish after their sentinel).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = eng.reply_id_counts()
            if all(got[k] >= v for k, v in expect.replies.items()):
                break
            time.sleep(0.05)
        # A last sentinel: a duplicate of any reply above would have been written before its answer.
        final = f"sentinel-final-{uid()}"
        eng.send_raw(encode_frame({"jsonrpc": "2.0", "id": final, "method": "job/list", "params": {}}))
        assert eng.response(final, timeout=15).get("result") == {"jobs": []}
        expect.replies[id_key(final)] += 1
        got = eng.reply_id_counts()
        missing = {k: v for k, v in expect.replies.items() if got[k] < v}
        extra = {k: got[k] - expect.replies[k] for k in got if got[k] > expect.replies[k]}
        assert not missing and not extra, (f"missing replies {[(k, v, got[k]) for k, v in missing.items()][:10]}, "
                                           f"extra {list(extra.items())[:10]}")
        assert eng.null_id_error_codes() == expect.null_codes
        # Errors are bounded and never echo an absolute path the client sent (docs/design.md §3).
        errors = [m["error"] for m in eng.messages if "error" in m]
        assert max(len(e["message"]) for e in errors) <= MAX_ERROR_MESSAGE
        assert not [e for e in errors if "/etc/passwd" in e["message"] or "/home/user" in e["message"]]
        assert eng.proc.poll() is None
    finally:
        eng.stop()
    assert eng.stdout_faults == [], "stdout carried something that is not a frame"
    assert eng.proc.returncode == 0
    elapsed = time.monotonic() - started
    print(f"\nfuzz: {checked} frames, {sum(expect.replies.values())} replies, "
          f"{sum(eng.null_id_error_codes().values())} id-less errors, {elapsed:.1f} s")
