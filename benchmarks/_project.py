"""Which files of a real library's sdist the benchmarks edit: its own modules."""

from __future__ import annotations

from pathlib import Path

NOT_MODULES = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "build"}
NOT_MODULE_NAMES = {"setup.py", "conftest.py", "noxfile.py"}


def modules(root: Path) -> list[str]:
    """The project's Python modules, largest first: not its tests, docs, examples or build
    files (folders named in NOT_MODULES, `test_*.py`, `*_test.py`, NOT_MODULE_NAMES)."""
    found = [path for path in root.rglob("*.py") if _is_module(path.relative_to(root))]
    found.sort(key=lambda path: (-path.stat().st_size, path))
    return [path.relative_to(root).as_posix() for path in found]


def _is_module(relative: Path) -> bool:
    name = relative.name
    return not (
        NOT_MODULES & set(relative.parts[:-1])
        or name in NOT_MODULE_NAMES
        or name.startswith("test_")
        or name.endswith("_test.py")
    )
