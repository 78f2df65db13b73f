"""The eval's fixed suite (issue 27 part 1): its shape, every task's oracle passing through the real engine
and the judge, the JSON document against its schema, and the table's layout (a snapshot)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema

from spotpatch_agent.eval.report import EVAL_JSON_SCHEMA, eval_document, format_table
from spotpatch_agent.eval.runner import EvalSettings, run_suite
from spotpatch_agent.eval.tasks import APPS, all_tasks, select_tasks

from .oracle import script, scripted

SNAPSHOT = Path(__file__).with_name("table.snapshot.txt")


def test_the_suite_has_at_least_24_tasks_of_every_kind_on_three_apps():
    tasks = all_tasks()
    assert len(tasks) >= 24 and len({t.id for t in tasks}) == len(tasks)
    assert {t.app.name for t in tasks} == {"react", "vue", "svelte"}
    assert {t.kind for t in tasks} == {"class", "number-format", "text-usage-chain", "text-search", "reorder",
                                       "add-element", "prop-usage-chain", "multi-target"}
    multi = [t for t in tasks if t.kind == "multi-target"]
    # Multi-target tasks: 2–3 targets, each in a different file.
    assert {len(t.targets) for t in multi} == {2, 3}
    for t in multi:
        files = [x.at.path for x in t.targets if x.at is not None]
        assert len(set(files)) == len(files) == len(t.targets)
    # The search task's target has no located source: the model has to find the file.
    assert all(t.targets[0].at is None for t in tasks if t.kind == "text-search")


def test_every_target_location_points_at_its_element_start_tag_in_the_shipped_app():
    for t in all_tasks():
        annotation = t.annotation()
        assert annotation == t.annotation()  # deterministic
        for target in annotation["targets"]:
            source = target.get("source")
            if source is None:
                continue
            line = t.app.read(source["file"]).splitlines()[source["line"] - 1]
            assert line[source["column"] - 1:].startswith("<" + target["element"]["tagName"]), (t.id, line)
            for site in target.get("usageChain", ()):
                used = t.app.read(site["file"]).splitlines()[site["line"] - 1]
                assert used[site["column"] - 1:].startswith("<" + site["component"]), (t.id, used)


def test_task_patterns_select_by_glob():
    assert [t.id for t in select_tasks("vue/price-*")] == ["vue/price-decimals"]
    assert len(select_tasks("*/prop-chain,react/*")) == 3 + 9 - 1
    assert select_tasks("nothing/*") == []
    assert len(select_tasks(None)) == len(all_tasks())


def test_the_apps_ship_in_the_package_with_the_same_page():
    for app in APPS.values():
        for path in (app.app, app.header, app.card, app.items, "package.json", "tsconfig.json"):
            assert (app.directory / path).is_file(), (app.name, path)
        assert "typecheck" in json.loads((app.directory / "package.json").read_text())["scripts"]
        assert "Saved to your list." in app.read(app.app)


def test_every_oracle_passes_every_judge_through_the_real_engine(settings: EvalSettings):
    tasks = all_tasks()
    progress = io.StringIO()
    rows = run_suite(tasks, settings, lambda t, _run: scripted(script(t)), out=progress)
    failed = {r["task"]: (r["diagnosis"], r["errorCode"], r["reasons"], r["message"]) for r in rows if not r["passed"]}
    assert not failed
    for task, row in zip(tasks, rows, strict=True):
        assert row["status"] == "awaiting-review" and row["diagnosis"] == "pass"
        assert set(row["changedFiles"]) == set(task.files)
        assert row["typecheck"] == "unavailable: off (--no-typecheck)"  # said, never a silent pass
        assert row["turns"] == 3 and row["toolCalls"] == len(task.oracle) + len(task.files) + bool(task.search)
        assert row["tokensIn"] == 300 and row["tokensOut"] == 60  # the scripted usage, 3 turns
        assert row["wallMs"] >= row["modelMs"] and row["engineMs"] == row["wallMs"] - row["modelMs"]
    lines = progress.getvalue().splitlines()
    assert lines[0].startswith(f"[  1/{len(tasks)}] react/save-primary (run 1): PASS")
    assert len(lines) == len(tasks)
    document = eval_document(settings, [t.id for t in tasks], rows)
    jsonschema.validate(document, EVAL_JSON_SCHEMA)
    assert document["schema"] == "spotpatch-eval" and document["version"] == 1
    assert document["summary"]["total"]["passRate"] == 1.0
    assert document["settings"]["host"] == "127.0.0.1:9"  # host and port only
    assert "pass rate: 27/27 (100.0%)" in format_table(document)


def _fixed_document() -> dict:
    settings = EvalSettings(base_url="http://user:pw@127.0.0.1:8080/v1?x=1", model="qwen2.5-coder-1.5b")
    base = {"app": "react", "run": 1, "status": "awaiting-review", "errorCode": None, "message": None,
            "reasons": [], "typecheck": "passed", "changedFiles": ["src/components/ProductCard.tsx"], "turns": 3,
            "toolCalls": 3, "failedCalls": {}, "requests": 3, "tokensIn": 5120, "tokensOut": 210, "wallMs": 41000,
            "modelMs": 36500, "engineMs": 4500, "timedOut": False, "passed": True, "diagnosis": "pass"}
    rows = [
        {**base, "task": "react/save-primary", "kind": "class"},
        {**base, "task": "react/price-decimals", "kind": "number-format", "passed": False, "diagnosis": "model",
         "reasons": [("src/components/ProductCard.tsx: should match 'toFixed' (the price is formatted with two "
                      "decimals)")], "failedCalls": {"PATCH_REJECTED": 2, "TOOL_ARGUMENTS_INVALID": 1}},
        {**base, "task": "vue/heading-text", "app": "vue", "kind": "text-usage-chain", "passed": False,
         "diagnosis": "provider", "status": "failed", "errorCode": "PROVIDER_UNAVAILABLE", "typecheck": "not run",
         "message": "the provider reported a server error", "tokensIn": None, "tokensOut": None, "changedFiles": []},
        {**base, "task": "svelte/list-reorder", "app": "svelte", "kind": "reorder",
         "typecheck": "unavailable: npm is not on PATH"},
    ]
    return eval_document(settings, [r["task"] for r in rows], rows)


def test_the_table_and_the_json_of_a_fixed_result_set():
    document = _fixed_document()
    jsonschema.validate(document, EVAL_JSON_SCHEMA)
    assert document["settings"]["host"] == "127.0.0.1:8080"  # no credentials, path or query
    table = format_table(document)
    assert table == SNAPSHOT.read_text("utf-8"), "the table changed: update table.snapshot.txt and docs/eval.md"
    total = document["summary"]["total"]
    assert total["failedCalls"] == {"PATCH_REJECTED": 2, "TOOL_ARGUMENTS_INVALID": 1}
    assert total["diagnoses"] == {"pass": 2, "model": 1, "provider": 1}
    assert total["typecheck"] == {"passed": 2, "not run": 1, "unavailable": 1}
    assert document["summary"]["byApp"]["react"]["passed"] == 1
