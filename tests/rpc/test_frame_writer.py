"""FrameWriter (rpc/server.py): frames leave in ``send`` order whether the sending thread writes them
itself (small frame, pipe has room) or the writer thread does (queue, large frame, full pipe), and
``send`` never blocks when the client stops reading."""

from __future__ import annotations

import os
import threading
import time

import pytest

from spotpatch_agent.rpc.framing import Frame, FrameDecoder
from spotpatch_agent.rpc.server import FrameWriter


def read_all(fd: int) -> list[dict]:
    decoder, out = FrameDecoder(max_body_bytes=1 << 24), []
    while chunk := os.read(fd, 65536):
        out += [item.value for item in decoder.feed(chunk) if isinstance(item, Frame)]
    return out


def test_mixed_sizes_keep_send_order_through_a_full_pipe() -> None:
    r, w = os.pipe()
    writer = FrameWriter(w)
    sizes = [10, 9000, 10, 10, 200_000, 10] * 40  # small frames go direct, large ones through the thread
    started = time.monotonic()
    for n, size in enumerate(sizes):  # nobody reads yet: the pipe fills and frames queue up
        writer.send({"n": n, "pad": "x" * size})
    assert time.monotonic() - started < 5, "send blocked on a client that does not read"
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(read_all(r)))
    reader.start()
    writer.close(timeout=30)
    os.close(w)
    reader.join(30)
    os.close(r)
    assert [m["n"] for m in got] == list(range(len(sizes)))


def test_frames_from_many_threads_each_stay_in_order() -> None:
    r, w = os.pipe()
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(read_all(r)))
    reader.start()
    writer = FrameWriter(w)

    def produce(t: int) -> None:
        for i in range(2000):
            writer.send({"t": t, "i": i, "pad": "y" * (i % 7) * 1000})

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    writer.close(timeout=30)
    os.close(w)
    reader.join(30)
    os.close(r)
    assert len(got) == 8000
    for t in range(4):
        assert [m["i"] for m in got if m["t"] == t] == list(range(2000))


@pytest.mark.parametrize("first", ["small", "large"])
def test_a_client_that_went_away_does_not_raise(first: str) -> None:
    """A closed pipe (EPIPE) makes ``send`` drop frames, neither raising nor blocking, whether the first
    write that fails is the sending thread's own (a small frame) or the writer thread's (a large one); the
    writer thread then ends and ``close`` returns. The sends run in a thread joined with a bound: a ``send``
    that blocks fails the test instead of hanging it."""
    r, w = os.pipe()
    os.close(r)
    before = set(threading.enumerate())
    writer = FrameWriter(w)
    [writer_thread] = set(threading.enumerate()) - before
    errors: list[BaseException] = []

    def send_all() -> None:
        try:
            for n in range(50) if first == "small" else reversed(range(50)):  # 0: a small frame
                writer.send({"n": n, "pad": "z" * (n * 500)})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    sender.join(10)
    assert not sender.is_alive(), "send blocked on a client that went away"
    assert errors == []
    writer.close(timeout=10)
    assert not writer_thread.is_alive(), "the writer thread did not end after the client went away"
    os.close(w)


def test_a_non_blocking_pipe_loses_nothing() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)  # e.g. a parent that made the shared pipe non-blocking
    writer = FrameWriter(w)
    for n in range(300):
        writer.send({"n": n, "pad": "w" * (n % 5) * 3000})
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(read_all(r)))
    reader.start()
    writer.close(timeout=30)
    os.close(w)
    reader.join(30)
    os.close(r)
    assert [m["n"] for m in got] == list(range(300))
