"""Seeded random-kill run of the journalled write (issue 12 acceptance 2; docs/security.md §7 "Crash safety").

    .venv/bin/python -m tests.bench.bench_crash_kills --kills 200 --seed 12     # about 1-2 min on 2 busy cores

A forked child (tests/worktree/_write_driver.py) runs the engine's journalled write of an Apply or a Revert
(alternately) of ``--files`` modified files plus a deleted file and a file created in a new directory, and
is SIGKILLed after a random delay: in ``--early`` of the cases drawn from ``[0, 1.2 x`` the measured
duration of an unkilled write``]`` from its start, else after a step boundary drawn at random
(``write_steps``), from ``[0, 1.5 x`` one path's share of the time an unkilled write spends on the
files``]`` — so kills land between and inside every step (kills that land after the write finished are
not counted). In ``--recovery-kills`` of the cases (a
fraction) the recovery that follows is SIGKILLed too, after its own random delay, and recovery runs again.
After each kill: every touched path wholly its pre- or post-image, nothing else changed, the pre-image on
disk (path, temp file or journal); after recovery: the whole tree is exactly the no-change state (a
journal was found), or the operation's pre- or post-state (none was: killed before the journal was
durable, or after it was removed), with no temp file, journal or empty directory left. Exit 1 on the
first violation (printed with the seed and the kill number), else 0 with a summary.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from spotpatch_agent.worktree.images import ABSENT, Image, new_file_mode, new_tmp_name, part_name, read_image
from spotpatch_agent.worktree.journal import PathWrite, WritePlan, encode_plan, journal_dir, write_steps
from spotpatch_agent.worktree.recovery import recover_pending
from tests.conftest import git, make_repo
from tests.worktree._crash import Driver, Scenario, assert_no_image_lost, repo_bits, tmp_rel, tree_with
from tests.worktree._util import files


def build(root: Path, count: int, operation: str) -> Scenario:
    """A repo with ``count`` files to modify, one to delete, one to create; applied first for a Revert."""
    content = {f"src/m{n:03d}.ts": f"export const v{n} = {n};\n" * 200 for n in range(count)}
    make_repo(root, {**content, "gone.txt": "to delete\n", "keep.txt": "unrelated\n"})
    head = git(root, "rev-parse", "HEAD").strip()
    posts: dict[str, bytes | None] = {rel: text.replace(" = ", " == ").encode() for rel, text in content.items()}
    posts["gone.txt"] = None
    posts["new/deep/made.txt"] = b"created\n"
    writes = []
    for rel, data in posts.items():
        pre = read_image(root, rel)
        assert isinstance(pre, Image)
        post = ABSENT if data is None else Image(data, pre.mode if pre.data is not None else new_file_mode())
        writes.append(PathWrite(rel, pre, post, new_tmp_name()))
    plan = WritePlan("job_1", "apply", head, writes)
    if operation == "revert":
        for w in writes:
            path = root / w.path
            if w.post.data is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(w.post.data)
        plan = WritePlan("job_1", "revert", head, [PathWrite(w.path, w.post, w.pre, new_tmp_name()) for w in writes])
    return Scenario(root, plan, files(root), repo_bits(root))


def part_rel(w: PathWrite) -> str:
    return "/".join([*w.path.split("/")[:-1], part_name(w.tmp)])


def reset(sc: Scenario) -> None:
    for w in sc.plan.writes:
        for rel in (tmp_rel(w), part_rel(w), w.path):
            (sc.root / rel).unlink(missing_ok=True)
        start = sc.start.get(w.path)
        if isinstance(start, bytes):
            (sc.root / w.path).parent.mkdir(parents=True, exist_ok=True)
            (sc.root / w.path).write_bytes(start)
    for rel in sorted(files(sc.root), key=len, reverse=True):
        path = sc.root / rel
        if path.is_dir() and rel not in sc.start and not any(path.iterdir()):
            path.rmdir()
    assert files(sc.root) == sc.start


def check_killed(sc: Scenario) -> tuple[int, bool]:
    """Invariants at the kill; returns how many paths hold their new image, and whether a temp file exists."""
    now = files(sc.root)
    new = 0
    for w in sc.plan.writes:
        value = now.get(w.path)
        assert value in (w.pre.data, w.post.data), f"{w.path} is neither wholly old nor wholly new"
        new += value == w.post.data and w.pre.data != w.post.data
    temps = {tmp_rel(w) for w in sc.plan.writes} | {part_rel(w) for w in sc.plan.writes}  # .part: a write cut short
    touched = {w.path for w in sc.plan.writes}
    others = {k: v for k, v in now.items() if k not in temps and k not in touched and v != "dir"}
    assert others == {k: v for k, v in sc.start.items() if k not in touched and v != "dir"}, "another path changed"
    jdir = journal_dir(sc.root / ".git")
    finished = new == len(sc.plan.writes) and not (jdir.exists() and any(n.endswith(".journal") for n in
                                                                         (p.name for p in jdir.iterdir())))
    if not finished:
        assert_no_image_lost(sc.root, sc.plan, which=("pre",))
    assert repo_bits(sc.root) == sc.repo, "the index, HEAD or refs changed"
    return new, any(t in now for t in temps)


def check_recovered(sc: Scenario, outcomes: list[str]) -> str:
    now = files(sc.root)
    pre, post = tree_with(sc.start, sc.plan.writes, "pre"), tree_with(sc.start, sc.plan.writes, "post")
    no_change = pre if sc.plan.operation == "apply" else post
    if outcomes:
        assert outcomes == ["rolled-back" if sc.plan.operation == "apply" else "completed"], outcomes
        assert now == no_change, "recovery did not reach the no-change state: " + _differ(now, no_change)
        return "recovered"
    assert now in (pre, post), "no journal, yet the tree is neither the state before nor after the write"
    jdir = journal_dir(sc.root / ".git")
    assert not jdir.exists() or not list(jdir.iterdir()), "a journal file was left"
    assert not (jdir.parent / "quarantine").exists(), "a journal was kept aside"
    return "untouched" if now == pre else "finished"


def _differ(now: dict[str, bytes | str], want: dict[str, bytes | str]) -> str:
    keys = sorted(k for k in set(now) | set(want) if now.get(k) != want.get(k))
    return ", ".join(f"{k} ({'absent' if k not in now else 'other bytes'})" for k in keys[:5])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kills of a write to land (default 200)")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--files", type=int, default=20, help="modified files per write (default 20)")
    parser.add_argument("--early", type=float, default=0.3,
                        help="fraction of kills timed from the start (the others from the durable journal)")
    parser.add_argument("--recovery-kills", type=float, default=0.3, help="fraction of recoveries also killed")
    args = parser.parse_args(argv)
    logging.getLogger("spotpatch").addHandler(logging.NullHandler())  # recovery's reports: counted, not printed
    rng = random.Random(args.seed)
    started = time.monotonic()
    driver = Driver()
    tally: dict[str, int] = {}
    written: list[int] = []
    recovery_killed = kills = attempts = with_temp = 0
    try:
        with tempfile.TemporaryDirectory(prefix="spotpatch-kills-") as tmp:
            scenarios = {op: build(Path(tmp) / op, args.files, op) for op in ("apply", "revert")}
            plans = {}
            for op, sc in scenarios.items():
                plans[op] = Path(tmp) / f"{op}.plan"
                plans[op].write_bytes(encode_plan(sc.plan))
            durations: dict[str, tuple[float, float]] = {}
            for op, sc in scenarios.items():  # calibrate: an unkilled write, until its journal is durable and after
                samples = []
                for _ in range(5):
                    reset(sc)
                    samples.append(driver.timed(["write", str(sc.root), str(plans[op])], f"{op}:journal:durable"))
                durations[op] = (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))
                reset(sc)
            while kills < args.kills:
                op = "apply" if attempts % 2 == 0 else "revert"
                sc = scenarios[op]
                attempts += 1
                reset(sc)
                whole, files_phase = durations[op]
                if rng.random() < args.early:  # anywhere, from the start
                    killed = driver.kill_after(["write", str(sc.root), str(plans[op])],
                                               rng.uniform(0, 1.2 * (whole + files_phase)))
                else:  # from a random step boundary, a random part of one path's share of the files phase
                    step_time = files_phase / len(sc.plan.writes)
                    killed = driver.kill_after(["write", str(sc.root), str(plans[op])],
                                               rng.uniform(0, 1.5 * step_time), mark=rng.choice(write_steps(sc.plan)))
                if not killed:
                    continue
                kills += 1
                where = f"seed {args.seed}, kill {kills} ({op})"
                try:
                    new, temp = check_killed(sc)
                    written.append(new)
                    with_temp += temp
                    if rng.random() < args.recovery_kills:
                        if driver.kill_after(["recover", str(sc.root)], rng.uniform(0, 0.02)):
                            recovery_killed += 1
                    reports = anyio.run(recover_pending, sc.root)
                    state = check_recovered(sc, [r.outcome for r in reports])
                    tally[state] = tally.get(state, 0) + 1
                except AssertionError as exc:
                    print(f"FAIL at {where}: {exc}", flush=True)
                    return 1
    finally:
        driver.close()
    histogram = {n: written.count(n) for n in sorted(set(written))}
    print(f"seed {args.seed}: {kills} kills of a write landed ({attempts} attempts; {recovery_killed} recoveries "
          f"killed too); unkilled write, journal durable after + files written in: "
          f"{', '.join(f'{op} {a * 1000:.1f} + {b * 1000:.1f} ms' for op, (a, b) in durations.items())}")
    print(f"paths holding their new image at the kill: {histogram}; a temp file present at {with_temp} kills")
    print(f"after recovery: {tally}  (recovered = journal found and repaired; untouched/finished = killed before "
          "the journal was durable / after it was removed)")
    print(f"every invariant held; {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
