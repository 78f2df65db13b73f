"""The one builder of annotations for the tests: the wire form of ``SpotAnnotation`` (``job/create``'s and
``prompt/render``'s ``annotation``) and of its targets.

``annotation(target())`` is the usual one-button job: "Make the button say Start" on ``src/App.tsx:1``, a
``<button>Go</button>``. A test that needs another shape passes it (``target("src/Card.tsx", 30, index=2)``;
``usageChain``, ``image`` or ``area`` as keywords); ``demo_annotation()`` is the demo app's annotation. A
suite's own preset calls these, so the wire shape is written once.
"""

from __future__ import annotations

from typing import Any

from spotpatch_agent.demo.script import DEMO_TARGETS

#: The element of the usual target: the demo button before the change.
BUTTON: dict[str, Any] = {"tagName": "button", "text": "Go"}


def target(file: str | None = "src/App.tsx", line: int = 1, *, index: int = 1,
           instruction: str = "Make the button say Start", column: int | None = None, component: str | None = None,
           element: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One target; ``file=None`` leaves out its source location, ``element=None`` is :data:`BUTTON`; ``extra``
    adds the other target fields by their wire names (``usageChain``, ``image``, ``area``)."""
    made: dict[str, Any] = {"index": index, "instruction": instruction}
    if file is not None:
        source: dict[str, Any] = {"file": file, "line": line}
        if column is not None:
            source["column"] = column
        if component is not None:
            source["component"] = component
        made["source"] = source
    made["element"] = dict(BUTTON) if element is None else element
    made.update(extra)
    return made


def annotation(*targets: dict[str, Any], annotation_id: str = "a1", page_url: str = "/") -> dict[str, Any]:
    """An annotation of ``targets`` (in order; each from :func:`target` or a literal)."""
    return {"annotationId": annotation_id, "pageUrl": page_url, "targets": list(targets)}


def demo_annotation(annotation_id: str = "ann-1") -> dict[str, Any]:
    """The demo app's annotation (its two targets, spotpatch_agent/demo/script.py)."""
    return annotation(*DEMO_TARGETS, annotation_id=annotation_id)
