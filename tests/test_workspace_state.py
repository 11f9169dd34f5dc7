"""A branch's state as one object: staging, merging and the scratch layer on `BranchState`
directly (no shadow, no servers), and nobody reaching into a branch's private members."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shadowkernel.errors import ClosedError, StagingError
from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File
from shadowkernel.paths import RelPath
from shadowkernel.workspace.folder import Folder
from shadowkernel.workspace.state import BranchState, file_bytes, merge

PACKAGE = Path(__file__).resolve().parents[1] / "shadowkernel"


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("a = 1\nb = 2\nc = 3\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    (tmp_path / "run.sh").chmod(0o755)
    return Folder(str(tmp_path))


@pytest.fixture
def make():  # type: ignore[no-untyped-def]
    store = BlobStore()
    yield store.make
    store.close()


def test_staging_records_bases_once_and_makes_one_version(folder: Folder, make) -> None:  # type: ignore[no-untyped-def]
    state = BranchState("a")
    mod, new = RelPath("pkg/mod.py"), RelPath("new/deep.py")
    assert state.stage({mod: b"a = 10\n", new: b"x = 1\n"}, "two", folder, make) == 1
    assert state.stage({mod: b"a = 11\n"}, "again", folder, make) == 2
    assert state.bases == {mod: b"a = 1\nb = 2\nc = 3\n", new: None}
    assert [v.op for v in state.versions] == ["fork", "two", "again"]
    assert state.head.files == {mod: b"a = 11\n", new: b"x = 1\n"}
    assert isinstance(state.head.manifest["new"], Dir)  # a new folder hides nothing below it
    assert file_bytes(state.versions[1], mod, folder) == b"a = 10\n"
    assert file_bytes(state.head, RelPath("run.sh"), folder) == b"echo hi\n"


def test_bad_input_changes_nothing(folder: Folder, make) -> None:  # type: ignore[no-untyped-def]
    state = BranchState("a")
    state.stage({RelPath("pkg/mod.py"): b"a = 10\n"}, "one", folder, make)
    with pytest.raises(StagingError):
        state.stage({RelPath("other.py"): b"x\n", RelPath("pkg"): b"a folder\n"}, "bad", folder,
                    make)  # fmt: skip
    assert len(state.versions) == 2 and set(state.bases) == {"pkg/mod.py"}


def test_staging_drops_the_scratch_entry_and_keeps_the_mode(folder: Folder, make) -> None:  # type: ignore[no-untyped-def]
    state = BranchState("a")
    script = RelPath("run.sh")
    state.scratch.absorb({script: WHITEOUT, RelPath("out.txt"): WHITEOUT})
    state.stage({script: b"echo bye\n"}, "edit", folder, make)
    assert set(state.scratch.entries) == {"out.txt"}
    override = state.head.manifest[script]
    assert isinstance(override, File) and override.mode == 0o755


def test_a_dropped_state_refuses_staging(folder: Folder, make) -> None:  # type: ignore[no-untyped-def]
    state = BranchState("gone")
    state.status = "dropped"
    with pytest.raises(ClosedError, match="'gone' was dropped"):
        state.stage({RelPath("x.py"): b"x\n"}, "x", folder, make)
    assert len(state.versions) == 1


def test_merge_takes_the_common_base_and_lists_overlaps(folder: Folder, make) -> None:  # type: ignore[no-untyped-def]
    a, b, merged = BranchState("a"), BranchState("b"), BranchState("m")
    mod = RelPath("pkg/mod.py")
    a.stage({mod: b"a = 10\nb = 2\nc = 3\n"}, "a", folder, make)
    b.stage({mod: b"a = 1\nb = 2\nc = 30\n", RelPath("b.py"): b"b\n"}, "b", folder, make)
    Path(folder.root, "pkg", "mod.py").write_text("user changed it\n")  # bases come from a and b
    assert merge(merged, a, b, folder, make) == ()
    assert merged.head.files == {mod: b"a = 10\nb = 2\nc = 30\n", "b.py": b"b\n"}
    assert merged.bases == {mod: b"a = 1\nb = 2\nc = 3\n", "b.py": None}
    assert merged.head.op == "merge a@1 + b@1"

    clash, other = BranchState("c"), BranchState("d")
    clash.stage({mod: b"a = 5\n"}, "c", folder, make)  # base: the user's text now
    other.stage({mod: b"a = 6\n"}, "d", folder, make)
    both = BranchState("cd")
    assert merge(both, clash, other, folder, make) == ("pkg/mod.py",)
    assert both.head.files[mod] == b"<<<<<<< c\na = 5\n=======\na = 6\n>>>>>>> d\n"  # git's


def test_runs_and_merges_reach_no_private_member_of_a_branch() -> None:
    """Runs and merges take the branch's state; `branch._x` outside branch.py is a smell."""
    for module in ("workspace/runs.py", "workspace/state.py", "workspace/workspace.py"):
        tree = ast.parse((PACKAGE / module).read_text())
        reached = {
            f"{node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in {"branch", "a", "b", "merged"} and node.attr.startswith("_")
        }  # fmt: skip
        assert reached == set(), module
