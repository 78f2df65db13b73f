"""Fixtures shared by the end-to-end tests: a canary API key and a fresh git copy of the demo app."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project


@pytest.fixture
def canary() -> str:
    return "sk-canary-" + secrets.token_hex(16)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_demo_project(tmp_path / "demo-app")
