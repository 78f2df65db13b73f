"""The engine's stdio JSON-RPC benchmarks (issue 3), each next to a baseline measured in the same run.

(a) ``job/list`` round trip over a real ``spotpatch-agent serve`` pipe vs ``echo_server.py``;
(b) ``job/event`` notification throughput (``$/spotpatch/benchEvents``, ``SPOTPATCH_BENCH=1``) vs the echo
    server's raw frame throughput;
(c) cold start (spawn → ``initialize`` result) vs ``python -c pass`` and the echo server's spawn → first reply.

The client is synchronous and thread-free (one ``os.write`` per request, ``os.read`` until the reply's frame
is complete), so the same client cost is in every figure and its baseline. Usage: see README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.engine_client import engine_command

ECHO_SERVER = Path(__file__).with_name("echo_server.py")
BENCH_METHOD = "$/spotpatch/benchEvents"

#: A ``job/event`` shaped like the engine's (for the echo server's raw frame throughput).
EVENT_TEMPLATE = {"jobId": "job_bench0123456789ab", "seq": 0, "at": "2026-11-02T10:11:12.345Z", "kind": "activity",
                  "phase": "finished", "tool": "read_file", "toolCallId": "call_1234", "turn": 3,
                  "path": "src/App.tsx", "ok": True, "durationMs": 1}

GIT_ENV = {"GIT_AUTHOR_NAME": "SpotPatch Bench", "GIT_AUTHOR_EMAIL": "bench@spotpatch.invalid",
           "GIT_COMMITTER_NAME": "SpotPatch Bench", "GIT_COMMITTER_EMAIL": "bench@spotpatch.invalid",
           "GIT_CONFIG_NOSYSTEM": "1"}


# ---------------------------------------------------------------------------------------------- client


class BenchError(RuntimeError):
    pass


class Peer:
    """A framed JSON-RPC peer on a subprocess pipe, driven synchronously from this thread."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, stderr: Any = None) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr if stderr is not None else subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        self._next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":")).encode()
        view = memoryview(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        while view:
            view = view[os.write(self._in, view):]

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        return self._next_id

    def recv(self) -> dict[str, Any]:
        """The next message (blocks); raises :class:`BenchError` at EOF."""
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                length = -1
                for line in self._buf[:end].split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length < 0:
                    raise BenchError(f"frame without Content-Length: {self._buf[:200]!r}")
                stop = end + 4 + length
                if len(self._buf) >= stop:
                    body, self._buf = self._buf[end + 4:stop], self._buf[stop:]
                    return json.loads(body)
            chunk = os.read(self._out, 262144)
            if not chunk:
                raise BenchError(f"the server closed its stdout (exit code {self.proc.poll()})")
            self._buf += chunk

    def reply(self, rid: int, on_notification: Callable[[dict[str, Any]], None] | None = None) -> Any:
        """Read until the reply to ``rid``; notifications go to ``on_notification``; errors raise."""
        while True:
            msg = self.recv()
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise BenchError(f"request {rid} failed: {msg['error']}")
                return msg["result"]
            if on_notification is not None and "id" not in msg:
                on_notification(msg)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.reply(self.request(method, params))

    def close(self, *, lsp: bool) -> None:
        """``shutdown`` → ``exit`` for the engine (``lsp``), else EOF; kill if it does not end."""
        try:
            if lsp and self.proc.poll() is None:
                self.call("shutdown")
                self.send({"jsonrpc": "2.0", "method": "exit"})
        except (BenchError, OSError):
            pass
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        if args[0] == "add":
            (root / "README.md").write_text("bench\n")
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def initialize_params(root: Path) -> dict[str, Any]:
    return {"protocolVersion": "0.1", "processId": os.getpid(), "clientInfo": {"name": "spotpatch-bench"},
            "projectRoot": str(root), "config": {}}


class Engine(Peer):
    def __init__(self, root: Path, log: Any, *, bench: bool = False) -> None:
        env = {"SPOTPATCH_BENCH": "1"} if bench else {}
        super().__init__(engine_command(), env=env, stderr=log)
        self.call("initialize", initialize_params(root))

    def close(self) -> None:  # type: ignore[override]
        super().close(lsp=True)


class Echo(Peer):
    def __init__(self) -> None:
        super().__init__([sys.executable, str(ECHO_SERVER)])

    def close(self) -> None:  # type: ignore[override]
        super().close(lsp=False)


# ---------------------------------------------------------------------------------------------- measurements


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def round_trips(peer: Peer, method: str, count: int) -> list[float]:
    """Seconds per sequential request/reply of ``method``."""
    times = []
    clock = time.perf_counter
    for _ in range(count):
        t0 = clock()
        peer.call(method)
        times.append(clock() - t0)
    return times


#: Measurements alternate between the engine and its baseline in this many blocks, so that a noisy
#: moment (other processes on the machine) hits both alike.
BLOCKS = 10


def engine_events(engine: Engine, count: int) -> float:
    """Seconds from sending ``benchEvents {count}`` to its reply, checking every event arrived in order."""
    seqs: list[int] = []

    def on_event(msg: dict[str, Any]) -> None:
        if msg.get("method") == "job/event":
            seqs.append(msg["params"]["seq"])

    t0 = time.perf_counter()
    result = engine.reply(engine.request(BENCH_METHOD, {"count": count}), on_event)
    elapsed = time.perf_counter() - t0
    if seqs != list(range(1, count + 1)) or result["lastSeq"] != count:
        raise BenchError(f"benchEvents {count}: got {len(seqs)} events, lastSeq {result['lastSeq']}")
    return elapsed


def echo_events(echo: Echo, count: int) -> float:
    got = 0

    def on_event(_msg: dict[str, Any]) -> None:
        nonlocal got
        got += 1

    t0 = time.perf_counter()
    echo.reply(echo.request("bench/flood", {"count": count, "template": EVENT_TEMPLATE}), on_event)
    elapsed = time.perf_counter() - t0
    if got != count:
        raise BenchError(f"echo flood {count}: got {got} frames")
    return elapsed


def cold_python() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def cold_echo() -> float:
    echo = Echo()
    try:
        echo.call("initialize", {})
        return time.perf_counter() - echo.started
    finally:
        echo.close()


def cold_engine(root: Path, log: Any) -> float:
    engine = Engine(root, log)  # the constructor returns once the initialize result is parsed
    elapsed = time.perf_counter() - engine.started
    engine.close()
    return elapsed


# ---------------------------------------------------------------------------------------------- report


class Row:
    def __init__(self, metric: str, unit: str, ours: float, base: float, base_name: str,
                 target: str = "-", ok: bool | None = None, higher_is_better: bool = False) -> None:
        self.metric, self.unit, self.ours, self.base, self.base_name = metric, unit, ours, base, base_name
        self.target, self.ok = target, ok
        self.ratio = (base / ours if higher_is_better else ours / base) if base and ours else float("nan")


def fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"
    return f"{value:,.0f} {unit}"


def print_table(rows: list[Row], out: Any) -> None:
    header = ("metric", "SpotPatch", "baseline", "ratio", "target", "result")
    lines = [header]
    for r in rows:
        result = "-" if r.ok is None else ("PASS" if r.ok else "FAIL")
        lines.append((r.metric, fmt(r.ours, r.unit), f"{fmt(r.base, r.unit)} ({r.base_name})", f"{r.ratio:.2f}x",
                      r.target, result))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def run(args: argparse.Namespace, out: Any) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="spotpatch-bench-") as tmp:
        root = make_repo(Path(tmp) / "repo")
        log = open(Path(tmp) / "engine.log", "wb")  # noqa: SIM115 - closed below
        try:
            rows += bench_rtt(args, root, log, out)
            rows += bench_events(args, root, log, out)
            rows += bench_cold(args, root, log, out)
        except BenchError:
            log.close()
            sys.stderr.write((Path(tmp) / "engine.log").read_text(errors="replace")[-4000:])
            raise
        log.close()
    return rows


