"""The frame decoder's output must not depend on how ``os.read`` happened to split the stream.

The fuzz test mirrors the engine's decoder in-process to know what the engine owes; that only works if
decoding is chunking-invariant — and a client cannot control how a pipe delivers its bytes either. Here
the fuzz test's frames (several at once, then a valid frame) are decoded once whole and once cut at
random points, and both results must be equal, fault for fault. (Found by the fuzz test: a header block
whose blank line came more than 8 KiB later was parsed as one block when it arrived in one read — eating
the next frame's header — but faulted as too long when it arrived in pieces.)
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotpatch_agent.rpc.framing import MAX_HEADER_BYTES, FrameDecoder, encode_frame
from tests.protocol_robustness._frames import MAX, frame

GOOD = encode_frame({"jsonrpc": "2.0", "id": "good", "method": "job/list", "params": {}})


def decode(chunks: list[bytes]) -> tuple[list, tuple[str, int]]:
    decoder = FrameDecoder(max_body_bytes=MAX)
    out = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out, decoder.pending()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(frame(), min_size=1, max_size=3), st.lists(st.integers(0, 2**32), max_size=12))
def test_decoding_does_not_depend_on_read_boundaries(frames: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frames) + b"\r\n\r\n" + GOOD
    assert decode(split(data, cuts)) == decode([data])


def test_blank_line_far_behind_a_header_is_a_fault_in_one_read_too() -> None:
    junk_header = b"Content-Length: 5\r\r\nX: y\r\r\n\r\r\n" + b"[" * (MAX_HEADER_BYTES + 100)
    whole, _ = decode([junk_header + GOOD])
    pieces, _ = decode(split(junk_header + GOOD, [4096, MAX_HEADER_BYTES + 10]))
    assert whole == pieces
    assert whole[-1].value["id"] == "good"  # the next frame survives


def test_resync_across_a_read_boundary_inside_the_header_name() -> None:
    bad = b"Content-Length: x\r\n\r\njunk"
    header = b"Content-Length   :"
    body = GOOD.split(b"\r\n\r\n", 1)[1]
    tail = header + b" %d\r\n\r\n" % len(body) + body
    data = bad + tail
    for cut in range(len(bad), len(bad) + len(header) + 1):
        assert decode([data[:cut], data[cut:]]) == decode([data]), cut
