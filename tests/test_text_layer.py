"""The text core sits at the bottom: it imports the standard library, errors and paths only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import shadowkernel.text

ALLOWED = {"shadowkernel.errors", "shadowkernel.paths"}


def imports(source: Path) -> set[str]:
    """Absolute names of the modules `source` imports (relative imports resolved)."""
    package = f"shadowkernel.text.{source.stem}".rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module or "")
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            found.add(f"{base}.{node.module}" if node.module else base)
    return found


def test_text_imports_nothing_above_it() -> None:
    folder = Path(shadowkernel.text.__file__).parent
    for source in sorted(folder.glob("*.py")):
        for name in imports(source):
            top = name.split(".")[0]
            inside = name.startswith("shadowkernel.text.") or name == "shadowkernel.text"
            assert top in sys.stdlib_module_names or inside or name in ALLOWED, (source.name, name)


def test_the_walk_sees_relative_imports() -> None:
    names = imports(Path(shadowkernel.text.__file__).parent / "ranges.py")
    assert {"shadowkernel.errors", "shadowkernel.paths", "shadowkernel.text.positions"} <= names
