"""The eval's tests run each task's job through the real engine against a local scripted provider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from spotpatch_agent.eval.runner import EvalSettings, TypecheckCache, run_suite
from spotpatch_agent.eval.tasks import Task, select_tasks

from .oracle import script, scripted

KEY_ENV = "SPOTPATCH_EVAL_TEST_KEY"


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> EvalSettings:
    monkeypatch.setenv(KEY_ENV, "sk-eval-test-key")
    return EvalSettings(base_url="http://127.0.0.1:9/v1", model="scripted", key_env=KEY_ENV, typecheck=False,
                        timeout=60)


def task(task_id: str) -> Task:
    [one] = select_tasks(task_id)
    return one


#: Shared by the tests that run the apps' typecheck: each app's baseline check runs once per session.
TYPECHECKS = TypecheckCache()


def run_one(one: Task, settings: EvalSettings, turns: list[Any] | Callable[[Task], list[Any]]) -> dict[str, Any]:
    """One run of ``one`` with a scripted provider playing ``turns``; the result row."""
    played = turns(one) if callable(turns) else turns
    [row] = run_suite([one], settings, lambda _t, _r: scripted(played),
                      typechecks=TYPECHECKS if settings.typecheck else None)
    return row


__all__ = ["KEY_ENV", "run_one", "script", "task"]
