"""Bring your own agent (issue 28, docs/mcp.md): jobs the page sends "to my agent" are done by a coding agent the
developer already uses, over MCP, through the same job pipeline as a model's.

- ``channel``: where the engine of a project listens for agents (a Unix socket in a private directory) and the
  checks on both ends (directory owner and mode, peer uid), plus the framing both ends speak.
- ``hub``: the engine's side — the jobs waiting for an agent, who took which, and the ``agent/*`` requests.
- ``mcp_server``: ``spotpatch-agent mcp``, the MCP stdio server an MCP client starts; it forwards the agent's
  tool calls to the project's engine over the channel. It imports the ``mcp`` SDK; nothing else here does.
"""
