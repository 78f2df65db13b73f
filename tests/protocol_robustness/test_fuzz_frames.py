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

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from spotpatch_agent.rpc.errors import MAX_ERROR_MESSAGE
from spotpatch_agent.rpc.framing import Frame, FrameDecoder, FrameFault, encode_frame
from tests.conftest import make_repo
from tests.protocol_robustness._frames import FORBIDDEN, MAX, frame, uid
from tests.protocol_robustness._support import Engine, id_key

#: Frames checked in the default run; SPOTPATCH_FUZZ_FRAMES=N runs N instead (e.g. 20000 for a long soak),
#: SPOTPATCH_FUZZ_SEED=S explores other frames (the default run is derandomized: the same on every run).
DEFAULT_FRAMES = 2000
FRAMES = int(os.environ.get("SPOTPATCH_FUZZ_FRAMES") or DEFAULT_FRAMES)
SEED = os.environ.get("SPOTPATCH_FUZZ_SEED")


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