def bench_rtt(args: argparse.Namespace, root: Path, log: Any, out: Any) -> list[Row]:
    print(f"(a) job/list round trip: {args.requests} sequential requests after {args.warmup} warm-up, "
          f"alternating with the echo server ...", file=out)
    base: list[float] = []
    ours: list[float] = []
    echo = Echo()
    try:
        engine = Engine(root, log)
        try:
            round_trips(echo, "job/list", args.warmup)
            round_trips(engine, "job/list", args.warmup)
            for block in range(BLOCKS):
                n = args.requests // BLOCKS + (block < args.requests % BLOCKS)
                base += round_trips(echo, "job/list", n)
                ours += round_trips(engine, "job/list", n)
        finally:
            engine.close()
    finally:
        echo.close()
    p50, p99 = percentile(ours, 50) * 1000, percentile(ours, 99) * 1000
    b50, b99 = percentile(base, 50) * 1000, percentile(base, 99) * 1000
    return [Row("job/list RTT p50", "ms", p50, b50, "echo", "<=3x echo and <1 ms", p50 <= 3 * b50 and p50 < 1),
            Row("job/list RTT p99", "ms", p99, b99, "echo")]


def bench_events(args: argparse.Namespace, root: Path, log: Any, out: Any) -> list[Row]:
    print(f"(b) job/event throughput: {args.events} notifications x {args.event_runs} runs (median), "
          f"alternating with the echo server ...", file=out)
    warm = min(args.events, 1000)
    base_runs: list[float] = []
    our_runs: list[float] = []
    echo = Echo()
    try:
        engine = Engine(root, log, bench=True)
        try:
            echo_events(echo, warm)
            engine_events(engine, warm)
            for _ in range(args.event_runs):
                base_runs.append(args.events / echo_events(echo, args.events))
                our_runs.append(args.events / engine_events(engine, args.events))
        finally:
            engine.close()
    finally:
        echo.close()
    base, ours = statistics.median(base_runs), statistics.median(our_runs)
    return [Row("job/event throughput", "events/s", ours, base, "echo frames", ">=20,000/s", ours >= 20_000,
                higher_is_better=True)]


