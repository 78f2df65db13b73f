"""Fixtures for the tool tests: anyio on asyncio, and an executor over a fresh one-commit repo."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.tools import ToolExecutor


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_executor(repo_factory) -> Callable[..., tuple[Path, ToolExecutor]]:
    """``make_executor(files, **limits)`` -> (root, executor) over a fresh repo holding ``files``."""

    def factory(files: dict[str, str | bytes], **limits: int) -> tuple[Path, ToolExecutor]:
        root = repo_factory(files)
        return root, ToolExecutor(root, Limits(**limits))

    return factory


def call(**arguments: object) -> str:
    """Arguments JSON text, as a provider would send it."""
    return json.dumps(arguments)
