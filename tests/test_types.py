"""The package type-checks: strictly (`mypy --strict`) in every layer whose libraries are typed,
and with the project's settings everywhere else (IPython, ipywidgets and Ray are untyped, and
strict mode there would be a wall of ignores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STRICT = [
    "shadowkernel/errors.py", "shadowkernel/paths.py", "shadowkernel/text",
    "shadowkernel/lsp", "shadowkernel/overlay", "shadowkernel/sched", "shadowkernel/workspace",
    "shadowkernel/mcp",
]  # fmt: skip

pytestmark = pytest.mark.timeout(600)


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip


def test_the_typed_layers_are_strict_clean() -> None:
    result = mypy("--strict", *STRICT)
    assert result.returncode == 0, result.stdout


def test_the_whole_package_is_clean() -> None:
    result = mypy("-p", "shadowkernel")
    assert result.returncode == 0, result.stdout
