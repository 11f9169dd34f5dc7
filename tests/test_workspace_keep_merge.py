"""Shell edits that stage (`run(keep=True)`), merge checks, symbols and the public names the
faces read (`closed`, `events()`, `shadows`): real shadows, real runs, real servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import OFFLINE_NEEDS_NAMESPACES, needs_fuse, snapshot

import shadowkernel as sk

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

MOD = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[sk.Workspace]:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    (root / "pkg/old.py").write_text("OLD = 1\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    with sk.Workspace(root, servers=["ruff"]) as workspace:
        yield workspace


def test_keep_stages_what_a_run_wrote_less_ignored_files(ws: sk.Workspace) -> None:
    before = snapshot(Path(ws.root))
    a = ws.branch("codemod")
    script = (
        "sed -i 's/a + b/b + a/' pkg/mod.py && echo 'GEN = 1' > pkg/gen.py && rm pkg/old.py"
        " && echo noise > run.log && mkdir -p build pkg/__pycache__"
        " && echo x > build/out.txt && printf '\\0\\1' > pkg/blob.bin"
        " && echo c > pkg/__pycache__/mod.cpython-311.pyc"
    )
    result = a.run(script, network=True, keep=True)
    assert result.ok, result.stderr
    assert a.version == 1 and a.versions[-1].op == "run kept (4 files)"
    assert "kept as version 1" in result.notes
    assert a.read("pkg/mod.py") == MOD.replace("a + b", "b + a")
    assert dict(a.files) == {
        "pkg/blob.bin": b"\0\1",  # binary files are kept too
        "pkg/gen.py": b"GEN = 1\n",
        "pkg/mod.py": MOD.replace("a + b", "b + a").encode(),
        "pkg/old.py": None,
    }
    diff = a.diff()
    assert "+GEN = 1" in diff and "-OLD = 1" in diff and "run.log" not in diff
    # ignored and cache files stay in the scratch layer: later runs still see them
    seen = a.run("cat run.log build/out.txt; test -e pkg/blob.bin && echo blob", network=True)
    assert seen.stdout == "noise\nx\nblob\n"
    assert list(a.lint()["code"]) == []  # lints see the kept version
    assert snapshot(Path(ws.root)) == before  # keep stages; only accept writes the folder


def test_a_run_without_keep_makes_no_version(ws: sk.Workspace) -> None:
    a = ws.branch("plain")
    assert a.run("echo 'X = 1' > pkg/new.py", network=True).ok
    assert a.version == 0 and "pkg/new.py" not in a.files


def test_keep_with_nothing_keepable_makes_no_version(ws: sk.Workspace) -> None:
    a = ws.branch("noop")
    result = a.run("echo noise > run.log", network=True, keep=True)
    assert result.ok and a.version == 0 and not any("kept" in n for n in result.notes)


def test_keep_returns_the_result_and_names_the_writes_no_version_can_hold(
    ws: sk.Workspace,
) -> None:
    before = snapshot(Path(ws.root))
    a = ws.branch("dir-to-file")
    result = a.run("rm -r pkg && echo file > pkg && echo 'NEW = 1' > new.py && echo done",
                   network=True, keep=True)  # fmt: skip
    assert result.ok and result.stdout == "done\n"  # the run's result is not lost
    assert "kept as version 1" in result.notes and dict(a.files) == {"new.py": b"NEW = 1\n"}
    [note] = [n for n in result.notes if n.startswith("not kept as a version")]
    assert "1 file a version cannot hold" in note and "they stay in the run's scratch" in note
    assert "pkg: a file where the user's folder has a directory" in note
    assert [(e.path, e.kind) for e in a.scratch()] == [("pkg", "file")]
    assert a.run("cat pkg", network=True).stdout == "file\n"  # later runs see it
    assert snapshot(Path(ws.root)) == before


def test_keep_must_be_a_bool(ws: sk.Workspace) -> None:
    with pytest.raises(sk.ArgumentError, match="keep='yes'"):
        ws.branch("bad").run("true", keep="yes")  # type: ignore[arg-type]


@pytest.mark.fallback(OFFLINE_NEEDS_NAMESPACES, unless="namespaces")
def test_merge_check_joins_two_branches_over_their_base(ws: sk.Workspace) -> None:
    before = snapshot(Path(ws.root))
    a, b = ws.branch("a"), ws.branch("b")
    a.replace("pkg/mod.py", "return a + b", "return b + a")
    b.replace("pkg/mod.py", "return a - b", "return -(b - a)")
    b.write("pkg/extra.py", "E = 2\n")
    merged = ws.merge_check(a, b)
    assert merged.name == "merge-a-b" and merged.conflicts == ()
    text = merged.read("pkg/mod.py")
    assert "return b + a" in text and "return -(b - a)" in text
    assert merged.read("pkg/extra.py") == "E = 2\n"
    assert set(merged.bases) == {"pkg/mod.py", "pkg/extra.py"}
    assert merged.bases["pkg/mod.py"] == MOD.encode() and merged.bases["pkg/extra.py"] is None
    assert list(merged.lint()["code"]) == []
    probe = merged.run("python3 -c 'import pkg.mod as m; print(m.add(1, 2), m.sub(5, 3))'")
    assert probe.stdout == "3 2\n", probe.stderr
    assert a.version == 1 and b.version == 2  # neither side changed
    assert snapshot(Path(ws.root)) == before


def test_merge_check_marks_conflicts_and_keeps_both_sides_other_hunks(ws: sk.Workspace) -> None:
    a, b = ws.branch("a"), ws.branch("b")
    a.replace("pkg/mod.py", "return a + b", "return a + b + 0")
    b.replace("pkg/mod.py", "return a + b", "return a + b + 1")
    b.replace("pkg/mod.py", "return a - b", "return a - b - 1")  # apart: merges cleanly
    merged = ws.merge_check(a, b, name="both")
    assert merged.name == "both" and merged.conflicts == ("pkg/mod.py",)
    assert merged.read("pkg/mod.py") == (
        "def add(a, b):\n<<<<<<< a\n    return a + b + 0\n=======\n    return a + b + 1\n"
        ">>>>>>> b\n\n\ndef sub(a, b):\n    return a - b - 1\n"
    )


def test_accept_refuses_a_merge_until_its_conflicts_are_resolved(ws: sk.Workspace) -> None:
    a, b = ws.branch("a"), ws.branch("b")
    a.replace("pkg/mod.py", "return a + b", "return a + b + 0")
    b.replace("pkg/mod.py", "return a + b", "return a + b + 1")
    b.replace("pkg/mod.py", "return a - b", "return a - b - 1")
    b.write("pkg/extra.py", "E = 2\n")
    merged = ws.merge_check(a, b, name="both")
    before = snapshot(Path(ws.root))
    with pytest.raises(sk.ConflictError, match="'both': pkg/mod.py still holds the conflict "
                       "markers merge_check put there; nothing was written") as caught:  # fmt: skip
        merged.accept()
    assert caught.value.paths == ("pkg/mod.py",)
    merged.write("pkg/mod.py", merged.read("pkg/mod.py"))  # the same markers: not resolved
    with pytest.raises(sk.ConflictError, match="pkg/mod.py still holds"):
        merged.accept()
    assert snapshot(Path(ws.root)) == before
    text = merged.read("pkg/mod.py")
    block = text[text.index("<<<<<<< a") : text.index(">>>>>>> b\n") + len(">>>>>>> b\n")]
    merged.replace("pkg/mod.py", block, "    return a + b + 1\n")
    assert merged.accept().written == ("pkg/extra.py", "pkg/mod.py")
    assert (Path(ws.root) / "pkg/mod.py").read_text() == MOD.replace("a + b", "a + b + 1").replace(
        "a - b", "a - b - 1")  # fmt: skip


def test_conflicts_without_markers_are_refused_until_staged_again(ws: sk.Workspace) -> None:
    """A file one side deleted while the other changed it, and a binary file both changed,
    hold no markers: the merge keeps one side, and accept refuses each until it is staged
    again, by name and with what it holds; then accept writes what was staged."""
    root = Path(ws.root)
    (root / "pkg/logo.bin").write_bytes(b"\0logo")
    a, b = ws.branch("a"), ws.branch("b")
    a.delete("pkg/old.py")
    b.write("pkg/old.py", "OLD = 2\n")
    a.write_bytes("pkg/logo.bin", b"\0logo-a")
    b.write_bytes("pkg/logo.bin", b"\0logo-b")
    merged = ws.merge_check(a, b, name="m")
    assert merged.conflicts == ("pkg/logo.bin", "pkg/old.py")
    assert merged.read("pkg/old.py") == "OLD = 2\n"  # the side that kept the file
    assert merged.read_bytes("pkg/logo.bin") == b"\0logo-a"
    before = snapshot(root)
    with pytest.raises(sk.ConflictError) as caught:
        merged.accept()
    assert caught.value.paths == ("pkg/logo.bin", "pkg/old.py")
    assert (
        "pkg/logo.bin still holds a's bytes (a binary file both changed); pkg/old.py still "
        "holds one side's edit (the other deleted it); nothing was written" in str(caught.value)
    )
    merged.write_bytes("pkg/logo.bin", merged.read_bytes("pkg/logo.bin"))  # keep a's: resolved
    with pytest.raises(sk.ConflictError, match="'m': pkg/old.py still holds") as caught:
        merged.accept()
    assert caught.value.paths == ("pkg/old.py",) and snapshot(root) == before
    merged.delete("pkg/old.py")
    accepted = merged.accept()
    assert (accepted.written, accepted.deleted) == (("pkg/logo.bin",), ("pkg/old.py",))
    assert (root / "pkg/logo.bin").read_bytes() == b"\0logo-a"
    assert not (root / "pkg/old.py").exists()


def test_a_restaged_text_that_keeps_a_conflict_block_is_still_unresolved(
    ws: sk.Workspace,
) -> None:
    a, b = ws.branch("a"), ws.branch("b")
    a.replace("pkg/mod.py", "return a + b", "return a + b + 0")
    b.replace("pkg/mod.py", "return a + b", "return a + b + 1")
    merged = ws.merge_check(a, b, name="m")
    merged.replace("pkg/mod.py", "def add", "def plus")  # an edit beside the block
    with pytest.raises(sk.ConflictError, match="pkg/mod.py still holds the conflict markers"):
        merged.accept()


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_a_merge_after_an_accept_keeps_the_accepted_edit(ws: sk.Workspace, order: str) -> None:
    """After a is accepted, a's base is its own text; the merge base of a and b is still the
    text both forked from (as git's merge base), so their overlap is a conflict, and accept
    never writes b's side over a's accepted edit."""
    a, b = ws.branch("a"), ws.branch("b")
    a.replace("pkg/mod.py", "return a + b", "return a + b + 0")
    b.replace("pkg/mod.py", "return a + b", "return a + b + 1")
    a.accept()
    accepted = MOD.replace("a + b", "a + b + 0")
    first, second = (a, b) if order == "ab" else (b, a)
    merged = ws.merge_check(first, second, name="m")
    assert merged.conflicts == ("pkg/mod.py",) and merged.bases["pkg/mod.py"] == MOD.encode()
    with pytest.raises(sk.ConflictError, match="conflict markers"):
        merged.accept()
    merged.write("pkg/mod.py", b.read("pkg/mod.py"))  # resolved as b had it: overlaps a's
    with pytest.raises(sk.ConflictError, match="the user changed pkg/mod.py"):
        merged.accept()
    assert (Path(ws.root) / "pkg/mod.py").read_text() == accepted
    c = ws.branch("c")  # forked after the accept: its base holds a's edit, and so merges
    c.replace("pkg/mod.py", "return a - b", "return a - b - 2")
    joined = ws.merge_check(a, c, name="ac")
    assert joined.conflicts == () and joined.bases["pkg/mod.py"] == accepted.encode()
    assert joined.read("pkg/mod.py") == accepted.replace("a - b", "a - b - 2")


def test_merge_check_refuses_what_is_not_a_branch_of_it(ws: sk.Workspace) -> None:
    a = ws.branch("a")
    with pytest.raises(sk.ArgumentError, match="b='a'"):
        ws.merge_check(a, "a")  # type: ignore[arg-type]


def test_public_names_the_faces_read(ws: sk.Workspace) -> None:
    a = ws.branch("a")
    a.lint()
    assert [e.op for e in ws.events()] == ["lint"] and ws.events()[0].branch == "a"
    assert (ws.shadows[0].mountpoint != ws.root) == (ws.mode == "fuse") and not ws.closed
    ws.close()
    assert ws.closed
    with pytest.raises(sk.ClosedError, match="closed"):
        ws.branch("late")


def test_document_and_workspace_symbols(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/mod.py").write_text(MOD)
    with sk.Workspace(root, servers=["jedi-language-server"]) as ws:
        a = ws.branch("a")
        a.write("pkg/mod.py", MOD + "\n\nclass Staged:\n    pass\n")
        names = [(s.name, s.kind, s.line) for s in a.symbols("pkg/mod.py")]
        assert names == [("add", "function", 1), ("sub", "function", 5), ("Staged", "class", 9)]
        found = ws.symbols("sub")
        assert [(s.name, s.path, s.line) for s in found] == [("sub", "pkg/mod.py", 5)]
        assert [e.op for e in ws.events()][-1] == "symbols"


def test_a_merge_that_cannot_be_staged_leaves_no_branch(ws: sk.Workspace) -> None:
    """One side made `pkg/x` a file, the other a folder: the merge is refused and the empty
    merge branch it had made is gone."""
    a, b = ws.branch("file-side"), ws.branch("folder-side")
    a.write("pkg/x", "a file\n")
    b.write("pkg/x/y.py", "Y = 1\n")
    with pytest.raises(sk.ShadowError):
        ws.merge_check(a, b, "both")
    assert "both" not in ws.branches


def test_a_crlf_files_conflict_block_keeps_it_unresolved(ws: sk.Workspace) -> None:
    (Path(ws.root) / "pkg/win.py").write_bytes(b"A = 1\r\nB = 2\r\nC = 3\r\n")
    a, b = ws.branch("a"), ws.branch("b")
    a.write_bytes("pkg/win.py", b"A = 1\r\nB = 20\r\nC = 3\r\n")
    b.write_bytes("pkg/win.py", b"A = 1\r\nB = 21\r\nC = 3\r\n")
    merged = ws.merge_check(a, b, name="m")
    assert b"<<<<<<< a" in merged.read_bytes("pkg/win.py")
    merged.write_bytes("pkg/win.py", merged.read_bytes("pkg/win.py").replace(b"C = 3", b"C = 4"))
    with pytest.raises(sk.ConflictError, match="pkg/win.py still holds the conflict markers"):
        merged.accept()


def test_accept_says_how_the_users_change_meets_the_branchs(ws: sk.Workspace) -> None:
    """The refusal names each path with what the user did that cannot merge: deleted it,
    made it a folder, or changed the same lines."""
    root = Path(ws.root)
    (root / "pkg/gone.py").write_text("G = 1\n")
    (root / "pkg/dir.py").write_text("D = 1\n")
    a = ws.branch("a")
    a.write("pkg/gone.py", "G = 2\n")
    a.write("pkg/dir.py", "D = 2\n")
    a.replace("pkg/mod.py", "return a + b", "return a + b + 0")
    (root / "pkg/gone.py").unlink()
    (root / "pkg/dir.py").unlink()
    (root / "pkg/dir.py").mkdir()
    (root / "pkg/dir.py/inside.txt").write_text("x\n")
    (root / "pkg/mod.py").write_text(MOD.replace("return a + b", "return a + b + 1"))
    before = snapshot(root)
    with pytest.raises(sk.ConflictError) as caught:
        a.accept()
    assert "the user changed pkg/dir.py (now a folder), pkg/gone.py (deleted), pkg/mod.py " \
        "(overlapping lines) since the branch forked" in str(caught.value)  # fmt: skip
    assert snapshot(root) == before
