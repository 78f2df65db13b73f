"""Test helper for the Node tests: serve a scripted OpenAI-compatible provider on 127.0.0.1.

Usage: python scripted_provider.py SCRIPT. Prints the base URL on stdout, then serves until stdin
reaches EOF. SCRIPT is one of:
  demo        — the demo conversation (spotpatch_agent.demo.script.demo_turns)
  stall-demo  — a first turn that stalls forever, then the demo conversation
  slow-demo   — the demo conversation, each streamed chunk 0.25 s after the one before (a job that takes
                seconds, its timeline growing while the page watches)
  hostile     — HTML/script payloads in the model's text, a diff line and a new file's name (the overlay's
                hostile test: each payload calls __pwn(n) if it ever runs)
  plain       — test/apps/plain: the Save button's background in style.css becomes blue (#2563eb)
  vue-ts      — create-vite's vue-ts template: HelloWorld.vue's counter reads "Clicks: {{ count }}"
  svelte-ts   — create-vite's svelte-ts template: Counter.svelte's button reads "Clicks: {count}"
  suggest     — a model that cannot call tools: a plain-text first turn (the job fails with
                MODEL_TOOL_CALL_UNSUPPORTED), then a text-only suggestion for the read-only suggestion lane
                (one citation inside the excerpt, one outside it, and a diff that applies to the excerpt)
  react-ts    — create-vite's react-ts template: App.tsx's counter button reads "Clicks: {count}"
  preact-ts   — create-vite's preact-ts template: app.tsx's counter button reads "Clicks: {count}"
  solid-ts    — create-vite's solid-ts template: App.tsx's counter button reads "Clicks: {count()}"
  vanilla-ts  — create-vite's vanilla-ts template: counter.ts sets the button's text to "Clicks: ${counter}"
  remove-save — the demo app: the Save button's line is removed from ProductCard.tsx (the overlay's visual
                evidence test: the element no longer exists after Apply)
"""

from __future__ import annotations

import sys
import threading

from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer

PRODUCT_CARD = "src/components/ProductCard.tsx"
HOSTILE_FILE = "src/<img src=x onerror=__pwn(5)>.txt"


def hostile_turns() -> list[dict]:
    """Payloads the overlay must show as text: model messages, a changed line, a file name (issue 13 (h))."""
    patch = (
        f"diff --git a/{HOSTILE_FILE} b/{HOSTILE_FILE}\nnew file mode 100644\n--- /dev/null\n+++ b/{HOSTILE_FILE}\n"
        "@@ -0,0 +1 @@\n+<script>__pwn(6)</script><img src=x onerror=__pwn(7)>\n"
    )
    return [
        {
            "text": "<img src=x onerror=__pwn(4)> reading <b>the</b> card",
            "toolCalls": [{"id": "call_read", "name": "read_file",
                           "arguments": {"path": PRODUCT_CARD, "startLine": None, "endLine": None}}],
        },
        {
            "text": "<script>__pwn(8)</script> editing",
            "toolCalls": [
                {
                    "id": "call_edit",
                    "name": "replace_text",
                    "arguments": {
                        "path": PRODUCT_CARD,
                        "oldText": "<h2>{name}</h2>",
                        "newText": "<h2>{name}</h2>{/* <img src=x onerror=__pwn(9)><script>__pwn(10)</script> */}",
                    },
                },
                {"id": "call_patch", "name": "apply_patch", "arguments": {"patch": patch}},
            ],
        },
        {"text": "<iframe srcdoc=\"<script>parent.__pwn(11)</script>\"></iframe> done", "finishReason": "stop"},
    ]


def edit_turns(path: str, old: str, new: str, what: str) -> list[dict]:
    """Read ``path``, replace ``old`` by ``new`` in it, say ``what`` was done (the overlay's app tests)."""
    return [
        {
            "text": f"Reading {path}.",
            "toolCalls": [{"id": "call_read", "name": "read_file",
                           "arguments": {"path": path, "startLine": None, "endLine": None}}],
        },
        {
            "text": "Editing it.",
            "toolCalls": [{"id": "call_edit", "name": "replace_text",
                           "arguments": {"path": path, "oldText": old, "newText": new}}],
        },
        {"text": what, "finishReason": "stop"},
    ]


