"""Bad input to every public entry point is a `ShadowError` whose message names the argument
(never a bare TypeError/ValueError/AttributeError from inside), and it changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk

pytestmark = [needs_fuse, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors") / "project"
    root.mkdir()
    (root / "m.py").write_text("def f(x):\n    return x\n")
    return root


@pytest.fixture(scope="module")
def ws(root: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(root, servers=["ruff"]) as workspace:
        yield workspace


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"path": "/nonexistent-folder"}, sk.PathError, "is not a directory"),
        ({"servers": "ruff"}, sk.ArgumentError, r"servers='ruff': give a list"),
        ({"servers": ["nope"]}, sk.NotFound, "unknown language server 'nope'"),
        ({"policy": "fastest"}, sk.ArgumentError, "policy='fastest': choose one of"),
        ({"batch": 0}, sk.ArgumentError, "batch=0"),
        ({"lanes": 0}, sk.ArgumentError, "lanes=0"),
        ({"memory_budget": -1}, sk.ArgumentError, "memory_budget=-1"),
        ({"max_runs": 0}, sk.ArgumentError, "max_runs=0"),
        ({"idle_timeout": "soon"}, sk.ArgumentError, "idle_timeout='soon'"),
    ],
)
def test_workspace_arguments(root: Path, kwargs: dict[str, Any], error: type, message: str) -> None:
    kwargs = {"path": root, **kwargs}
    with pytest.raises(error, match=message):
        sk.Workspace(**kwargs)


def branch_calls() -> list[tuple[str, Callable[[sk.Branch], object], type, str]]:
    return [
        ("write a path that is an int", lambda b: b.write(3, "x"), sk.ArgumentError, "path=3"),
        ("write bytes", lambda b: b.write("m.py", b"x"), sk.StagingError, "text must be str"),
        ("write outside", lambda b: b.write("../x.py", "x"), sk.PathError, "leaves the workspace"),
        ("write absolute", lambda b: b.write("/etc/x", "x"), sk.PathError, "is absolute"),
        ("read a missing file", lambda b: b.read("no.py"), sk.NotFound, "'no.py' does not exist"),
        ("replace with an int", lambda b: b.replace("m.py", 1, "y"), sk.ArgumentError, "old=1"),
        ("replace what is absent", lambda b: b.replace("m.py", "zz", "y"), sk.StagingError,
         "'zz' does not occur"),
        ("a patch that is None", lambda b: b.apply_patch(None), sk.ArgumentError, "patch=None"),
        ("a patch that is prose", lambda b: b.apply_patch("fix it"), sk.StagingError,
         "no file headers"),
        ("delete a missing file", lambda b: b.delete("no.py"), sk.NotFound, "no.py"),
        ("write an empty path", lambda b: b.write("", "x"), sk.ArgumentError,
         "path='': the path is empty"),
        ("read the root", lambda b: b.read("."), sk.ArgumentError, "path='.': the path is empty"),
        ("an edit that is None", lambda b: b.apply_edit(None), sk.ArgumentError, "edit=None"),
        ("an empty workspace edit", lambda b: b.apply_edit({}), sk.StagingError, "no changes"),
        ("lint paths as a str", lambda b: b.lint(paths="m.py"), sk.ArgumentError,
         "paths='m.py': give a list"),
        ("lint servers as a str", lambda b: b.lint(servers="ruff"), sk.ArgumentError,
         "servers='ruff'"),
        ("lint new_only as a str", lambda b: b.lint(new_only="yes"), sk.ArgumentError,
         "new_only='yes'"),
        ("lint a missing file", lambda b: b.lint(paths=["no.py"]), sk.NotFound, "no.py"),
        ("a 0-based line", lambda b: b.definition("m.py", 0, 1), sk.ArgumentError,
         "line=0: positions are 1-based"),
        ("a column as a str", lambda b: b.hover("m.py", 1, "2"), sk.ArgumentError, "column='2'"),
        ("symbols of a file no server takes", lambda b: b.symbols("x.txt"), sk.NotFound,
         "no server in this pool handles it"),
        ("run an int", lambda b: b.run(123), sk.ArgumentError, "cmd=123"),
        ("run nothing", lambda b: b.run([]), sk.RunError, "command is empty"),
        ("a negative timeout", lambda b: b.run("true", timeout=-1), sk.ArgumentError,
         "timeout=-1"),
        ("a timeout as a str", lambda b: b.run("true", timeout="5"), sk.ArgumentError,
         "timeout='5'"),
        ("network as a str", lambda b: b.run("true", network="no"), sk.ArgumentError,
         "network='no'"),
        ("an unknown run option", lambda b: b.run("true", bogus=1), sk.ArgumentError,
         "unknown option bogus; known: "),
        ("an unknown run mode", lambda b: b.run("true", mode="vm"), sk.RunError, "mode='vm'"),
    ]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "message"),
                         [c[1:] for c in branch_calls()], ids=[c[0] for c in branch_calls()])  # fmt: skip
def test_branch_arguments(ws: sk.Workspace, root: Path, call: Callable[[sk.Branch], object],
                          error: type, message: str) -> None:  # fmt: skip
    before = snapshot(root)
    branch = ws.branches.get("probe") or ws.branch("probe")
    version = branch.version
    with pytest.raises(error, match=message):
        call(branch)
    assert branch.version == version and snapshot(root) == before  # nothing changed


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda ws: ws.branch(3), sk.ArgumentError, "name=3"),
        (lambda ws: ws.branch(""), sk.ArgumentError, "name=''"),
        (lambda ws: ws.branch("n" * 5000), sk.ArgumentError, "is 5000 bytes long"),
        (lambda ws: ws.merge_check(ws.branch("m1"), "m1"), sk.ArgumentError, "b='m1'"),
        (lambda ws: ws.symbols(3), sk.ArgumentError, "query=3"),
        (lambda ws: ws.timeline(title=3), sk.ArgumentError, "title=3"),
    ],
)
def test_workspace_calls(ws: sk.Workspace, call: Callable[[sk.Workspace], object], error: type,
                         message: str) -> None:  # fmt: skip
    with pytest.raises(error, match=message):
        call(ws)


def test_a_second_branch_of_one_name_and_calls_after_drop_and_close(root: Path) -> None:
    with sk.Workspace(root, servers=["ruff"]) as ws:
        a = ws.branch("a")
        with pytest.raises(sk.ArgumentError, match="branch 'a' exists"):
            ws.branch("a")
        a.drop()
        with pytest.raises(sk.ClosedError, match="branch 'a' was dropped; fork a new one"):
            a.write("m.py", "x = 1\n")
    with pytest.raises(sk.ClosedError, match="Workspace is closed; open a new one"):
        ws.branch("b")
