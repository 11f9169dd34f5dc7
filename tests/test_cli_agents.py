"""`shadowkernel lint` and `shadowkernel run`: one throwaway branch each, SRC never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse, snapshot

from shadowkernel.cli import main

pytestmark = [needs_fuse, pytest.mark.timeout(120)]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text("import os\n")
    return root


def test_lint_json_reports_staged_lints_with_new_flags(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(src)
    staged = tmp_path / "mod.py"
    staged.write_text("import os\n\nprint(undefined)\n")
    status = main(["lint", str(src), "--stage", f"pkg/mod.py={staged}", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert status == 1
    assert [(r["code"], r["new"]) for r in rows if r["code"][0] == "F"] == [
        ("F401", False),
        ("F821", True),
    ]
    assert rows[0]["path"] == "pkg/mod.py" and rows[0]["line"] == 1
    assert snapshot(src) == before


def test_lint_text_and_clean_exit(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    staged = tmp_path / "ok.py"
    staged.write_text("X = 1\n")
    assert main(["lint", str(src), "--stage", f"pkg/ok.py={staged}"]) == 0
    assert main(["lint", str(src), "--path", "pkg/mod.py"]) == 1
    assert "pkg/mod.py:1:8: F401" in capsys.readouterr().out


def test_run_sees_staged_files(
    src: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(src)
    staged = tmp_path / "mod.py"
    staged.write_text("X = 42\n")
    status = main(["run", str(src), "--stage", f"pkg/mod.py={staged}", "--net", "--",
                   "sh", "-c", "cat pkg/mod.py; echo err >&2; exit 5"])  # fmt: skip
    out, err = capfd.readouterr()
    assert status == 5
    assert "X = 42" in out and "err" in err
    assert snapshot(src) == before


def test_bad_input_is_a_one_line_error(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(src), "--stage", "../x.py=/etc/hostname"]) == 2
    assert "leaves the workspace" in capsys.readouterr().err
    assert main(["lint", str(src), "--stage", "nofile"]) == 2
    assert "PATH=FILE" in capsys.readouterr().err
