"""The protocol and rpc packages split by concern (issue 21): modules stay small, the ``models`` name space
re-exports exactly what the concern modules define, and each name is loaded from its own module."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import spotpatch_agent
from spotpatch_agent.protocol import models
from spotpatch_agent.protocol.catalog import CATALOG

PACKAGE = Path(spotpatch_agent.__file__).parent
MAX_LINES = 550  # issue 21: no module of the package over 550 lines


@pytest.mark.parametrize("folder", ["protocol", "rpc"])
def test_no_module_is_over_550_lines(folder: str) -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / folder).glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


@pytest.mark.parametrize("module", sorted(models.MODULES))
def test_models_lists_exactly_what_each_concern_module_defines(module: str) -> None:
    concern = importlib.import_module(f"spotpatch_agent.protocol.{module}")
    assert sorted(concern.__all__) == sorted(models.MODULES[module])
    for name in concern.__all__:
        assert getattr(models, name) is getattr(concern, name), name


def test_per_method_names_are_the_shared_shapes() -> None:
    assert models.JobApplyResult is models.JobSnapshot and models.JobGetParams is models.JobIdParams
    assert models.HealthGetResult is models.RepoHealth and models.ShutdownParams is models.EmptyParams
    assert set(models.PER_METHOD) <= set(models.__all__) and set(models.PER_METHOD.values()) <= set(models.__all__)
    with pytest.raises(AttributeError):
        models.NoSuchModel  # noqa: B018


def test_every_catalog_model_name_resolves() -> None:
    for spec in CATALOG:
        for name, value in ((spec.params_model, spec.params), (spec.result_model, spec.result)):
            assert (name is None) == (value is None), spec.method
            assert value is None or value is getattr(models, name), spec.method


def test_a_concern_module_loads_only_what_it_needs() -> None:
    code = ("import sys; from spotpatch_agent.protocol.models import InitializeParams, JobCreateParams; "
            "from spotpatch_agent.protocol import catalog; "
            "catalog.bind_handlers({m: None for m in catalog.served_requests()}); "
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('spotpatch_agent.protocol.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    loaded = set(ast.literal_eval(out.stdout))
    assert {"session", "jobs", "config", "annotation", "base", "providers"} <= loaded
    assert not loaded & {"audit", "suggestion", "events", "schema", "docgen"}, loaded