# Edits of the overlay's acceptance-2 apps (node-shim/test/overlay/overlay-picker-apps.test.mjs); each old text is
# a literal of the app's file (test/apps/plain, or create-vite's template at the installed version).
APP_EDITS = {
    "plain": ("style.css", "  background: #e5e7eb;\n  color: #111827;", "  background: #2563eb;\n  color: #ffffff;",
              "The Save button is blue."),
    "vue-ts": ("src/components/HelloWorld.vue", "      Count is {{ count }}", "      Clicks: {{ count }}",
               "The counter says Clicks."),
    "svelte-ts": ("src/lib/Counter.svelte", "  Count is {count}", "  Clicks: {count}", "The counter says Clicks."),
    "react-ts": ("src/App.tsx", "          Count is {count}", "          Clicks: {count}", "The counter says Clicks."),
    "preact-ts": ("src/app.tsx", "          Count is {count}", "          Clicks: {count}", "The counter says Clicks."),
    "solid-ts": ("src/App.tsx", "          Count is {count()}", "          Clicks: {count()}",
                 "The counter says Clicks."),
    "vanilla-ts": ("src/counter.ts", "element.innerHTML = `Count is ${counter}`",
                   "element.innerHTML = `Clicks: ${counter}`", "The counter says Clicks."),
}

SUGGESTION = (
    "### Target 1\nWhere: src/components/ProductCard.tsx:12\n"
    "Change: give the Save button the class btn-primary instead of btn-secondary.\n\n"
    "### Target 2\nWhere: src/components/ProductCard.tsx:11 (and the helper at src/components/ProductCard.tsx:40)\n"
    "Change: show the price with price.toFixed(2).\n\n"
    "```diff\ndiff --git a/src/components/ProductCard.tsx b/src/components/ProductCard.tsx\n"
    "--- a/src/components/ProductCard.tsx\n+++ b/src/components/ProductCard.tsx\n@@ -11,2 +11,2 @@\n"
    "-      <span className=\"price\">${price}</span>\n"
    "-      <button className=\"btn btn-secondary\" onClick={onSave}>Save</button>\n"
    "+      <span className=\"price\">${price.toFixed(2)}</span>\n"
    "+      <button className=\"btn btn-primary\" onClick={onSave}>Save</button>\n```\n"
)


def suggest_turns() -> list[dict]:
    """A model that answers in text only: the job's first turn, then the suggestion lane's one request."""
    return [
        {"text": "I would make the Save button primary and format the price.", "finishReason": "stop"},
        {"text": SUGGESTION, "finishReason": "stop"},
    ]


SCRIPTS = {
    "demo": lambda: demo_turns(),
    "stall-demo": lambda: [{"stall": True}, *demo_turns()],
    "slow-demo": lambda: demo_turns(),
    "hostile": hostile_turns,
    "suggest": suggest_turns,
    "remove-save": lambda: edit_turns(
        PRODUCT_CARD, '\n      <button className="btn btn-secondary" onClick={onSave}>Save</button>', "",
        "The Save button is gone."),
    **{name: (lambda edit=edit: edit_turns(*edit)) for name, edit in APP_EDITS.items()},
}


def main() -> int:
    script = SCRIPTS[sys.argv[1]]()
    with ScriptedProviderServer(script, chunk_delay=0.25 if sys.argv[1] == "slow-demo" else 0.0) as server:
        print(server.base_url, flush=True)
        done = threading.Event()

        def report() -> None:  # "requests N" whenever a request arrived (support.mjs waitForRequests)
            seen = 0
            while not done.wait(0.01):
                if len(server.requests) != seen:
                    seen = len(server.requests)
                    print(f"requests {seen}", flush=True)

        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        sys.stdin.read()
        done.set()
        reporter.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
