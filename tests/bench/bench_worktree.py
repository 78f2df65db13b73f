"""``python -m tests.bench.bench_worktree``: job start and Apply/Revert on a big repository (issue 6).

Generates (once per run and size) a deterministic one-commit repository of ``--files`` files holding about
``--mb`` MiB — small text sources in nested directories plus a few binary assets — and drives the real
``spotpatch-agent serve`` over stdio (tests/engine_client.py) with a zero-latency scripted provider
(``ScriptedProviderServer``). Every figure is printed next to a baseline measured in the same run, as a ratio:

(a) job start: ``job/create`` sent → the first tool call's ``activity started`` event received, for the
    first job of an engine session ("cold": sent right after ``initialize``) and for later jobs ("warm",
    ``--gap`` seconds after the previous one ended), vs plain ``git worktree add --detach`` (and its
    ``git worktree remove --force``) of the same repository, alternating with the jobs;
(b) Apply and Revert of the jobs' 20-file diff: the ``job/apply`` / ``job/revert`` round trip, and
    ``apply_change`` / ``revert_change`` called in-process (with a per-step breakdown of where the time
    goes), vs ``git apply`` / ``git apply -R`` of the same diff on a clone of the repository.

``--pool on|off|auto`` sets ``SPOTPATCH_WORKTREE_POOL`` for the engine (see spotpatch_agent/worktree/pool.py).
Medians are printed. ``--strict`` exits 1 when a target is missed. Not collected by pytest (conftest.py);
tests/bench/test_bench_worktree_smoke.py runs it tiny. Usage and recorded figures: README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import EngineProcess

GIT_ENV = {"GIT_AUTHOR_NAME": "SpotPatch Bench", "GIT_AUTHOR_EMAIL": "bench@spotpatch.invalid",
           "GIT_COMMITTER_NAME": "SpotPatch Bench", "GIT_COMMITTER_EMAIL": "bench@spotpatch.invalid",
           "GIT_CONFIG_NOSYSTEM": "1"}
MIB = 1 << 20
EDITED_FILES = 20


@dataclass(frozen=True)
class BigRepo:
    """A generated repository: its root, file count, bytes in HEAD, and the files a job edits."""

    root: Path
    files: int
    total_bytes: int
    edit_targets: tuple[tuple[str, str, str], ...]  # (path, old line, new line)
    seconds: float


def _git(cwd: Path, *args: str, input: bytes | None = None) -> bytes:
    out = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False,
                         env={**os.environ, **GIT_ENV})
    if out.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {out.stderr.decode(errors='replace')[-2000:]}")
    return out.stdout


def _code_corpus(rng: random.Random, size: int) -> bytes:
    words = ["const", "return", "value", "props", "state", "render", "export", "import", "from", "button",
             "className", "onClick", "useEffect", "useState", "items", "map", "filter", "length", "index", "key"]
    lines = []
    total = 0
    while total < size:
        n = rng.randint(2, 9)
        line = "  " * rng.randint(0, 3) + " ".join(rng.choice(words) for _ in range(n)) + ";\n"
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()


def make_big_repo(root: Path, *, files: int, mb: float, seed: int = 6) -> BigRepo:
    """Generate a deterministic one-commit repository of ``files`` files holding about ``mb`` MiB.

    About 1 % of the files are binary assets (random bytes, 70 % of the bytes); the rest are small text
    sources in nested directories (``src/pkgNN/modNN/fileNNNNN.ts``). Objects are written with one
    ``git fast-import`` stream (compression level 1), then the working tree is checked out.
    """
    started = time.perf_counter()
    rng = random.Random(seed)
    budget = int(mb * MIB)
    assets = max(1, files // 100)
    sources = max(1, files - assets - 2)
    source_avg = max(200, int(budget * 0.3) // sources)
    asset_avg = max(1024, int(budget * 0.7) // assets)
    corpus = _code_corpus(rng, 256 * 1024)
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "-c", "pack.compression=1", "-c", "core.compression=1", "fast-import", "--quiet"],
                            cwd=root, stdin=subprocess.PIPE, env={**os.environ, **GIT_ENV})
    assert proc.stdin is not None
    entries: list[tuple[int, str]] = []
    total = 0
    targets: list[tuple[str, str, str]] = []
    mark = 0

    def blob(path: str, data: bytes) -> None:
        nonlocal mark, total
        mark += 1
        proc.stdin.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))  # type: ignore[union-attr]
        proc.stdin.write(data)  # type: ignore[union-attr]
        proc.stdin.write(b"\n")  # type: ignore[union-attr]
        entries.append((mark, path))
        total += len(data)

    blob(".gitignore", b"node_modules/\ndist/\n.cache/\n")
    blob("package.json", b'{\n  "name": "bench-app",\n  "private": true\n}\n')
    stride = max(1, sources // EDITED_FILES)
    for i in range(sources):
        path = f"src/pkg{i * 40 // sources:02d}/mod{(i // 25) % 20:02d}/file{i:05d}.ts"
        size = rng.randint(source_avg // 2, source_avg * 3 // 2)
        offset = rng.randrange(0, len(corpus) - size) if size < len(corpus) else 0
        marker = f"export const ID_{i} = {i};"
        head = f"// {path}\n{marker}\n".encode()
        blob(path, head + corpus[offset:offset + size] + b"\n")
        if i % stride == 0 and len(targets) < EDITED_FILES:
            targets.append((path, marker, f"export const ID_{i} = {i} + 1;"))
    for a in range(assets):
        size = rng.randint(asset_avg // 2, asset_avg * 3 // 2)
        blob(f"assets/img{a // 50:02d}/asset{a:04d}.png", rng.randbytes(size))
    commit = [b"commit refs/heads/main\n", b"author Bench <bench@spotpatch.invalid> 1700000000 +0000\n",
              b"committer Bench <bench@spotpatch.invalid> 1700000000 +0000\n", b"data 6\nbench\n"]
    commit += [b"M 100644 :%d %s\n" % (m, p.encode()) for m, p in entries]
    proc.stdin.write(b"".join(commit) + b"\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    _git(root, "reset", "--hard", "-q")
    return BigRepo(root, len(entries), total, tuple(targets), time.perf_counter() - started)


# ---------------------------------------------------------------------------------------------- measuring


KEY_ENV = "SPOTPATCH_BENCH_PROVIDER_KEY"
START_TARGET = 1.0  # warm job start must be under the plain `git worktree add` (ratio < 1; aim: well under)
APPLY_TARGET = 1.5  # Apply / Revert within 1.5x of `git apply`


def _config(server: ScriptedProviderServer) -> dict[str, Any]:
    return {"providers": [{"id": "scripted", "displayName": "Scripted", "api": "chat", "baseUrl": server.base_url,
                           "apiKeyEnv": KEY_ENV,
                           "models": [{"id": "m1", "model": "scripted-model", "displayName": "Scripted"}]}],
            "checks": [], "limits": {}}


def _annotation() -> dict[str, Any]:
    return {"annotationId": "bench", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "Bump every ID constant by one.",
         "element": {"tagName": "div", "text": "bench", "attributes": {}}}]}


def _edit_turns(repo: BigRepo) -> list[dict[str, Any]]:
    """One turn with a ``replace_text`` call per edit target (the first tool call), then a final answer."""
    calls = [{"id": f"call_edit_{k}", "name": "replace_text",
              "arguments": {"path": path, "oldText": old, "newText": new}}
             for k, (path, old, new) in enumerate(repo.edit_targets)]
    return [{"text": "Editing.", "toolCalls": calls, "argumentChunks": 1},
            {"text": "Done.", "finishReason": "stop"}]


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _plain_worktree(repo: Path, scratch: Path) -> tuple[float, float]:
    """``git worktree add --detach`` at HEAD and ``git worktree remove --force``: (add s, remove s)."""
    target = scratch / "plain-worktree"
    add = _timed(lambda: _git(repo, "worktree", "add", "--detach", "--quiet", str(target), "HEAD"))
    remove = _timed(lambda: _git(repo, "worktree", "remove", "--force", str(target)))
    return add, remove


def _git_apply(copy: Path, diff: bytes) -> tuple[float, float]:
    """``git apply`` then ``git apply -R`` of ``diff`` (stdin) on the clone: (apply s, revert s)."""
    apply = _timed(lambda: _git(copy, "apply", "-", input=diff))
    revert = _timed(lambda: _git(copy, "apply", "-R", "-", input=diff))
    return apply, revert


@dataclass
class Samples:
    cold_start: list[float] = field(default_factory=list)
    warm_start: list[float] = field(default_factory=list)
    plain_add: list[float] = field(default_factory=list)
    plain_remove: list[float] = field(default_factory=list)
    job_end: list[float] = field(default_factory=list)  # ``diff`` event → ``awaiting-review``: the worktree clean-up
    apply: list[float] = field(default_factory=list)
    revert: list[float] = field(default_factory=list)
    git_apply: list[float] = field(default_factory=list)
    git_revert: list[float] = field(default_factory=list)
    fn_apply: list[float] = field(default_factory=list)
    fn_revert: list[float] = field(default_factory=list)
    fn_git_apply: list[float] = field(default_factory=list)
    fn_git_revert: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=dict)
    diff: bytes = b""


class _Stamped(list):  # type: ignore[type-arg]
    """``EngineProcess.messages`` that also records when each message arrived (``time.perf_counter()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(time.perf_counter())
        super().append(item)


def _arrival(eng: EngineProcess, predicate: Callable[[dict[str, Any]], bool], timeout: float = 600) -> float:
    """Wait for the first message matching ``predicate``; returns when it arrived."""
    found = eng.wait_for(predicate, timeout=timeout)
    stamped = eng.messages
    assert isinstance(stamped, _Stamped)
    return stamped.times[next(i for i, m in enumerate(stamped) if m is found)]


def _event(job_id: str, kind: str, **match: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: (m.get("method") == "job/event" and m["params"]["jobId"] == job_id and m["params"]["kind"] == kind
                      and all(m["params"].get(k) == v for k, v in match.items()))


def _run_job(eng: EngineProcess, server: ScriptedProviderServer, repo: BigRepo) -> tuple[str, float, float]:
    """One editing job to ``awaiting-review``: (job id, seconds from ``job/create`` sent to the first ``activity
    started`` event, seconds from the ``diff`` event to the ``awaiting-review`` status — the clean-up)."""
    server.add_turns(*_edit_turns(repo))
    started = time.perf_counter()
    rid = eng.start_request("job/create", {"annotation": _annotation(), "modelProfileId": "m1"})
    reply = eng.response(rid, timeout=600)
    if "error" in reply:
        raise BenchError(f"job/create failed: {reply['error']}")
    job_id = reply["result"]["jobId"]
    first_tool = _arrival(eng, _event(job_id, "activity", phase="started"))
    final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=600)
    if final["status"] != "awaiting-review":
        raise BenchError(f"the job ended {final['status']}: {final.get('message')}")
    diff_at = _arrival(eng, _event(job_id, "diff"))
    done_at = _arrival(eng, _event(job_id, "status", status="awaiting-review"))
    return job_id, first_tool - started, done_at - diff_at


def bench_engine(repo: BigRepo, copy: Path, scratch: Path, args: argparse.Namespace, samples: Samples,
                 out: Any) -> None:
    env = {KEY_ENV: "bench-key"}
    if args.pool != "default":
        env["SPOTPATCH_WORKTREE_POOL"] = {"on": "1", "off": "0", "auto": "auto"}[args.pool]
    for session in range(args.sessions):
        with ScriptedProviderServer() as server:
            eng = EngineProcess(env=env)
            eng.messages = _Stamped()  # before any message can arrive (nothing is sent before initialize)
            try:
                eng.initialize(repo.root, _config(server))
                for n in range(args.warm_jobs + 1):
                    if n:
                        time.sleep(args.gap)
                    job_id, start, end = _run_job(eng, server, repo)
                    (samples.warm_start if n else samples.cold_start).append(start)
                    samples.job_end.append(end)
                    if not samples.diff:
                        diff = eng.call("job/diff", {"jobId": job_id})["diff"]
                        samples.diff = diff.encode("utf-8", "surrogateescape")
                    time.sleep(args.review)  # the user reads the diff; the pool's background recycle ends meanwhile
                    samples.apply.append(_timed(partial(eng.call, "job/apply", {"jobId": job_id}, timeout=120)))
                    samples.revert.append(_timed(partial(eng.call, "job/revert", {"jobId": job_id}, timeout=120)))
                    g_apply, g_revert = _git_apply(copy, samples.diff)
                    samples.git_apply.append(g_apply)
                    samples.git_revert.append(g_revert)
                    eng.call("job/close", {"jobId": job_id})
                    time.sleep(args.gap)
                    add, remove = _plain_worktree(repo.root, scratch)
                    samples.plain_add.append(add)
                    samples.plain_remove.append(remove)
                    print(f"  session {session + 1} job {n + 1}: start {start * 1000:.0f} ms "
                          f"({'cold' if not n else 'warm'}), plain add {add * 1000:.0f} ms, "
                          f"apply {samples.apply[-1] * 1000:.1f} ms / git apply {g_apply * 1000:.1f} ms", file=out)
                    out.flush()
                if _git(repo.root, "status", "--porcelain"):
                    raise BenchError("the repository is not clean after the jobs were reverted")
            except (BenchError, TimeoutError):
                print(eng.all_output()[-3000:], file=sys.stderr)
                raise
            finally:
                eng.stop()
        if eng.proc.returncode not in (0, None) and session == 0:
            print(f"  (engine exit code {eng.proc.returncode})", file=out)


# ---------------------------------------------------------------------------------------------- function level


def _step_name(args: Sequence[str]) -> str:
    words = [a for a in args if not a.startswith("-")]
    sub = words[0] if words else "git"
    flags = [a for a in args if a in ("--check", "--reverse", "--numstat")]
    return " ".join(["git", sub, *flags])


@contextmanager
def _step_timer(steps: dict[str, float]) -> Iterator[None]:
    """Inclusive time of every git subcommand (``run_git``), of every function of the apply/revert modules
    (``worktree.changes``, ``worktree.journal``, ``worktree.repo``, ``worktree.refs``) and of ``os.fsync`` /
    ``os.fdatasync`` / ``os.replace``,
    summed per name into ``steps``.

    Functions are wrapped where the modules look them up (module globals), so calls between them count
    too; a caller's time includes its callees'."""
    import importlib
    import inspect

    patched: list[tuple[Any, str, Any]] = []

    def record(key: str, started: float) -> None:
        steps[key] = steps.get(key, 0.0) + time.perf_counter() - started

    def wrap(original: Any, key: str | None) -> Any:
        if inspect.iscoroutinefunction(original):
            async def timed_async(*a: Any, **kw: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await original(*a, **kw)
                finally:
                    record(key or _step_name(a[0] if a else kw.get("args", ())), started)

            return timed_async

        def timed(*a: Any, **kw: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                record(key or "?", started)

        return timed

    for name in ("changes", "journal", "repo", "refs"):
        try:
            module = importlib.import_module(f"spotpatch_agent.worktree.{name}")
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            if attr == "run_git" and callable(value):
                patched.append((module, attr, value))
                setattr(module, attr, wrap(value, None))
            elif inspect.isfunction(value) and value.__module__.startswith("spotpatch_agent.worktree."):
                patched.append((module, attr, value))
                setattr(module, attr, wrap(value, f"{value.__module__.rsplit('.', 1)[-1]}.{value.__name__}()"))
    for attr in ("fsync", "fdatasync", "replace"):  # durable writes of the crash journal and the files
        if not hasattr(os, attr):
            continue
        patched.append((os, attr, getattr(os, attr)))
        setattr(os, attr, wrap(getattr(os, attr), f"os.{attr}()"))
    try:
        yield
    finally:
        for module, attr, original in reversed(patched):
            setattr(module, attr, original)


def bench_functions(repo: BigRepo, copy: Path, args: argparse.Namespace, samples: Samples, out: Any) -> None:
    """``apply_change`` / ``revert_change`` in-process on the repository, alternating with ``git apply``."""
    from spotpatch_agent.worktree import changes

    head = _git(repo.root, "rev-parse", "HEAD").decode().strip()
    diff = samples.diff.decode("utf-8", "surrogateescape")
    baseline: dict[str, str | None] = {}
    result: dict[str, str | None] = {}
    for path, old, new in repo.edit_targets:
        data = (repo.root / path).read_bytes()
        baseline[path] = hashlib.sha256(data).hexdigest()
        result[path] = hashlib.sha256(data.replace(old.encode(), new.encode(), 1)).hexdigest()

    async def one_round(steps: dict[str, float] | None) -> tuple[float, float]:
        if steps is None:
            started = time.perf_counter()
            applied = await changes.apply_change(repo.root, diff, baseline, expected_head=head, result_hashes=result)
            t_apply = time.perf_counter() - started
            started = time.perf_counter()
            await changes.revert_change(repo.root, applied, expected_head=head)
            return t_apply, time.perf_counter() - started
        apply_steps: dict[str, float] = {}
        with _step_timer(apply_steps):
            applied = await changes.apply_change(repo.root, diff, baseline, expected_head=head, result_hashes=result)
        revert_steps: dict[str, float] = {}
        with _step_timer(revert_steps):
            await changes.revert_change(repo.root, applied, expected_head=head)
        for key, value in apply_steps.items():
            steps.setdefault("apply: " + key, []).append(value)  # type: ignore[attr-defined]
        for key, value in revert_steps.items():
            steps.setdefault("revert: " + key, []).append(value)  # type: ignore[attr-defined]
        return 0.0, 0.0

    anyio.run(one_round, None)  # warm-up (imports, page cache)
    for _ in range(args.fn_runs):
        t_apply, t_revert = anyio.run(one_round, None)
        samples.fn_apply.append(t_apply)
        samples.fn_revert.append(t_revert)
        g_apply, g_revert = _git_apply(copy, samples.diff)
        samples.fn_git_apply.append(g_apply)
        samples.fn_git_revert.append(g_revert)
    for _ in range(max(1, args.fn_runs // 2)):
        anyio.run(one_round, samples.steps)
    print(f"  {args.fn_runs} in-process apply/revert rounds done", file=out)


# ---------------------------------------------------------------------------------------------- report


class BenchError(RuntimeError):
    pass


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def report(samples: Samples, out: Any) -> bool:
    """Print the table; returns True when every target is met."""
    rows: list[tuple[str, float, float, str, str, bool | None]] = []
    add = _ms(samples.plain_add)
    rows.append(("job start, cold (1st job)", _ms(samples.cold_start), add, "git worktree add", "-", None))
    rows.append(("job start, warm (later jobs)", _ms(samples.warm_start), add, "git worktree add",
                 f"<{START_TARGET:g}x", _ms(samples.warm_start) < START_TARGET * add))
    rows.append(("job clean-up (diff -> awaiting-review)", _ms(samples.job_end), _ms(samples.plain_remove),
                 "git worktree remove", "-", None))
    for name, ours, base, base_name in (
        ("job/apply (engine RPC)", samples.apply, samples.git_apply, "git apply"),
        ("job/revert (engine RPC)", samples.revert, samples.git_revert, "git apply -R"),
        ("apply_change (in-process)", samples.fn_apply, samples.fn_git_apply, "git apply"),
        ("revert_change (in-process)", samples.fn_revert, samples.fn_git_revert, "git apply -R"),
    ):
        o, b = _ms(ours), _ms(base)
        rows.append((name, o, b, base_name, f"<={APPLY_TARGET:g}x", o <= APPLY_TARGET * b))
    header = ("metric", "SpotPatch", "baseline", "ratio", "target", "result")
    lines = [header]
    for metric, ours, base, base_name, target, ok in rows:
        ratio = ours / base if base and not math.isnan(base) and not math.isnan(ours) else float("nan")
        lines.append((metric, f"{ours:.1f} ms", f"{base:.1f} ms ({base_name})", f"{ratio:.2f}x", target,
                      "-" if ok is None else ("PASS" if ok else "FAIL")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)
    if samples.steps:
        print("\nwhere the in-process time goes: inclusive median ms per call of apply_change / revert_change "
              "(a function's time includes the git commands and functions it calls; top 12 each):", file=out)
        for op in ("apply", "revert"):
            keys = sorted((k for k in samples.steps if k.startswith(op + ": ")),
                          key=lambda k: -statistics.median(samples.steps[k]))
            for key in keys[:12]:
                print(f"  {key:<52} {_ms(samples.steps[key]):7.1f} ms", file=out)
    missed = [r[0] for r in rows if r[5] is False]
    print(f"\n{len(missed)} target(s) missed" + (f": {', '.join(missed)}" if missed else ""), file=out)
    return not missed


# ---------------------------------------------------------------------------------------------- main

_REPOS: dict[tuple[int, float], BigRepo] = {}


def cached_repo(base: Path, files: int, mb: float) -> BigRepo:
    """The generated repository for these parameters, made once per run under ``base``."""
    key = (files, mb)
    if key not in _REPOS:
        _REPOS[key] = make_big_repo(base / f"repo-{files}-{mb:g}", files=files, mb=mb)
    return _REPOS[key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_worktree", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000, help="files in the generated repository (default 20000)")
    parser.add_argument("--mb", type=float, default=200, help="MiB in the generated repository (default 200)")
    parser.add_argument("--sessions", type=int, default=3, help="engine sessions; each has one cold job (default 3)")
    parser.add_argument("--warm-jobs", type=int, default=3, help="warm jobs per session (default 3)")
    parser.add_argument("--gap", type=float, default=1.0,
                        help="seconds between a job's end and the next step (default 1)")
    parser.add_argument("--review", type=float, default=1.0,
                        help="seconds between awaiting-review and job/apply, the user's review "
                             "(default 1; 0 = at once)")
    parser.add_argument("--fn-runs", type=int, default=10, help="in-process apply/revert rounds (default 10)")
    parser.add_argument("--pool", choices=("default", "auto", "on", "off"), default="default",
                        help="SPOTPATCH_WORKTREE_POOL for the engine (default: leave it unset)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.files < 30 or args.mb <= 0 or args.sessions < 1 or args.warm_jobs < 0 or args.fn_runs < 1:
        parser.error("--files must be at least 30; counts and sizes must be positive")
    out = sys.stdout
    print(f"SpotPatch worktree benchmarks — git {_git(Path.cwd(), 'version').decode().split()[-1]}, "
          f"{os.cpu_count()} CPUs, pool={args.pool}", file=out)
    scratch = Path(tempfile.mkdtemp(prefix="spotpatch-bench-worktree-"))
    repo: BigRepo | None = None
    try:
        repo = cached_repo(scratch, args.files, args.mb)
        print(f"repository: {repo.files} files, {repo.total_bytes / MIB:.0f} MiB, generated in {repo.seconds:.1f} s",
              file=out)
        copy = scratch / "copy"
        _git(scratch, "clone", "-q", "--local", str(repo.root), str(copy))
        samples = Samples()
        print(f"(a)+(b) {args.sessions} engine session(s) x {args.warm_jobs + 1} job(s), each next to a plain "
              f"worktree add/remove and git apply/-R ...", file=out)
        bench_engine(repo, copy, scratch, args, samples, out)
        print(f"(b) apply_change / revert_change in-process, {args.fn_runs} rounds next to git apply ...", file=out)
        bench_functions(repo, copy, args, samples, out)
        print(file=out)
        ok = report(samples, out)
    except (BenchError, TimeoutError, RuntimeError, AssertionError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2
    finally:
        if repo is not None and repo.root.exists():  # the warm worktree the last session parked (untimed)
            from spotpatch_agent.worktree.sweep import sweep_orphans

            anyio.run(sweep_orphans, repo.root)
            subprocess.run(["git", "worktree", "prune"], cwd=repo.root, check=False, capture_output=True)
        _REPOS.clear()
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if (args.strict and not ok) else 0


if __name__ == "__main__":
    sys.exit(main())
