"""MCP servers as agent tools.

- ``config``: ``load_mcp_servers``, ``McpServerConfig``: ``.mcp.json`` and settings' servers.
- ``client``: ``McpManager``: one client session per server, shared by the agents of a host.
- ``tools``: ``McpTool``: an MCP tool as a harness tool; resource tools; result rendering.
- ``catalog``: ``McpToolset``, ``install_mcp``: the MCP tools one agent is offered.
"""

__all__ = ["catalog", "client", "config", "tools"]
