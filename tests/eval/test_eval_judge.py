"""Wrong edits made through the real engine fail the eval's judge for the right reason (issue 27 part 1),
and the apps' typecheck — the job's confined ``typecheck`` check — passes the oracle and fails a broken
edit. The typecheck tests need the pinned npm packages (installed once into the demo's cache): without
npm or the registry they are skipped *with the column's reason*, never passed silently."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from spotpatch_agent.eval.runner import EvalSettings, TypecheckCache, run_suite
from spotpatch_agent.eval.tasks import Edit

from .conftest import run_one, script, task
from .oracle import scripted


def test_a_multi_target_job_that_does_only_one_target_fails_on_the_missing_one(settings: EvalSettings):
    one = task("react/two-files")
    row = run_one(one, settings, script(one, one.oracle[:1]))
    assert row["status"] == "awaiting-review" and not row["passed"] and row["diagnosis"] == "model"
    assert row["reasons"] == [
        ("src/components/ItemList.tsx: should match 'className=\"[^\"]*\\\\bitems-striped\\\\b' "
         "(the list has the class items-striped)")]


def test_an_edit_outside_the_task_files_fails_as_an_unexpected_change(settings: EvalSettings):
    one = task("svelte/save-primary")
    extra = Edit("src/styles.css", ".btn-primary {", ".btn-primary { font-weight: 700;")
    row = run_one(one, settings, script(one, (*one.oracle, extra)))
    assert row["changedFiles"] == ["src/components/ProductCard.svelte", "src/styles.css"]
    assert row["reasons"] == [("unexpected change: src/styles.css (the task changes only "
                               "src/components/ProductCard.svelte)")]
    assert row["diagnosis"] == "model"


def test_the_wrong_number_format_fails_the_format_predicate(settings: EvalSettings):
    one = task("vue/price-decimals")
    row = run_one(one, settings, script(one, (Edit(one.app.card, "${{ price }}", "${{ price.toFixed(1) }}"),)))
    assert len(row["reasons"]) == 1 and "the price is formatted with two decimals" in row["reasons"][0]


def test_text_hardcoded_in_the_component_instead_of_its_usage_fails_twice(settings: EvalSettings):
    one = task("react/heading-text")
    row = run_one(one, settings, script(one, (Edit(one.app.header, "<h1>{title}</h1>", "<h1>Corner Shop</h1>"),)))
    unexpected, title, old = row["reasons"]
    assert unexpected == "unexpected change: src/components/Header.tsx (the task changes only src/App.tsx)"
    assert title.startswith("src/App.tsx: should match ") and title.endswith("(the App passes the title Corner Shop)")
    assert old == "src/App.tsx: should not contain 'SpotPatch demo shop' (the old title is gone)"


@pytest.mark.parametrize(("task_id", "edits"), [
    ("react/save-primary", [("src/components/ProductCard.tsx", 'className="btn btn-secondary"',
                             'className="btn-primary btn"')]),
    ("react/heading-text", [("src/App.tsx", 'title="SpotPatch demo shop"', 'title={"Corner Shop"}')]),
    ("vue/two-files", [("src/components/ProductCard.vue", 'class="btn btn-secondary"', 'class="btn btn-primary wide"'),
                       ("src/components/ItemList.vue", 'class="items"', 'class="items-striped items"')]),
])
def test_other_right_edits_pass_the_judge_too(settings: EvalSettings, task_id: str, edits: list):
    one = task(task_id)
    row = run_one(one, settings, script(one, tuple(Edit(*e) for e in edits)))
    assert row["passed"], row["reasons"]


def test_a_reorder_that_drops_an_item_fails(settings: EvalSettings):
    one = task("svelte/list-reorder")
    wrong = Edit(one.app.app, '"Canvas tote bag", "Enamel mug", "Linen notebook"', '"Linen notebook", "Enamel mug"')
    row = run_one(one, settings, script(one, (wrong,)))
    assert row["reasons"] == [
        ("src/App.svelte: should match '\"Linen notebook\",\\\\s*\"Canvas tote bag\",\\\\s*\"Enamel mug\"' "
         "(the items are Linen notebook, Canvas tote bag, Enamel mug)")]


def test_a_model_that_reads_and_stops_without_an_edit_is_a_model_failure(settings: EvalSettings):
    one = task("react/add-element")
    turns = script(one)
    row = run_one(one, settings, [turns[0], turns[-1]])
    assert not row["passed"] and row["diagnosis"] == "model" and row["changedFiles"] == []
    assert row["reasons"] or row["errorCode"], row


def _typecheck_settings(settings: EvalSettings) -> EvalSettings:
    return replace(settings, typecheck=True, timeout=240)


def _ran(row: dict) -> None:
    if row["typecheck"].startswith("unavailable"):
        pytest.skip(f"{row['task']}: typecheck {row['typecheck']}")


@pytest.mark.parametrize("task_id", ["react/prop-chain", "vue/prop-chain", "svelte/prop-chain"])
def test_the_apps_typecheck_passes_the_oracle_of_a_prop_passed_down(settings: EvalSettings, task_id: str):
    one = task(task_id)
    row = run_one(one, _typecheck_settings(settings), script)
    _ran(row)
    assert (row["typecheck"], row["passed"]) == ("passed", True), row


def test_a_prop_declared_but_not_passed_fails_the_typecheck_as_a_model_mistake(settings: EvalSettings):
    one = task("vue/prop-chain")
    without_usage = tuple(e for e in one.oracle if e.path != one.app.app)
    row = run_one(one, _typecheck_settings(settings), script(one, without_usage))
    _ran(row)
    assert (row["typecheck"], row["status"], row["errorCode"], row["diagnosis"]) == (
        "failed", "failed", "CHECK_FAILED", "model"), row
    assert row["reasons"] == ["the job's typecheck (or another required check) failed"]


def test_without_a_sandbox_the_typecheck_is_unavailable_with_the_reason_never_a_silent_pass(
        settings: EvalSettings, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SPOTPATCH_SIMULATE_NO_SANDBOX", "1")
    one = task("react/save-primary")
    [row] = run_suite([one], _typecheck_settings(settings), lambda t, _r: scripted(script(t)),
                      typechecks=TypecheckCache())  # a fresh cache: the sandbox is detected again
    assert row["passed"] and row["typecheck"].startswith("unavailable: checks cannot be confined here (")
    assert "never runs model-written code unconfined" in row["typecheck"]


def test_an_app_whose_typecheck_already_fails_marks_it_unavailable_in_one_line_without_paths(
        settings: EvalSettings, tmp_path: Path):
    one = task("react/save-primary")
    broken = tmp_path / "broken-app"
    shutil.copytree(one.app.directory, broken, ignore=shutil.ignore_patterns("node_modules"))
    (broken / "src" / "App.tsx").write_text((broken / "src" / "App.tsx").read_text() + "\nconst n: number = 'x';\n")
    app = replace(one.app, directory=broken)
    [row] = run_suite([replace(one, app=app)], _typecheck_settings(settings), lambda t, _r: scripted(script(t)),
                      typechecks=TypecheckCache())
    _ran_or_npm_missing(row)
    assert row["typecheck"].startswith("unavailable: typecheck check skipped: it already fails on the unchanged app")
    shown = row["typecheck"]
    assert "\n" not in shown and "TS2322" not in shown and "src/App.tsx" not in shown and str(tmp_path) not in shown
    assert row["passed"]  # the predicates held; the column says the typecheck did not run


def _ran_or_npm_missing(row: dict) -> None:
    if "npm" in row["typecheck"] or "cannot be confined" in row["typecheck"]:
        pytest.skip(f"{row['task']}: typecheck {row['typecheck']}")
