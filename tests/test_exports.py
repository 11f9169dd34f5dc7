"""The public surface is on purpose: every exported name resolves, and importing the package
stays light (the overlay process imports it on every mount)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import shadowkernel


def test_every_public_name_resolves() -> None:
    for name in shadowkernel.__all__:
        assert getattr(shadowkernel, name) is not None, name
    assert set(shadowkernel._LAZY) <= set(shadowkernel.__all__)


def test_the_public_names_are_these() -> None:
    # Adding or removing a public name is a decision: change this list with it.
    assert sorted(shadowkernel.__all__) == sorted([
        "__version__",
        # the public API
        "Workspace", "Branch", "Version", "Diff", "Accepted", "LintTable", "LintReport", "Lint", "Fix",
        "Location", "Hover", "Symbol", "ServerSpec", "RunResult", "Timeline", "Event",
        # the error family
        "ShadowError", "ArgumentError", "PathError", "NotFound", "StagingError",
        "ConflictError", "ClosedError", "OverlayError", "ServerError", "RunError",
        # research
        "experiment", "summary", "builtin_suite", "load_suite", "mutation_suite",
        "swebench_suite", "Observation", "ScriptedAgent", "SimulatedAgent", "OpenAIChatAgent",
        "OpenAIToolAgent", "AnthropicToolAgent", "CommandAgent", "tasks_needed",
    ])  # fmt: skip


def test_lazy_names_are_typed_for_checkers() -> None:
    # Every lazily imported name is also imported under TYPE_CHECKING, so editors and mypy
    # see what `sk.Workspace` is.
    tree = ast.parse(Path(shadowkernel.__file__).read_text())
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    typed = {
        a.asname or a.name for n in guarded.body if isinstance(n, ast.ImportFrom) for a in n.names
    }
    assert set(shadowkernel._LAZY) - typed == set()


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