def bench_cold(args: argparse.Namespace, root: Path, log: Any, out: Any) -> list[Row]:
    print(f"(c) cold start: median of {args.cold_runs} runs each ...", file=out)
    py, echo, ours = [], [], []
    for _ in range(args.cold_runs):  # interleaved, so a noisy moment hits every series alike
        py.append(cold_python())
        echo.append(cold_echo())
        ours.append(cold_engine(root, log))
    m_py, m_echo, m_ours = (statistics.median(s) * 1000 for s in (py, echo, ours))
    return [Row("cold start -> initialize", "ms", m_ours, m_py, "python -c pass", "<400 ms", m_ours < 400),
            Row("cold start -> initialize", "ms", m_ours, m_echo, "echo 1st reply")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="measured job/list requests (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured warm-up requests (default 200)")
    parser.add_argument("--events", type=int, default=20000, help="notifications per throughput run (default 20000)")
    parser.add_argument("--event-runs", type=int, default=3, help="throughput runs, median reported (default 3)")
    parser.add_argument("--cold-runs", type=int, default=10,
                        help="cold starts per series, median reported (default 10)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails (default: report only)")
    args = parser.parse_args(argv)
    if min(args.requests, args.events, args.event_runs, args.cold_runs) < 1 or args.warmup < 0:
        parser.error("counts must be positive")
    out = sys.stdout
    print(f"SpotPatch engine benchmarks — python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"engine: {' '.join(engine_command())}", file=out)
    try:
        rows = run(args, out)
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2
    print(file=out)
    print_table(rows, out)
    failed = [r.metric for r in rows if r.ok is False]
    print(f"\n{len(failed)} target(s) missed" + (f": {', '.join(failed)}" if failed else ""), file=out)
    return 1 if failed and args.strict else 0
