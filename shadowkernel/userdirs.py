"""The user's own folders for shadowkernel, outside every project: the XDG base directories
(`$XDG_CACHE_HOME`, `$XDG_STATE_HOME`, `$XDG_CONFIG_HOME`, `$XDG_RUNTIME_DIR`), each with a
`shadowkernel` folder. As the XDG spec says, a relative value is invalid and ignored."""

from __future__ import annotations

import os
from pathlib import Path


def _home(variable: str, default: str) -> Path:
    value = os.environ.get(variable, "")
    base = Path(value) if os.path.isabs(value) else Path(os.path.expanduser("~")) / default
    return base / "shadowkernel"


def cache_home() -> Path:
    """Downloads and builds worth keeping (sdists, the patched pyfuse3 wheel)."""
    return _home("XDG_CACHE_HOME", ".cache")


def state_home() -> Path:
    """Branches that outlive the process, one folder per project."""
    return _home("XDG_STATE_HOME", ".local/state")


def config_home() -> Path:
    """The user's settings (language servers)."""
    return _home("XDG_CONFIG_HOME", ".config")


def runtime_home() -> Path:
    """Files that live as long as a process (an MCP server's token); the cache without a
    runtime directory."""
    return _home("XDG_RUNTIME_DIR", ".cache")
