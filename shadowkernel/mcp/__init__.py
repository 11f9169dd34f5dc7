"""The MCP face: shadowkernel's workspace as tools for agents outside the notebook.

    shadowkernel mcp SRC                       # stdio, for an agent's MCP configuration
    shadowkernel mcp SRC --http 127.0.0.1:8765 # streamable HTTP, bearer token, many agents
    %shadow mcp                                # the notebook's live workspace, over HTTP

The tool table itself is `agents.tools` (shared with tool-calling agents, below this face);
`server` registers it with the official `mcp` SDK and translates errors at its one edge,
`texts` phrases results and errors for a model, `transports` serves it, `snippets` prints
what an agent's configuration needs. Importing this package needs the `mcp` extra
(`pip install 'shadowkernel[mcp]'`); `agents.tools` alone does not. mcp/ is a face:
it calls the public API and may import anything below it; the kernel imports it for
`%shadow mcp`.
"""

from ..agents.tools import TOOL_NAMES, Tools

__all__ = ["TOOL_NAMES", "Tools"]
