"""The layering of docs/architecture.md, held: lower layers never import higher ones.

Every import in the package (also the lazy ones inside functions and under TYPE_CHECKING) is
resolved to the top-level part it names; a part may import its own modules, any lower layer,
and, in the faces' layer only, its peers. A new top-level module or folder must be placed in
LAYERS first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import shadowkernel

PACKAGE = Path(shadowkernel.__file__).parent

# Bottom to top; each inner tuple is one layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("paths", "userdirs"),  # the text core: workspace-relative paths; the user's own folders
    ("text",),  # ...then positions, diffs, blocks, range edits, URIs, merges
    ("lsp", "overlay"),
    ("run",),
    ("sched",),
    ("workspace",),
    ("agents",),
    ("evals",),
    ("kernel", "mcp", "cli", "__init__", "__main__"),  # the faces
)
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}
FACES = set(LAYERS[-1])


def part_of(module: str) -> str:
    """'shadowkernel.lsp.pool' -> 'lsp'; 'shadowkernel' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every shadowkernel module `path` imports, resolved (`from . import x` counts as x)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "shadowkernel"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "shadowkernel":
                continue
            if target == "shadowkernel" or node.module is None:
                found |= {f"{target}.{a.name}" for a in node.names}  # `from .. import edits`
            else:
                found.add(target)
    return found


def sources() -> list[Path]:
    # The built-in task suite's projects are data (code agents edit), not the package.
    return sorted(p for p in PACKAGE.rglob("*.py") if "evals/suite/" not in p.as_posix())


def allowed(source: str, target: str) -> bool:
    if source == target:
        return True
    if source in FACES and target in FACES:
        return True
    return RANK[target] < RANK[source]


def test_every_part_has_a_layer() -> None:
    parts = {part_of(module_name(p)) for p in sources()}
    assert parts - RANK.keys() == set(), "place new parts in LAYERS (and docs/architecture.md)"


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for path in sources():
        source = part_of(module_name(path))
        for target in imported(path):
            part = part_of(target)
            if part in RANK and not allowed(source, part):
                upward.append(f"{module_name(path)} imports {target}")
    assert upward == []


@pytest.mark.parametrize(
    ("source", "target", "ok"),
    [("workspace", "lsp", True), ("lsp", "workspace", False), ("lsp", "overlay", False),
     ("kernel", "mcp", True), ("text", "lsp", False), ("evals", "agents", True),
     ("agents", "evals", False)],
)  # fmt: skip
def test_the_rule_itself(source: str, target: str, ok: bool) -> None:
    assert allowed(source, target) is ok


def test_the_walker_sees_relative_and_package_imports() -> None:
    found = imported(PACKAGE / "workspace" / "branch.py")
    assert {"shadowkernel.lsp", "shadowkernel.run", "shadowkernel.errors"} <= found
    assert any(t.startswith("shadowkernel.workspace.") for t in found)
