"""The configuration an agent needs to reach a running server (pure text).

Claude Code takes an HTTP server with `claude mcp add --transport http` (or a `.mcp.json`);
Codex reads `[mcp_servers.NAME]` in `~/.codex/config.toml` with the token from an
environment variable (it refuses an inline token); anything else gets the generic JSON.
"""

from __future__ import annotations

import json

TOKEN_VARIABLE = "SHADOWKERNEL_MCP_TOKEN"


def claude_code(url: str, token: str, name: str = "shadowkernel") -> str:
    return (f'claude mcp add --transport http {name} {url} '
            f'--header "Authorization: Bearer {token}"')  # fmt: skip


def codex(url: str, token: str, name: str = "shadowkernel") -> str:
    return (f"# ~/.codex/config.toml, then: export {TOKEN_VARIABLE}={token}\n"
            f'[mcp_servers.{name}]\nurl = "{url}"\n'
            f'bearer_token_env_var = "{TOKEN_VARIABLE}"')  # fmt: skip


def generic(url: str, token: str, name: str = "shadowkernel") -> str:
    server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
    return json.dumps({"mcpServers": {name: server}}, indent=2)


def all_snippets(url: str, token: str) -> str:
    """The three snippets, headed, for printing once."""
    return (f"Claude Code:\n{claude_code(url, token)}\n\nCodex:\n{codex(url, token)}\n\n"
            f"Generic (.mcp.json and most clients):\n{generic(url, token)}")  # fmt: skip
