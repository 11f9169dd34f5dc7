"""The README's Python examples run, against a real shadow of a sample project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse
from test_docs import run_example

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@needs_fuse
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = BLOCKS[index]
    run_example(code, project, f"README.md example {index + 1}")
    if 'loop="running"' in code:  # agents on the host's loop, each its own branch
        assert capsys.readouterr().out == "[['F401'], ['F401'], ['F401']]\n"
    elif "sk.Workspace" in code:
        out = capsys.readouterr().out
        assert "F401" in out and "+    return b + a" in out
        if "merge_check" in code:  # the shell edit was kept, and overlaps a's edit
            assert "('pkg/mod.py',)" in out and "Symbol(name='add', kind='function'" in out
