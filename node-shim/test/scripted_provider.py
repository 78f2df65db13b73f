"""Test helper for the Node tests: serve a scripted OpenAI-compatible provider on 127.0.0.1.

Usage: python scripted_provider.py SCRIPT. Prints the base URL on stdout, then serves until stdin
reaches EOF. SCRIPT is one of:
  demo        — the demo conversation (spotpatch_agent.demo.script.demo_turns)
  stall-demo  — a first turn that stalls forever, then the demo conversation
"""

from __future__ import annotations

import sys

from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.provider.scripted import ScriptedProviderServer

SCRIPTS = {
    "demo": lambda: demo_turns(),
    "stall-demo": lambda: [{"stall": True}, *demo_turns()],
}


def main() -> int:
    script = SCRIPTS[sys.argv[1]]()
    with ScriptedProviderServer(script) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
