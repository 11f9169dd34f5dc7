"""The MCP face: shadowkernel's workspace as tools for agents outside the notebook.

    shadowkernel mcp SRC                       # stdio, for an agent's MCP configuration
    shadowkernel mcp SRC --http 127.0.0.1:8765 # streamable HTTP, bearer token, many agents
    %shadow mcp                                # the notebook's live workspace, over HTTP

`tools` is the pure table over the public API (`Workspace`, `Branch`), `server` registers
it with the official `mcp` SDK and translates errors at its one edge, `transports` serves
it, `snippets` prints what an agent's configuration needs. Importing this package needs
the `mcp` extra (`pip install 'shadowkernel[mcp]'`); `tools` alone does not. mcp/ is a face:
it calls the public API and may import anything below it; the kernel imports it for
`%shadow mcp`.
"""

from .tools import TOOL_NAMES, Tools

__all__ = ["TOOL_NAMES", "Tools"]
