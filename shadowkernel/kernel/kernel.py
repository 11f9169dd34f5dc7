"""`ShadowKernel`: an IPython kernel with the shadowkernel magics loaded.

Shadow services run on the Workspace's own event loop thread, never on the kernel's; magics
wait for them from the cell's thread, so an interrupt ends the wait (and kills a run). On
shutdown or restart every workspace of the process is closed first (servers stopped, shadow
unmounted), before ipykernel terminates whatever children are left.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

from ipykernel.ipkernel import IPythonKernel

from .extension import session_of

__version__ = version("shadowkernel")  # from the installed metadata, not the package root above


class ShadowKernel(IPythonKernel):
    implementation = "shadowkernel"
    implementation_version = __version__
    banner = (f"shadowkernel {__version__}: IPython with a shadow workspace. "
              "Start with %shadow open PATH; %lsmagic lists the magics.")  # fmt: skip

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        assert self.shell is not None  # made by IPythonKernel.__init__
        # Through the extension manager, which then counts it loaded: `%unload_ext shadowkernel`
        # takes it back (called directly, the manager knew nothing to unload).
        self.shell.extension_manager.load_extension("shadowkernel")

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        await asyncio.to_thread(session_of(self.shell).shutdown)
        return super().do_shutdown(restart)
