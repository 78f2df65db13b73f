"""The validation order of docs/design.md §9 (spec "验证") through the real engine with real subprocess checks:
changeset → required checks in config order, reusing a fresh model-run result → a re-read proving the
checks changed nothing; a check that writes fails the job and its write reaches neither diff nor tree."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from tests.conftest import git
from tests.engine._gates_support import (
    APP,
    DONE,
    KEY_ENV,
    counting_check,
    edit,
    new_repo,
    py_check,
    run_check,
    run_one_job,
    runs,
    template_repo,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template_repo(tmp_path_factory.mktemp("validation"))


@pytest.fixture
def root(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    return new_repo(template, tmp_path / "repo")


WRITE_TRACKED = "p = 'src/App.tsx'; s = open(p).read(); open(p, 'w').write(s + '// formatted\\n')"
WRITE_NEW = "open('src/generated.ts', 'w').write('export const g = 1;\\n')"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["review", "auto"])
@pytest.mark.parametrize("writer", [WRITE_TRACKED, WRITE_NEW], ids=["edits-tracked", "creates-file"])
async def test_a_check_that_writes_fails_the_job_and_its_write_reaches_neither_diff_nor_tree(
    root: Path, mode: str, writer: str,
) -> None:
    checks = [py_check("fmt", writer + "; print('formatted')")]
    result = await run_one_job(root, [edit("w"), DONE], checks=checks, modes={"auto": True},
                               request={"applyMode": mode})
    assert result.snap is not None and result.diff is not None
    assert result.snap.status == "failed" and result.snap.error is not None
    assert result.snap.error.code == "CHECK_FAILED" and "fmt" in result.snap.error.message
    assert "changed files" in result.snap.error.message
    # The reviewable diff is the one taken before the checks: the agent's edit only, never the check's write.
    assert ">Start<" in result.diff.diff and "formatted" not in result.diff.diff
    assert [f.path for f in result.diff.files] == ["src/App.tsx"]
    assert (root / "src/App.tsx").read_text() == APP and not (root / "src/generated.ts").exists()
    assert git(root, "status", "--porcelain") == ""
    assert "applying" not in result.statuses
    [check] = result.kinds("check")
    assert check["checkId"] == "fmt" and check["status"] == "passed"  # it passed, yet it wrote: still a failure


@pytest.mark.anyio
async def test_a_check_writing_only_ignored_files_is_not_a_change(root: Path) -> None:
    cache = ("import os; os.makedirs('node_modules/.cache', exist_ok=True); "
             "open('node_modules/.cache/t', 'w').write('x')")
    result = await run_one_job(root, [edit("w"), DONE], checks=[py_check("tsc", cache)])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert "node_modules" not in result.diff.diff


@pytest.mark.anyio
async def test_a_fresh_model_run_result_is_reused_not_run_again(root: Path, tmp_path: Path) -> None:
    counter = tmp_path / "unit.count"
    turns = [edit("w"), run_check("c", "unit"), DONE]
    result = await run_one_job(root, turns, checks=[counting_check("unit", counter)])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert runs(counter) == 1  # the model's run on the final version is the final result
    [check] = result.kinds("check")
    assert check["checkId"] == "unit" and check["name"] == "Check unit" and check["status"] == "passed"
    assert check["ok"] is True and check["required"] is True and check["durationMs"] >= 0 and "ran" in check["output"]


@pytest.mark.anyio
async def test_a_stale_result_is_run_again_by_the_host(root: Path, tmp_path: Path) -> None:
    counter = tmp_path / "unit.count"
    turns = [run_check("c", "unit"), edit("w"), DONE]  # the edit after the run makes it stale
    result = await run_one_job(root, turns, checks=[counting_check("unit", counter)])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert runs(counter) == 2
    assert [c["status"] for c in result.kinds("check")] == ["passed"]


@pytest.mark.anyio
async def test_a_stale_pass_never_hides_a_failure_on_the_final_version(root: Path, tmp_path: Path) -> None:
    counter = tmp_path / "unit.count"
    turns = [edit("w"), run_check("c", "unit"), edit("w2", ">Start<", ">FORBIDDEN<"), DONE]
    result = await run_one_job(root, turns, checks=[counting_check("unit", counter, fail_if="FORBIDDEN")],
                               modes={"auto": True}, request={"applyMode": "auto"})
    assert result.snap is not None and result.snap.status == "failed" and result.snap.error.code == "CHECK_FAILED"
    assert runs(counter) == 2
    [check] = result.kinds("check")
    assert check["status"] == "failed" and check["ok"] is False and "exit code 1" in result.snap.error.message
    assert (root / "src/App.tsx").read_text() == APP
    assert ">FORBIDDEN<" in result.diff.diff  # kept for diagnosis, never applicable


@pytest.mark.anyio
async def test_any_later_check_run_makes_an_earlier_result_stale(root: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.count", tmp_path / "b.count"
    turns = [edit("w"), run_check("a", "a"), run_check("b", "b"), DONE]  # b may have written: a is stale
    result = await run_one_job(root, turns, checks=[counting_check("a", first), counting_check("b", second)])
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert (runs(first), runs(second)) == (2, 1)


@pytest.mark.anyio
async def test_a_model_run_that_wrote_files_is_never_reused(root: Path, tmp_path: Path) -> None:
    counter = tmp_path / "gen.count"
    code = "import os\nif not os.path.exists('src/gen.ts'): open('src/gen.ts', 'w').write('export const g = 1;\\n')"
    turns = [edit("w"), run_check("c", "gen"), DONE]
    result = await run_one_job(root, turns, checks=[counting_check("gen", counter, code=code)])
    # The model's run produced src/gen.ts (a tool side effect, part of the reviewed change); its result
    # described the tree before that write, so the host ran it again on the final tree, which it left alone.
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert runs(counter) == 2 and "src/gen.ts" in [f.path for f in result.diff.files]


@pytest.mark.anyio
async def test_required_checks_run_in_config_order_after_the_diff_and_before_review(root: Path) -> None:
    checks = [py_check("lint", "print('lint ok')"), py_check("types", "print('types ok')"),
              py_check("e2e", "raise SystemExit(1)", required=False)]
    result = await run_one_job(root, [edit("w"), DONE], checks=checks)
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    order = [(e["kind"], e.get("checkId") or e.get("status")) for e in result.events
             if e["kind"] in ("status", "diff", "check")]
    assert order[-5:] == [("status", "validating"), ("diff", None), ("check", "lint"), ("check", "types"),
                          ("status", "awaiting-review")]  # e2e: not required, not run by the model → not run


@pytest.mark.anyio
async def test_a_failed_non_required_check_is_shown_but_does_not_block_review(root: Path) -> None:
    checks = [py_check("unit", "print('ok')"), py_check("e2e", "print('boom'); raise SystemExit(3)", required=False)]
    turns = [edit("w"), run_check("c", "e2e"), DONE]
    result = await run_one_job(root, turns, checks=checks)
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    shown = {c["checkId"]: (c["status"], c["ok"], c["required"]) for c in result.kinds("check")}
    assert shown == {"unit": ("passed", True, True), "e2e": ("failed", False, False)}
    assert "boom" in next(c for c in result.kinds("check") if c["checkId"] == "e2e")["output"]


@pytest.mark.anyio
async def test_a_failed_required_check_fails_the_job_keeping_diff_and_output(root: Path) -> None:
    code = "import os, sys; print('\\x1b[31merror\\x1b[0m in', os.getcwd() + '/src/App.tsx'); sys.exit(2)"
    result = await run_one_job(root, [edit("w"), DONE], checks=[py_check("types", code, name="Type check")])
    assert result.snap is not None and result.snap.status == "failed"
    assert result.snap.error.code == "CHECK_FAILED" and "types (exit code 2)" in result.snap.error.message
    assert ">Start<" in result.diff.diff
    [check] = result.kinds("check")
    assert check["name"] == "Type check" and check["status"] == "failed" and check["ok"] is False
    assert check["output"].startswith("error in src/App.tsx") and "\x1b" not in check["output"]
    assert str(root) not in json.dumps(result.events) and str(root.parent) not in json.dumps(result.events)
    kinds = [e["kind"] for e in result.events]
    assert kinds[-4:] == ["diff", "check", "error", "status"]


@pytest.mark.anyio
async def test_a_required_check_that_cannot_start_fails_the_job(root: Path) -> None:
    checks = [{"id": "lint", "name": "Lint", "command": "spotpatch-no-such-command-xyz", "args": []}]
    result = await run_one_job(root, [edit("w"), DONE], checks=checks)
    assert result.snap is not None and result.snap.status == "failed" and result.snap.error.code == "CHECK_FAILED"
    assert "lint (could not be started)" in result.snap.error.message
    assert [c["status"] for c in result.kinds("check")] == ["failed"]
