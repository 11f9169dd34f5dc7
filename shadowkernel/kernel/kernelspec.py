"""Installing the `shadowkernel` kernelspec (what `shadowkernel install-kernel` does).

A wheel ships `resources/kernel.json` into `share/jupyter/kernels/shadowkernel` (hatch
shared-data) with a bare `python` in argv; installing here writes this interpreter's absolute
path instead, so the kernel starts with the right environment whatever PATH says.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

NAME = "shadowkernel"
RESOURCES = Path(__file__).with_name("resources")


def spec(python: str = sys.executable) -> dict:
    data = json.loads((RESOURCES / "kernel.json").read_text())
    data["argv"][0] = python
    return data


def install(user: bool = False, prefix: str | None = None) -> str:
    """Install the kernelspec; returns the folder it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "kernel.json").write_text(json.dumps(spec(), indent=2) + "\n")
        return KernelSpecManager().install_kernel_spec(folder, NAME, user=user, prefix=prefix)
