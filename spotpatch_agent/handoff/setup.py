"""``spotpatch-agent mcp --print-config CLIENT``: how to add SpotPatch's MCP server to a client (docs/mcp.md), with
this machine's command and project filled in. Prints to the user's own terminal only; writes nothing."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from spotpatch_agent.exit_codes import EXIT_OK


def engine_command() -> str:
    """The absolute path of this ``spotpatch-agent`` (a client starts it without the user's shell or venv)."""
    here = Path(sys.argv[0])
    if here.name.startswith("spotpatch-agent") and here.exists():
        return str(here.resolve())
    found = shutil.which("spotpatch-agent")
    return str(Path(found).resolve()) if found else "spotpatch-agent"


def config_text(client: str, command: str, project: Path) -> str:
    """The set-up for ``client`` (claude-code, codex, vscode, cursor): a command line or a file snippet."""
    args = ["mcp", "--project", str(project)]
    if client == "claude-code":
        return ("# In the project, once (add --scope project to share it through .mcp.json):\n"
                + shlex.join(["claude", "mcp", "add", "spotpatch", "--", command, *args]) + "\n")
    if client == "codex":
        return ("# Add to ~/.codex/config.toml (or .codex/config.toml in a trusted project):\n"
                "[mcp_servers.spotpatch]\n"
                f"command = {json.dumps(command)}\n"
                f"args = {json.dumps(args)}\n")
    if client == "vscode":
        body = {"servers": {"spotpatch": {"type": "stdio", "command": command,
                                          "args": ["mcp", "--project", "${workspaceFolder}"]}}}
        return ("// .vscode/mcp.json in the project (or your user mcp.json, with the app's path for "
                "${workspaceFolder}):\n" + json.dumps(body, indent=2) + "\n")
    body = {"mcpServers": {"spotpatch": {"command": command, "args": ["mcp", "--project", "${workspaceFolder}"]}}}
    return ("// .cursor/mcp.json in the project (or ~/.cursor/mcp.json, with the app's path for "
            "${workspaceFolder}):\n" + json.dumps(body, indent=2) + "\n")


def print_config(client: str, project: Path) -> int:
    sys.stdout.write(config_text(client, engine_command(), project.resolve()))
    sys.stdout.flush()
    return EXIT_OK
