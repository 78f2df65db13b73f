"""The fixed conversation of the offline demo (``spotpatch-agent demo``).

A local scripted OpenAI-compatible server plays :func:`demo_turns` in order through the real engine
against a copy of ``spotpatch_agent/demo/app``. ``DEMO_TARGETS`` is the annotation the demo job is
created with and ``EXPECTED_AFTER`` is the exact content of every file the job changes.

Every line and column below is a literal (1-based) that matches the files in ``demo/app``; a test
should keep them in sync.
"""

from __future__ import annotations

import copy
from typing import Any

PRODUCT_CARD = "src/components/ProductCard.tsx"

DEMO_TARGETS: list[dict[str, Any]] = [
    {
        "index": 1,
        "instruction": "Make the Save button the primary button (class `btn-primary`).",
        "source": {"file": PRODUCT_CARD, "line": 12, "column": 7},
        "element": {"tagName": "button", "text": "Save", "attributes": {"class": "btn btn-secondary"}},
    },
    {
        "index": 2,
        "instruction": "Show the price with two decimals.",
        "source": {"file": PRODUCT_CARD, "line": 11, "column": 7},
        "element": {"tagName": "span", "text": "$19.5", "attributes": {"class": "price"}},
    },
]

EXPECTED_AFTER: dict[str, str] = {
    PRODUCT_CARD: (
        "type ProductCardProps = {\n"
        "  name: string;\n"
        "  price: number;\n"
        "  onSave: () => void;\n"
        "};\n"
        "\n"
        "export function ProductCard({ name, price, onSave }: ProductCardProps) {\n"
        "  return (\n"
        '    <section className="card">\n'
        "      <h2>{name}</h2>\n"
        '      <span className="price">${price.toFixed(2)}</span>\n'
        '      <button className="btn btn-primary" onClick={onSave}>Save</button>\n'
        "    </section>\n"
        "  );\n"
        "}\n"
    ),
}

_FINAL_TEXT = (
    "Target 1: the Save button now uses btn-primary. "
    "Target 2: the price shows two decimals (toFixed(2))."
)

_TURNS: list[dict[str, Any]] = [
    {
        "text": "I'll read the component and check that the stylesheet defines btn-primary.",
        "toolCalls": [
            {
                "id": "call_read_1",
                "name": "read_file",
                "arguments": {"path": PRODUCT_CARD, "startLine": None, "endLine": None},
            },
            {
                "id": "call_search_1",
                "name": "search_text",
                "arguments": {"query": "btn-primary", "glob": "src/**/*.css", "maxResults": 20},
            },
        ],
        "argumentChunks": 3,
    },
    {
        "text": "btn-primary exists in styles.css. Editing the button class and the price format.",
        "toolCalls": [
            {
                "id": "call_edit_1",
                "name": "replace_text",
                "arguments": {
                    "path": PRODUCT_CARD,
                    "oldText": 'className="btn btn-secondary" onClick={onSave}',
                    "newText": 'className="btn btn-primary" onClick={onSave}',
                },
            },
            {
                "id": "call_edit_2",
                "name": "replace_text",
                "arguments": {
                    "path": PRODUCT_CARD,
                    "oldText": '<span className="price">${price}</span>',
                    "newText": '<span className="price">${price.toFixed(2)}</span>',
                },
            },
        ],
        "argumentChunks": 3,
    },
    {
        "text": "Verifying the edited lines.",
        "toolCalls": [
            {
                # Reusing an id from an earlier turn is legal (docs/design.md §5).
                "id": "call_read_1",
                "name": "read_file",
                "arguments": {"path": PRODUCT_CARD, "startLine": 9, "endLine": 14},
            },
        ],
        "argumentChunks": 3,
    },
    {"text": _FINAL_TEXT, "finishReason": "stop"},
]


def demo_turns(*, check_id: str | None = None) -> list[dict[str, Any]]:
    """The scripted model turns, in order (a fresh copy on every call). With ``check_id`` (a configured
    check, e.g. the demo's ``typecheck``) the model runs that check with ``run_check`` before its final text."""
    turns = copy.deepcopy(_TURNS)
    if check_id is not None:
        turns.insert(-1, {
            "text": f"Running the project's {check_id} check on the edited file.",
            "toolCalls": [{"id": "call_check_1", "name": "run_check", "arguments": {"checkId": check_id}}],
            "argumentChunks": 2,
        })
    return turns


#: Jobs a replaying script serves before it is exhausted (``demo --serve`` runs until Ctrl-C).
REPLAY_JOBS = 1000


def replaying_demo_turns(*, check_id: str | None = None, jobs: int = REPLAY_JOBS) -> list[Any]:
    """The demo conversation for every job of a long session (``spotpatch-agent demo --serve``): each request
    gets the turn matching its place in its own conversation — the number of assistant messages already in
    the Chat Completions request — so job 2 starts again at turn 1. ``jobs`` bounds the requests served
    (each job takes ``len(demo_turns())`` of them). Whatever the page asked, the edits are the demo's."""
    turns = demo_turns(check_id=check_id)

    def turn(body: object) -> dict[str, Any]:  # the request's JSON body, whatever the page sent
        messages = body.get("messages") if isinstance(body, dict) else None
        done = sum(1 for m in messages or () if isinstance(m, dict) and m.get("role") == "assistant")
        return copy.deepcopy(turns[min(done, len(turns) - 1)])

    return [turn] * (jobs * len(turns))
