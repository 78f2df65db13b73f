"""``spotpatch-agent eval`` as a user runs it (a real process): the progress on stderr, the table on stdout,
the JSON file, the exit codes, and the key — a canary — nowhere in any of them (invariant 3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from spotpatch_agent.eval.cli import edit_format_supported
from spotpatch_agent.eval.report import EVAL_JSON_SCHEMA
from spotpatch_agent.eval.runner import EvalSettings, build_config
from spotpatch_agent.protocol.config import ModelProfile
from spotpatch_agent.provider.scripted import ScriptedProviderServer

from .conftest import script, task

CANARY = "sk-canary-eval-5Kq8RzT2wN7yB3xV"


def _eval(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SPOTPATCH_MODEL")}
    return subprocess.run([sys.executable, "-m", "spotpatch_agent", "eval", *args], env={**base, **(env or {})},
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_eval_runs_a_task_prints_progress_and_a_table_and_writes_json_without_the_key(tmp_path: Path):
    one, two = task("react/save-primary"), task("react/price-decimals")
    # The second job's provider fails after its edit, every retry quoting the key in its error message.
    turns = [*script(one), *script(two)[:2], *[{"status": 500, "body": {"error": {"message": "boom " + CANARY}}}] * 5]
    with ScriptedProviderServer(turns) as server:
        out = tmp_path / "eval.json"
        temp = tmp_path / "tmp"
        temp.mkdir()
        done = _eval("--base-url", server.base_url, "--model", "scripted", "--tasks", "react/save-primary,"
                     "react/price-decimals", "--json", str(out), "--no-typecheck", "--timeout", "60",
                     env={"OPENAI_API_KEY": CANARY, "TMPDIR": str(temp)})
    assert list(temp.iterdir()) == []  # every temp project removed
    assert done.returncode == 1, done.stderr  # one task failed
    assert "[  1/2] react/save-primary (run 1): PASS" in done.stderr
    assert "[  2/2] react/price-decimals (run 1): FAIL (" in done.stderr
    assert done.stdout.startswith("spotpatch-agent eval: model 'scripted' at 127.0.0.1:")
    assert "pass rate: 1/2 (50.0%)" in done.stdout
    document = json.loads(out.read_text("utf-8"))
    jsonschema.validate(document, EVAL_JSON_SCHEMA)
    assert [r["passed"] for r in document["results"]] == [True, False]
    failed = document["results"][1]
    assert (failed["diagnosis"], failed["errorCode"]) == ("provider", "PROVIDER_UNAVAILABLE")
    assert "boom [REDACTED]" in failed["message"] and "boom [REDACTED]" in done.stdout
    for text in (done.stdout, done.stderr, out.read_text("utf-8")):
        assert CANARY not in text and CANARY[:12] not in text


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m"], {}, "the key variable OPENAI_API_KEY is not set"),
    (["--model", "m"], {"OPENAI_API_KEY": CANARY}, "give --base-url and --model"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--json", "no-such-dir/out.json"],
     {"OPENAI_API_KEY": CANARY}, "--json out.json: its folder does not exist"),
    (["--base-url", "127.0.0.1:8080", "--model", "m"], {"OPENAI_API_KEY": CANARY},
     "baseUrl must start with http:// or https://"),
    (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--tasks", "angular/*"], {"OPENAI_API_KEY": CANARY},
     "no task id matches 'angular/*'"),
])
def test_usage_errors_exit_2_and_say_why(args: list[str], env: dict[str, str], says: str):
    done = _eval(*args, env=env)
    assert done.returncode == 2 and says in done.stderr and CANARY not in done.stderr + done.stdout


def test_list_prints_every_task_without_a_provider():
    done = _eval("--list")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 27
    assert done.stdout.splitlines()[0].startswith("react/save-primary")


def test_the_edit_format_is_passed_through_only_where_the_config_model_has_it():
    settings = EvalSettings(base_url="http://127.0.0.1:9/v1", model="m", edit_format="anchors")
    if "edit_format" in ModelProfile.model_fields:  # issue 27 part 2 landed: the flag reaches the profile
        assert edit_format_supported("anchors") is None
        assert build_config(settings, settings.base_url, None).providers[0].models[0].edit_format == "anchors"
    else:
        assert "only --edit-format replace runs here" in (edit_format_supported("anchors") or "")
        done = _eval("--base-url", settings.base_url, "--model", "m", "--edit-format", "anchors",
                     env={"OPENAI_API_KEY": CANARY})
        assert done.returncode == 2 and "editFormat" in done.stderr
    assert edit_format_supported("replace") is None
    plain = EvalSettings(base_url="http://127.0.0.1:9/v1", model="m")
    assert build_config(plain, plain.base_url, None).dump()["providers"][0]["models"][0].get("editFormat",
                                                                                           "replace") == "replace"


def test_ctrl_c_keeps_the_finished_runs_in_the_table_and_json_and_leaves_no_temp_project(tmp_path: Path):
    one = task("vue/save-primary")
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = tmp_path / "eval.json"
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SPOTPATCH_MODEL")}
    with ScriptedProviderServer([*script(one), {"stall": True}]) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spotpatch_agent", "eval", "--base-url", server.base_url, "--model", "scripted",
             "--tasks", "vue/save-primary,vue/price-decimals", "--json", str(out), "--no-typecheck"],
            env={**base, "OPENAI_API_KEY": CANARY, "TMPDIR": str(temp)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()
            assert "[  1/2] vue/save-primary (run 1): PASS" in first
            deadline = time.monotonic() + 30
            while len(server.requests) < 4 and time.monotonic() < deadline:  # the second job is waiting on the stall
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, stderr
    assert "interrupted" in stderr
    assert "INTERRUPTED: 1 of 2 runs finished" in stdout and "pass rate: 1/1" in stdout
    document = json.loads(out.read_text("utf-8"))
    jsonschema.validate(document, EVAL_JSON_SCHEMA)
    assert document["complete"] is False and [r["task"] for r in document["results"]] == ["vue/save-primary"]
    assert not [p.name for p in temp.iterdir() if p.name.startswith("spotpatch-eval-")]


def test_keep_leaves_each_temp_project_with_the_applied_result_and_says_where(settings, tmp_path: Path):
    from dataclasses import replace

    from spotpatch_agent.eval.runner import run_suite

    from .oracle import scripted

    one = task("svelte/add-element")
    [row] = run_suite([one], replace(settings, keep=True), lambda t, _r: scripted(script(t)))
    kept = Path(row["keptAt"])
    try:
        assert row["passed"] and kept.name == "svelte" and (kept / ".git").is_dir()
        assert ">Remove</button>" in (kept / one.app.card).read_text("utf-8")
    finally:
        shutil.rmtree(kept.parent, ignore_errors=True)
