"""The method catalog matches docs/design.md §3 and the handler table ``serve()`` really serves."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from spotpatch_agent import cli
from spotpatch_agent.protocol.catalog import CATALOG, METHODS, bind_handlers, served_requests
from spotpatch_agent.protocol.models import InModel
from tests.engine_client import EngineProcess

#: docs/design.md §3 as implemented: method → (direction, kind).
DESIGN_METHODS = {
    "initialize": ("client-to-engine", "request"),
    "initialized": ("client-to-engine", "notification"),
    "shutdown": ("client-to-engine", "request"),
    "exit": ("client-to-engine", "notification"),
    "$/cancelRequest": ("client-to-engine", "notification"),
    "health/get": ("client-to-engine", "request"),
    "session/get": ("client-to-engine", "request"),  # added for the page overlay (issue 13)
    "prompt/render": ("client-to-engine", "request"),
    "provider/list": ("client-to-engine", "request"),
    "provider/probe": ("client-to-engine", "request"),
    "job/create": ("client-to-engine", "request"),
    "job/get": ("client-to-engine", "request"),
    "job/list": ("client-to-engine", "request"),
    "job/events": ("client-to-engine", "request"),
    "job/diff": ("client-to-engine", "request"),
    "job/audit": ("client-to-engine", "request"),
    "job/suggest": ("client-to-engine", "request"),
    "job/cancel": ("client-to-engine", "request"),
    "job/apply": ("client-to-engine", "request"),
    "job/revert": ("client-to-engine", "request"),
    "job/close": ("client-to-engine", "request"),
    "job/event": ("engine-to-client", "notification"),
    "$/logTrace": ("engine-to-client", "notification"),
}


def test_catalog_is_design_section_3() -> None:
    assert {s.method: (s.direction, s.kind) for s in CATALOG} == DESIGN_METHODS
    assert len(METHODS) == len(CATALOG)


def test_catalog_entries_are_consistent() -> None:
    for spec in CATALOG:
        assert spec.summary and spec.summary.endswith(".") and "\n" not in spec.summary, spec.method
        assert len(set(spec.errors)) == len(spec.errors), spec.method
        if spec.kind == "notification":
            assert spec.result is None, spec.method
        elif spec.method != "shutdown":
            assert spec.result is not None, spec.method
        if spec.direction == "client-to-engine" and spec.params is not None:
            assert issubclass(spec.params, InModel), f"{spec.method}: client params must forbid unknown keys"
            assert spec.params.model_config.get("extra") == "forbid"
        if spec.direction == "engine-to-client":
            assert spec.served_by == "engine"


def _handler_keys_in_serve() -> set[str]:
    """The method names of the dict ``serve()`` passes to ``bind_handlers`` (read from its source)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cli.serve)))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "bind_handlers"]
    assert len(calls) == 1, "serve() must build its handler table with exactly one bind_handlers({...}) call"
    [table] = calls[0].args
    assert isinstance(table, ast.Dict)
    return {key.value for key in table.keys if isinstance(key, ast.Constant)}


def test_serve_handler_table_equals_the_catalog_requests() -> None:
    assert _handler_keys_in_serve() == set(served_requests())
    assert served_requests() == {s.method for s in CATALOG if s.kind == "request"} - {"shutdown"}


def test_bind_handlers_pairs_catalog_params_and_rejects_drift() -> None:
    async def fn(_params: object) -> None:
        return None

    table = bind_handlers(dict.fromkeys(served_requests(), fn))
    assert all(table[m] == (METHODS[m].params, fn) for m in served_requests())
    with pytest.raises(ValueError, match="missing \\['job/get'\\]"):
        bind_handlers({m: fn for m in served_requests() if m != "job/get"})
    with pytest.raises(ValueError, match="not in catalog \\['job/frobnicate'\\]"):
        bind_handlers({**dict.fromkeys(served_requests(), fn), "job/frobnicate": fn})


def test_every_catalog_request_is_served_and_nothing_else(tmp_path: Path) -> None:
    """Over a real ``serve``: each catalog request gets anything but -32601; an unknown method gets -32601."""
    eng = EngineProcess()
    try:
        eng.initialize(tmp_path)  # not a git repository: accepted, health/get reports blocked
        for method in sorted(served_requests() - {"initialize"}):
            reply = eng.request(method, {})
            assert reply.get("error", {}).get("code") != -32601, method
        assert eng.request("job/frobnicate", {})["error"]["code"] == -32601
        assert eng.request("shutdown")["result"] is None
    finally:
        eng.stop()
