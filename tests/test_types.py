"""The package type-checks, in one mypy run: the typed layers as `mypy --strict` checks them
(their per-module flags are in pyproject.toml), the rest with the project's settings (IPython,
ipywidgets and Ray are untyped, and strict mode there would be a wall of ignores)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TYPED_LAYERS = {
    "shadowkernel.errors", "shadowkernel.paths", "shadowkernel.userdirs", "shadowkernel.text.*",
    "shadowkernel.lsp.*",
    "shadowkernel.overlay.*", "shadowkernel.sched.*", "shadowkernel.workspace.*",
    "shadowkernel.mcp.*",
}  # fmt: skip

pytestmark = pytest.mark.timeout(600)


def test_the_typed_layers_are_checked_strictly() -> None:
    """A loosened flag or a layer dropped from the strict list is a failure, not a quiet pass."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    [strict] = [o for o in config["overrides"] if "disallow_untyped_defs" in o]
    assert set(strict["module"]) == TYPED_LAYERS
    flags = {"disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
             "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
             "disallow_untyped_decorators", "warn_unused_ignores", "warn_return_any",
             "strict_equality", "extra_checks"}  # fmt: skip
    assert all(strict[flag] is True for flag in flags) and strict["implicit_reexport"] is False
    assert config["warn_redundant_casts"] is True


def test_the_whole_package_is_clean() -> None:
    # mypy's incremental cache outside the checkout: a fresh clone checks in seconds what the
    # last run on this machine already checked (the libraries' stubs, unchanged modules).
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cache = home / "shadowkernel/mypy" / f"{sys.version_info.major}.{sys.version_info.minor}"
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache),
                             "-p", "shadowkernel"], cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stdout
