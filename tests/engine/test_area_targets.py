"""Issue 26: an area target carries its rectangle (page coordinates, viewport size) and the located elements
overlapping it; the prompt renders them as the places to look, and the enclosing element's location is named
as such, without a source check that helps nobody."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from spotpatch_agent.engine.prompt import render_prompt
from spotpatch_agent.protocol.models import SpotAnnotation


def area_annotation(elements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "annotationId": "a1",
        "pageUrl": "/",
        "targets": [{
            "index": 1,
            "instruction": "Tighten the spacing here.",
            "source": {"file": "src/App.tsx", "line": 4, "column": 5},
            "element": {"tagName": "region", "selector": "main > section", "text": "Save $19.5"},
            "area": {
                "rect": {"x": 100.4, "y": 1200, "width": 300, "height": 80},
                "viewportWidth": 1280, "viewportHeight": 800,
                "elements": elements,
            },
        }],
    }


ELEMENTS = [
    {"source": {"file": "src/components/ProductCard.tsx", "line": 12, "column": 7, "component": "ProductCard"},
     "tagName": "button", "rect": {"x": 110, "y": 1210, "width": 120, "height": 40}},
    {"source": {"file": "src/components/ProductCard.tsx", "line": 11, "column": 7},
     "tagName": "span", "rect": {"x": 240, "y": 1215, "width": 60, "height": 20}},
]


def test_prompt_renders_the_area_and_the_located_elements_inside_it() -> None:
    text = render_prompt(SpotAnnotation.model_validate(area_annotation(ELEMENTS))).text
    lines = text.splitlines()
    assert "Source of the element enclosing the area: src/App.tsx:4:5" in lines
    assert not any(line.startswith("Source check") or "approximate" in line.lower() for line in lines), text
    assert ("Area: a rectangle the user dragged at x 100, y 1200, 300×80 CSS px (page coordinates; viewport 1280×800). "
            "The instruction is about what it covers.") in lines
    i = lines.index("Located elements overlapping the area (largest overlap first; their sources are where to look):")
    assert lines[i + 1] == ("- <button> at src/components/ProductCard.tsx:12:7 (component ProductCard), "
                            "box 120×40 at x 110, y 1210")
    assert lines[i + 2] == "- <span> at src/components/ProductCard.tsx:11:7, box 60×20 at x 240, y 1215"


def test_an_area_without_located_elements_says_so() -> None:
    text = render_prompt(SpotAnnotation.model_validate(area_annotation([]))).text
    assert "No located element overlaps the area: find the code from the element and text below." in text


def test_an_area_carries_at_most_eight_elements_and_the_wire_names_are_camel_case() -> None:
    with pytest.raises(ValidationError):
        SpotAnnotation.model_validate(area_annotation(ELEMENTS * 5))
    dumped = SpotAnnotation.model_validate(area_annotation(ELEMENTS)).model_dump(by_alias=True, exclude_none=True)
    assert set(dumped["targets"][0]["area"]) == {"rect", "viewportWidth", "viewportHeight", "elements"}
    assert set(dumped["targets"][0]["area"]["elements"][0]) == {"source", "tagName", "rect"}
