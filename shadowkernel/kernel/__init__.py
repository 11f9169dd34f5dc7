"""The notebook face of shadowkernel: the kernel, magics, rich display and widgets.

    %load_ext shadowkernel          # in any IPython kernel; the shadowkernel kernel loads it
    %shadow open notebooks/sample_project --servers ruff
    %branch new a
    %lint a inventory/stock.py

`ShadowKernel` is imported lazily (it pulls in ipykernel).
"""

from __future__ import annotations

from typing import Any

from .extension import load_ipython_extension, start_agent, unload_ipython_extension

__all__ = ["ShadowKernel", "load_ipython_extension", "start_agent", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    if name == "ShadowKernel":
        from .kernel import ShadowKernel

        return ShadowKernel
    raise AttributeError(name)
