"""The protocol package split by concern (issue 21): the ``models`` name space re-exports exactly what the
concern modules define, and each name is loaded from its own module (module sizes:
tests/architecture/test_module_size.py)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

from spotpatch_agent.protocol import models
from spotpatch_agent.protocol.catalog import CATALOG


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
