"""The notebook face of shadowkernel: the kernel, magics, rich display and widgets.

    %load_ext shadowkernel          # in any IPython kernel; the shadowkernel kernel loads it
    %shadow open notebooks/sample_project --servers ruff
    %branch new a
    %lint a inventory/stock.py

Everything is imported on first use, so `shadowkernel install-kernel` stays light. kernel/ is
a face: it calls the public API (workspace/, agents/, evals/) and may import anything below,
and the other faces (the MCP server); nothing in the package imports it but the CLI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ShadowKernel", "load_ipython_extension", "start_agent", "unload_ipython_extension"]


def load_ipython_extension(shell: Any) -> None:
    from .extension import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: Any) -> None:
    from .extension import unload_ipython_extension as unload

    unload(shell)


def start_agent(target: Any, *args: Any, **kwargs: Any) -> Any:
    """Run `target(*args, **kwargs)` in a daemon thread that `%timeline` follows."""
    from .extension import start_agent as start

    return start(target, *args, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "ShadowKernel":
        from .kernel import ShadowKernel

        return ShadowKernel
    raise AttributeError(f"module 'shadowkernel.kernel' has no attribute {name!r}")
