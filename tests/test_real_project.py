"""A real library's own test suite (six 1.16.0, from its sdist) gives the same outcome, test by
test, natively and inside a branch run; the run leaves the project folder untouched."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk

SDIST = Path(__file__).resolve().parent.parent / ".venv/sdists/six-1.16.0.tar.gz"
PYTEST = [sys.executable, "-m", "pytest", "-rA", "-p", "no:randomly", "test_six.py"]

pytestmark = [
    needs_fuse,
    pytest.mark.skipif(not SDIST.exists(), reason=f"{SDIST} is fetched by bash .ci/setup"),
]


def outcomes(output: str) -> list[str]:
    """Per-test result lines and the summary counts, without timings."""
    kinds = ("PASSED ", "FAILED ", "SKIPPED ", "XFAIL ", "XPASS ", "ERROR ")
    lines = sorted(line.split(" - ")[0] for line in output.splitlines() if line.startswith(kinds))
    counts = output.strip().splitlines()[-1].rsplit(" in ", 1)[0]
    return lines + [counts.strip("= ")]  # the "=" padding follows the timing's width


def test_six_suite_gives_the_same_outcome_natively_and_in_a_branch_run(tmp_path: Path) -> None:
    with tarfile.open(SDIST) as archive:
        archive.extractall(tmp_path, filter="data")
    project = tmp_path / "six-1.16.0"
    native_copy = tmp_path / "native"
    shutil.copytree(project, native_copy)
    before = snapshot(project)

    native = subprocess.run(PYTEST, cwd=native_copy, capture_output=True, text=True, timeout=300)
    with sk.Workspace(project, servers=["ruff"]) as ws:
        inside = ws.branch("suite").run(PYTEST, timeout=300)

    assert inside.exit_code == native.returncode, inside.stderr
    assert outcomes(inside.stdout) == outcomes(native.stdout)
    assert len(outcomes(native.stdout)) > 150  # the suite really ran: about 200 tests
    assert snapshot(project) == before  # no __pycache__ or .pytest_cache leaked
