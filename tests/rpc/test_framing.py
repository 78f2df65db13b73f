"""Unit tests of the incremental frame decoder (docs/design.md §3 framing, python-lsp-jsonrpc faults)."""

from __future__ import annotations

import json

from spotpatch_agent.rpc.framing import Frame, FrameDecoder, FrameFault, encode_frame

GOOD = encode_frame({"jsonrpc": "2.0", "id": 1, "method": "x"})


def decode(*chunks: bytes, max_body: int = 1024) -> list[Frame | FrameFault]:
    d = FrameDecoder(max_body_bytes=max_body)
    out: list[Frame | FrameFault] = []
    for c in chunks:
        out += d.feed(c)
    return out


def test_content_length_counts_bytes_for_cjk_and_emoji() -> None:
    msg = {"text": "価格を二桁に 🎉 café"}
    frame = encode_frame(msg)
    body = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()
    assert frame.startswith(b"Content-Length: %d\r\n\r\n" % len(body))
    assert len(body) > len(json.dumps(msg, ensure_ascii=False, separators=(",", ":")))
    assert decode(frame) == [Frame(msg)]


def test_byte_at_a_time_feeding() -> None:
    frame = encode_frame({"a": "日本"})
    assert decode(*[frame[i:i + 1] for i in range(len(frame))]) == [Frame({"a": "日本"})]


def test_lowercase_header_and_content_type_first_are_accepted() -> None:
    body = b'{"a":1}'
    raw = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 7\r\n\r\n" + body
    assert decode(raw) == [Frame({"a": 1})]


def test_bad_content_length_is_a_fault_then_resyncs() -> None:
    out = decode(b"Content-Length: abc\r\n\r\n{}" + GOOD)
    assert isinstance(out[0], FrameFault) and out[0].code == -32700
    assert out[1:] == [Frame({"jsonrpc": "2.0", "id": 1, "method": "x"})]


def test_missing_content_length_is_a_fault_then_resyncs() -> None:
    out = decode(b"X-Other: 1\r\n\r\n{\"a\":1}" + GOOD)
    assert [type(o) for o in out] == [FrameFault, Frame]


def test_negative_and_conflicting_lengths() -> None:
    assert isinstance(decode(b"Content-Length: -3\r\n\r\n")[0], FrameFault)
    assert isinstance(decode(b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n")[0], FrameFault)


def test_oversized_body_is_skipped_without_buffering() -> None:
    out = decode(b"Content-Length: 5000\r\n\r\n", b"x" * 5000, GOOD, max_body=100)
    assert isinstance(out[0], FrameFault) and out[0].code == -32600
    assert out[1] == Frame({"jsonrpc": "2.0", "id": 1, "method": "x"})


def test_invalid_utf8_and_invalid_json_are_parse_errors() -> None:
    bad_utf8 = b"\xff\xfe"
    out = decode(b"Content-Length: 2\r\n\r\n" + bad_utf8 + GOOD)
    assert isinstance(out[0], FrameFault) and out[0].code == -32700
    assert isinstance(out[1], Frame)
    out = decode(b"Content-Length: 3\r\n\r\n{x}" + GOOD)
    assert [type(o) for o in out] == [FrameFault, Frame]


def test_non_object_values_are_frames_for_the_guard() -> None:
    assert decode(b"Content-Length: 2\r\n\r\n42") == [Frame(42)]
    assert decode(b"Content-Length: 2\r\n\r\n[]") == [Frame([])]


def test_garbage_without_headers_then_good_frame() -> None:
    out = decode(b"hello world, no header here" + GOOD)
    assert isinstance(out[-1], Frame)
    assert all(isinstance(o, FrameFault) for o in out[:-1]) and out[:-1]


def test_short_length_costs_one_fault_then_next_frame() -> None:
    out = decode(b"Content-Length: 3\r\n\r\n{\"a\":1}" + GOOD)
    assert isinstance(out[0], FrameFault)
    assert out[-1] == Frame({"jsonrpc": "2.0", "id": 1, "method": "x"})


def test_one_bad_header_alone_costs_exactly_one_fault() -> None:
    d = FrameDecoder(max_body_bytes=1024)
    out = d.feed(b"Content-Length: abc\r\n\r\n")
    out += d.feed(b"")
    out += d.feed(GOOD)
    assert [type(o) for o in out] == [FrameFault, Frame]


def test_conflicting_lengths_do_not_swallow_the_next_frame() -> None:
    out = decode(b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}" + GOOD)
    assert [type(o) for o in out] == [FrameFault, Frame]


def test_junk_line_before_a_real_header_recovers_that_frame() -> None:
    out = decode(b"junk\r\n" + GOOD)
    assert [type(o) for o in out] == [FrameFault, Frame]


def test_every_bad_block_fed_bytewise_is_one_fault_each() -> None:
    bad = b"Content-Length: x\r\n\r\n{}"
    stream = bad + GOOD + bad + GOOD
    out = decode(*[stream[i:i + 1] for i in range(len(stream))])
    assert [type(o) for o in out] == [FrameFault, Frame, FrameFault, Frame]
