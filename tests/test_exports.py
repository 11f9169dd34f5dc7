"""The public surface is on purpose: every exported name resolves, and importing the package
stays light (the overlay process imports it on every mount)."""

from __future__ import annotations

import subprocess
import sys

import shadowkernel


def test_every_public_name_resolves() -> None:
    for name in shadowkernel.__all__:
        assert getattr(shadowkernel, name) is not None, name
    assert set(shadowkernel._LAZY) <= set(shadowkernel.__all__)


def test_unknown_names_fail_like_any_module() -> None:
    try:
        shadowkernel.Nope  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("shadowkernel.Nope resolved")


def test_importing_the_overlay_does_not_import_the_heavy_layers() -> None:
    code = (
        "import sys, shadowkernel.overlay.server, shadowkernel.cli; "
        "print(sorted(m for m in ('pandas', 'lsprotocol', 'shadowkernel.workspace') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
