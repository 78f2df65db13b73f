"""A coding agent for the browser tests of "Send to my agent" (issue 28): the official MCP SDK's stdio client starts
`spotpatch-agent mcp --project ROOT` (as Claude Code or Codex would), waits for the job the page sends, makes the
demo job's two edits through SpotPatch's tools, submits, then reports the job's state until the user reverted it.

Usage: python mcp_agent.py SPOTPATCH_AGENT ROOT
Prints one JSON object per line on stdout: {"step": ...}. Exit 0 when the job was reverted by the user.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FILE = "src/components/ProductCard.tsx"


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[str, bool, Any]:
    result = await session.call_tool(name, arguments)
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return text, bool(result.is_error), result.structured_content


async def main(agent: str, root: str) -> int:
    params = StdioServerParameters(command=agent, args=["mcp", "--project", root], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(
            read, write, client_info=types.Implementation(name="test-agent", version="1")) as session:
        await session.initialize()
        say(step="attached")
        # The page's "Waiting for your agent" is on screen until the agent takes the job: a test may hold it back.
        await anyio.sleep(float(os.environ.get("MCP_AGENT_TAKE_DELAY", "0")))
        deadline = time.monotonic() + 90
        while True:  # the user picks and sends meanwhile
            text, failed, data = await call(session, "spotpatch_pending", {})
            if not failed:
                break
            if time.monotonic() > deadline:
                say(step="no-job", text=text)
                return 1
            await anyio.sleep(0.3)
        say(step="taken", jobId=data["jobId"], targets=len(data["targets"]))
        text, failed, _ = await call(session, "read_file", {"path": FILE, "startLine": None, "endLine": None})
        assert not failed, text
        for old, new in (("btn btn-secondary", "btn btn-primary"), ("${price}</span>", "${price.toFixed(2)}</span>")):
            text, failed, _ = await call(session, "replace_text", {"path": FILE, "oldText": old, "newText": new})
            assert not failed, text
        text, failed, status = await call(session, "spotpatch_submit", {
            "summary": "Target 1: the Save button is primary. Target 2: the price shows two decimals."})
        say(step="submitted", status=status["status"], failed=failed)
        seen = status["status"]
        deadline = time.monotonic() + 120
        while seen != "reverted" and time.monotonic() < deadline:
            _, _, status = await call(session, "spotpatch_status", {})
            if status["status"] != seen:
                seen = status["status"]
                say(step="status", status=seen)
            await anyio.sleep(0.3)
        return 0 if seen == "reverted" else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2]))
