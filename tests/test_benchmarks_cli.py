"""Every benchmark script starts and parses its arguments: the figures in benchmarks/README.md
stay reproducible only while the scripts run (a renamed helper, or a moved module, breaks one
at import, and no test would say so: the benchmarks themselves are too slow for the suite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_there_are_benchmarks() -> None:
    assert {"worktrees.py", "mcp.py", "interleave.py", "lsp.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_parses_its_arguments(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]
