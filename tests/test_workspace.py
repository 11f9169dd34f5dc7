"""The public Workspace/Branch API on a real FUSE shadow with a real ruff server.

Workspaces are expensive to start (a mount, a language server), so most tests share one per
module and use their own branch names. Nothing waits by sleeping.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from overlay_helpers import needs_fuse, snapshot

import shadowkernel as sk
from shadowkernel.errors import ConflictError, NotFound, PathError, ShadowError, StagingError

pytestmark = [needs_fuse, pytest.mark.timeout(240)]

MOD = "import os\n\n\ndef add(a, b):\n    return a + b\n"
UTIL = "def helper():\n    return 1\n"


def make_project(root: Path) -> Path:
    files = {"pkg/__init__.py": "", "pkg/mod.py": MOD, "pkg/util.py": UTIL, "README.md": "# p\n"}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "bin.dat").write_bytes(b"\0\1\2")
    (root / "pkg/util.py").chmod(0o640)
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("ws") / "project")


@pytest.fixture(scope="module")
def ws(project: Path) -> Iterator[sk.Workspace]:
    with sk.Workspace(project, servers=["ruff"]) as workspace:
        yield workspace


@pytest.fixture
def fresh_project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def lints(table: pd.DataFrame) -> list[tuple]:
    """A lint table without the columns that name who asked (for comparing answers)."""
    keep = ["path", "line", "column", "end_line", "end_column", "code", "message", "new"]
    return [tuple(row) for row in table[keep].itertuples(index=False)]


# -- staging --------------------------------------------------------------------------------------


def test_each_staging_makes_a_version_and_bad_input_changes_nothing(ws: sk.Workspace) -> None:
    before = snapshot(Path(ws.root))
    b = ws.branch("staging")
    assert b.version == 0
    assert b.write("pkg/new.py", "x = 1\n") == 1
    assert b.replace("pkg/mod.py", "a + b", "a - b") == 2
    assert b.apply_patch(sk.Diff(_patch("pkg/util.py", UTIL, UTIL + "Y = 2\n"))) == 3
    assert b.delete("README.md") == 4
    assert [v.op for v in b.versions] == [
        "fork", "write pkg/new.py", "replace in pkg/mod.py", "patch (1 file)", "delete README.md",
    ]  # fmt: skip
    files = dict(b.files)
    bad = [
        (lambda: b.apply_patch("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-zzz\n+y\n"),
         StagingError, "does not apply"),
        (lambda: b.replace("pkg/mod.py", "no such", "x"), StagingError, "does not occur"),
        (lambda: b.replace("pkg/new.py", "", "y"), StagingError, "empty"),
        (lambda: b.write("../outside.py", "x"), PathError, "leaves the workspace"),
        (lambda: b.write("/etc/passwd", "x"), PathError, "absolute"),
        (lambda: b.write("escape/x.py", "x"), PathError, "symlink"),
        (lambda: b.write("pkg/bin.py", "a\0b"), StagingError, "binary"),
        (lambda: b.replace("bin.dat", "a", "b"), StagingError, "binary"),
        (lambda: b.delete("nope.py"), NotFound, "does not exist"),
        (lambda: b.write("pkg", "x"), StagingError, "pkg: is a folder"),
        (lambda: b.write("", "x"), sk.ArgumentError, "path='': the path is empty"),
        (lambda: b.read(""), sk.ArgumentError, "path='': the path is empty"),
        (lambda: b.read("README.md"), NotFound, "'README.md' was deleted in branch 'staging'"),
        # a file below a file (the user's, or the branch's), a file where a folder is
        (lambda: b.write("bin.dat/x.py", "x"), StagingError,
         "bin.dat/x.py: bin.dat is a file in the user's folder, not a folder"),
        (lambda: b.write("pkg/new.py/x.py", "x"), StagingError,
         "pkg/new.py/x.py: pkg/new.py is a file in the branch"),
        (lambda: b.apply_patch("--- /dev/null\n+++ b/pkg/util.py/deep/x.py\n@@ -0,0 +1 @@\n"
                               "+x\n"), StagingError, "pkg/util.py is a file in the branch"),
    ]  # fmt: skip
    for call, error, message in bad:
        with pytest.raises(error, match=message):
            call()
        assert b.version == 4 and dict(b.files) == files
    with pytest.raises(StagingError, match="pkg/mod.py: the search text 'a' occurs"):
        b.replace("pkg/mod.py", "a", "c")
    assert b.read("pkg/mod.py") == MOD.replace("a + b", "a - b")
    assert snapshot(Path(ws.root)) == before  # staging never writes the user's folder
    b.drop()
    with pytest.raises(ShadowError, match="dropped"):
        b.write("x.py", "")


def _patch(path: str, old: str, new: str) -> str:
    from shadowkernel.text.patches import render_diff

    return render_diff(path, old.encode(), new.encode())


def test_diff_round_trips_through_apply_patch(ws: sk.Workspace) -> None:
    a = ws.branch("diff-a")
    a.write("pkg/new/deep.py", "import sys\n")
    a.replace("pkg/mod.py", "return a + b", "return a * b")
    a.delete("pkg/util.py")
    diff = a.diff()
    assert "--- /dev/null\n+++ b/pkg/new/deep.py" in diff
    assert "+++ /dev/null" in diff and "-    return a + b\n+    return a * b" in diff
    assert "<pre" in diff._repr_html_()
    b = ws.branch("diff-b")
    b.apply_patch(diff)
    assert dict(b.files) == dict(a.files)
    assert b.diff() == diff


def test_apply_edit_takes_a_quick_fix_from_a_lint(ws: sk.Workspace) -> None:
    a = ws.branch("fix")
    a.write("pkg/fixme.py", "import os\nimport sys\n\nprint(sys.argv)\n")
    table = a.lint()
    unused = table[table["code"] == "F401"].iloc[0]
    fix = next(f for f in unused["fixes"] if "import" in f.title.lower())
    a.apply_edit(fix)
    assert "import os" not in a.read("pkg/fixme.py")
    assert (a.lint()["code"] == "F401").sum() == 0


def test_a_quick_fix_is_refused_once_its_file_changed(ws: sk.Workspace) -> None:
    a = ws.branch("stale-fix")
    a.write("pkg/stale.py", "import os\nimport re\n\n\ndef add(a, b):\n    return a + b\n")
    a.write("pkg/other.py", "X = 1\n")

    def fix(name: str) -> sk.Fix:
        table = a.lint(["pkg/stale.py"])
        row = table[table["message"].str.contains(f"`{name}` imported")].iloc[0]
        return next(f for f in row["fixes"] if "Remove" in f.title)

    first = fix("os")
    a.write("pkg/other.py", "X = 2\n")  # another file changed: the fix still holds
    a.apply_edit(first)
    assert a.read("pkg/stale.py") == "import re\n\n\ndef add(a, b):\n    return a + b\n"
    second = fix("re")  # computed at version 4
    a.replace("pkg/stale.py", "import re\n", "import sys\nimport re\n\nprint(sys.argv)\n")
    with pytest.raises(StagingError, match=r"computed for version 4 of pkg/stale.py; the branch "
                       r"'stale-fix' is at version 5 and the file changed: lint again"):  # fmt: skip
        a.apply_edit(second)  # at its positions it would delete 'import sys'
    assert a.version == 5 and "import sys\nimport re\n" in a.read("pkg/stale.py")


def test_lint_refuses_paths_that_are_not_files_of_the_branch(ws: sk.Workspace) -> None:
    a = ws.branch("lint-paths")
    a.delete("pkg/util.py")
    a.write("pkg/new/deep.py", "import os\n")
    for path, error, message in [
        ("pkg", sk.ArgumentError, r"'pkg' is a directory in branch 'lint-paths' \(version 2\); "
         r"lint takes files: list them, e.g. \['pkg/__init__.py', 'pkg/mod.py', 'pkg/new/"),
        ("pkg/new", sk.ArgumentError, r"'pkg/new' is a directory .* e.g. \['pkg/new/deep.py'\]"),
        ("pkg/util.py", NotFound, "'pkg/util.py' was deleted in branch 'lint-paths'"),
        ("pkg/mdo.py", NotFound, "'pkg/mdo.py' is neither staged in branch 'lint-paths' "),
        ("pkg/mdo", NotFound, "'pkg/mdo' is neither staged"),
        ("notes.txt", NotFound, "'notes.txt' is neither staged"),
    ]:  # fmt: skip
        with pytest.raises(error, match=message) as raised:
            a.lint([path])
        assert "shadowkernel-mnt" not in str(raised.value)  # the mount is no name of the user's
    assert list(a.lint(["pkg/new/deep.py", "pkg/mod.py"])["code"]) == ["F401", "F401"]


def test_lint_by_default_takes_staged_files_that_are_not_utf8(ws: sk.Workspace) -> None:
    a = ws.branch("latin")
    a.write_bytes("pkg/latin.py", "s = 'caf\xe9'\nimport os\n".encode("latin-1"))
    a.write_bytes("pkg/logo.png", b"\x89PNG\r\n\x1a\n\0\0")
    assert list(a.lint()["code"]) == list(a.lint(["pkg/latin.py"])["code"]) == ["F401"]


# -- lints ----------------------------------------------------------------------------------------


def test_lint_marks_what_the_branch_introduced(ws: sk.Workspace) -> None:
    a = ws.branch("lint")
    a.replace("pkg/mod.py", "return a + b", "return a + b + undefined_name")
    table = a.lint()
    assert table.attrs == {"branch": "lint", "version": 1}
    by_code = dict(zip(table["code"], table["new"], strict=True))
    assert by_code == {"F401": False, "F821": True}  # the unused import was there before
    new = a.lint(new_only=True)
    assert list(new["code"]) == ["F821"]
    assert list(a.lint(paths=["pkg/util.py"])["code"]) == []
    with pytest.raises(NotFound):
        a.lint(paths=["nope.py"])


def test_lints_of_the_same_version_need_no_second_switch(ws: sk.Workspace) -> None:
    a = ws.branch("noswitch")
    a.write("pkg/ns.py", "import os\n")
    a.lint()
    a.lint()
    events = [e for e in ws.timeline().events if e.branch == "noswitch"]
    assert events[-1].switch == 0
    assert events[-1].outcome == "1 lints (1 new)"


def test_branches_share_one_copy_of_a_base_until_the_user_changes_it(
    ws: sk.Workspace, project: Path
) -> None:
    """Branches forked from one file hold one copy of its base; after the user changes the
    file a new branch's base is the new content, and the branches before keep theirs."""
    path, name = project / "shared_base.py", "shared_base.py"
    path.write_text("x = 1\n")
    forked = []

    def fork() -> bytes | None:
        forked.append(ws.branch(f"shared-base-{len(forked)}"))
        forked[-1].write(name, f"x = {len(forked) + 10}\n")
        return forked[-1].bases[name]

    try:
        first, second = fork(), fork()
        assert first == b"x = 1\n" and second is first
        path.write_text("x = 3\n")
        assert fork() == b"x = 3\n"
        assert forked[0].bases[name] == b"x = 1\n"
        path.write_text("x = 1\n")  # back to the first content: its one copy again
        assert fork() is first
    finally:
        path.unlink()
        for branch in forked:
            branch.drop()


# -- accept ---------------------------------------------------------------------------------------


def test_accept_writes_exactly_the_branch_files(fresh_project: Path) -> None:
    with sk.Workspace(fresh_project, servers=["ruff"]) as ws:
        before = snapshot(fresh_project, with_times=False)
        a = ws.branch("a")
        a.write("pkg/new/deep.py", "X = 1\n")
        a.replace("pkg/util.py", "return 1", "return 2")
        a.delete("README.md")
        a.lint()
        b = ws.branch("b")
        b.replace("pkg/mod.py", "a + b", "b + a")
        result = a.accept()
        assert sorted(result.written) == ["pkg/new/deep.py", "pkg/util.py"]
        assert result.deleted == ("README.md",) and result.merged == ()
        after = snapshot(fresh_project, with_times=False)
        changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
        assert changed == {"pkg/new", "pkg/new/deep.py", "pkg/util.py", "README.md"}
        assert (fresh_project / "pkg/util.py").read_text() == UTIL.replace("return 1", "return 2")
        assert (fresh_project / "pkg/util.py").stat().st_mode & 0o777 == 0o640  # mode kept
        assert not [n for n in os.listdir(fresh_project / "pkg") if n.endswith(".sk")]
        assert a.diff() == ""  # re-based on what it wrote
        assert b.lint()["path"].tolist() == ["pkg/mod.py"]  # other branches keep working


def test_accept_with_a_conflicting_user_edit_writes_nothing(fresh_project: Path) -> None:
    with sk.Workspace(fresh_project, servers=["ruff"]) as ws:
        a = ws.branch("a")
        a.write("pkg/new.py", "X = 1\n")
        a.replace("pkg/mod.py", "return a + b", "return a - b")
        a.replace("pkg/util.py", "return 1", "return 2")
        (fresh_project / "pkg/mod.py").write_text(MOD.replace("return a + b", "return 0"))
        # A non-overlapping user edit on another file would merge, but not on its own:
        (fresh_project / "pkg/util.py").write_text("# user\n" + UTIL)
        before = snapshot(fresh_project)
        with pytest.raises(ConflictError, match="pkg/mod.py") as caught:
            a.accept()
        assert caught.value.paths == ("pkg/mod.py",)
        assert "fork a new branch" in str(caught.value)  # re-staging here cannot resolve it
        assert snapshot(fresh_project) == before
        # Once the conflicting file is re-staged on top of the user's version, accept merges.
        a.write("pkg/mod.py", MOD.replace("return a + b", "return 0  # agreed"))
        with pytest.raises(ConflictError):
            a.accept()  # still against the old base: the same lines differ
        (fresh_project / "pkg/mod.py").write_text(MOD)
        result = a.accept()
        assert result.merged == ("pkg/util.py",)
        assert (fresh_project / "pkg/util.py").read_text() == "# user\n" + UTIL.replace("1", "2")
        assert (fresh_project / "pkg/new.py").read_text() == "X = 1\n"


def test_accept_checks_every_path_before_writing_any(
    fresh_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sk.Workspace(fresh_project, servers=[]) as ws:
        a = ws.branch("a")
        a.replace("pkg/util.py", "return 1", "return 2")
        a.write("late/x.py", "X = 1\n")
        a.delete("bin.dat")  # a file deleted may become a folder
        a.write("bin.dat/inner.txt", "in\n")
        with pytest.raises(StagingError, match=r"bin.dat: is a folder in the branch \(it holds "
                           "bin.dat/inner.txt\\)"):  # fmt: skip
            a.write("bin.dat", "a file again\n")
        (fresh_project / "late").write_text("the user made a file here\n")
        before = snapshot(fresh_project)
        with pytest.raises(PathError, match="late/x.py: late is a file in the user's folder"):
            a.accept()
        assert snapshot(fresh_project) == before  # not pkg/util.py either: nothing written
        (fresh_project / "late").unlink()
        real_write = type(ws.folder).write_atomic

        def full_disk(folder, path, data, mode=None):  # type: ignore[no-untyped-def]
            if path == "late/x.py":
                raise OSError(28, "No space left on device")
            real_write(folder, path, data, mode)

        monkeypatch.setattr(type(ws.folder), "write_atomic", full_disk)
        with pytest.raises(PathError, match=r"cannot write late/x.py \(No space left on device\); "
                           "written before it: bin.dat, bin.dat/inner.txt; the rest"):  # fmt: skip
            a.accept()  # deletions first, then in order: what was written is named
        monkeypatch.undo()
        result = a.accept()
        assert result.written == ("late/x.py", "pkg/util.py") and result.deleted == ()
        assert (fresh_project / "bin.dat/inner.txt").read_text() == "in\n"
        assert (fresh_project / "pkg/util.py").read_text() == UTIL.replace("1", "2")
        assert a.diff() == ""


def test_write_refuses_a_symlink_unless_deleted_first(fresh_project: Path) -> None:
    (fresh_project / "alias.md").symlink_to("README.md")
    with sk.Workspace(fresh_project, servers=[]) as ws:
        a = ws.branch("a")
        for call in (lambda: a.write("alias.md", "changed\n"),
                     lambda: a.write_bytes("alias.md", b"changed\n", mode=0o644),
                     lambda: a.read("alias.md"), lambda: a.replace("alias.md", "p", "q")):  # fmt: skip
            with pytest.raises(StagingError, match="alias.md.* is a symlink .*(stage|give the "
                               "path of) the file it points to"):  # fmt: skip
                call()
        assert a.version == 0
        a.delete("alias.md")  # explicit: the link goes, and a file may take its place
        a.write("alias.md", "a file now\n")
        assert a.mode("alias.md") == 0o644 and "old mode 120000\nnew mode 100644\n" in a.diff()
        a.accept()
    assert not (fresh_project / "alias.md").is_symlink()
    assert (fresh_project / "alias.md").read_text() == "a file now\n"
    assert (fresh_project / "README.md").read_text() == "# p\n"  # not written through the link


# -- interleaving ---------------------------------------------------------------------------------

SNIPPETS = [
    "import json\n",
    "value = undefined_{i}\n",
    "def f{i}(x):\n    return x\n",
    "import os, sys\n",
    "x{i} = [1,2 ,3]\n",
    "print(missing_{i})\n",
]


def random_edit(rng: random.Random, branch: sk.Branch, step: int) -> None:
    files = ["pkg/mod.py", "pkg/util.py", f"pkg/b_{branch.name}.py"]
    path = rng.choice(files)
    try:
        text = branch.read(path)
    except NotFound:
        text = ""
    kind = rng.random()
    if kind < 0.6 or not text:
        branch.write(path, text + rng.choice(SNIPPETS).format(i=step))
    elif kind < 0.8:
        lines = text.splitlines(keepends=True)
        del lines[rng.randrange(len(lines))]
        branch.write(path, "".join(lines))
    else:
        branch.delete(path)


def test_interleaved_lints_equal_isolated_lints(ws: sk.Workspace, project: Path) -> None:
    """6 branches x 4 edits in a seeded random order through one shadow; each answer equals
    the answer a separate workspace gives for that branch's state alone."""
    rng = random.Random(4)
    branches = [ws.branch(f"diff{i}") for i in range(6)]
    plan = [b for b in branches for _ in range(4)]
    rng.shuffle(plan)
    answers = []
    for step, branch in enumerate(plan):
        random_edit(rng, branch, step)
        answers.append((dict(branch.files), lints(branch.lint())))
        if rng.random() < 0.3:  # and sometimes another branch's older answer in between
            other = rng.choice(branches)
            answers.append((dict(other.files), lints(other.lint())))
    with sk.Workspace(project, servers=["ruff"]) as reference:
        for i, (files, answer) in enumerate(answers):
            alone = reference.branch(f"alone{i}")
            for path, data in files.items():
                if data is None:
                    alone.delete(path)
                else:
                    alone.write(path, data.decode())
            assert lints(alone.lint()) == answer, f"answer {i} for {sorted(files)}"
            alone.drop()
    switched = [e for e in ws.timeline().events if e.branch.startswith("diff") and e.switch > 0]
    assert len(switched) >= 10


def test_requests_from_many_threads(project: Path) -> None:
    with sk.Workspace(project, servers=["ruff"], lanes=2) as ws:
        errors: list[BaseException] = []

        def agent(n: int) -> None:
            try:
                b = ws.branch(f"t{n}")
                for k in range(1, 5):
                    b.write(f"pkg/t{n}.py", "".join(f"print(u{n}_{j})\n" for j in range(k)))
                    table = b.lint()
                    assert table.attrs["version"] == k
                    names = sorted(m.split("`")[1] for m in table["message"])
                    assert names == sorted(f"u{n}_{j}" for j in range(k)), table
            except BaseException as exc:  # reported below, from the main thread
                errors.append(exc)

        threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[0]
        timeline = ws.timeline()
        assert len(timeline) == 24
        assert {e.lane for e in timeline.events} == {0, 1}
        for branch in (f"t{n}" for n in range(6)):
            versions = [e.version for e in timeline.events if e.branch == branch]
            assert versions == [1, 2, 3, 4]  # one lane at a time: in the order asked
        assert "application/vnd.shadowkernel.timeline+json" in timeline._repr_mimebundle_()


def test_async_variants_run_on_the_workspace_loop(ws: sk.Workspace) -> None:
    import asyncio

    a = ws.branch("async")
    a.write("pkg/asy.py", "import os\n")

    async def main() -> pd.DataFrame:
        return await a.lint_async()

    assert list(asyncio.run(main())["code"]) == ["F401"]


def test_closed_workspace_refuses_calls(fresh_project: Path) -> None:
    ws = sk.Workspace(fresh_project, servers=["ruff"])
    a = ws.branch("a")
    ws.close()
    ws.close()  # idempotent
    with pytest.raises(ShadowError, match="closed"):
        a.write("x.py", "")
    with pytest.raises(ShadowError, match="closed"):
        ws.branch("b")


def test_unknown_servers_and_an_empty_commit_message_are_refused_by_name(ws) -> None:
    """A lint that asks a server the workspace does not run is refused even when the branch
    has nothing to lint (an empty table looked like clean code); an empty commit message is
    refused before git is asked."""
    a = ws.branch("nothing-staged")
    with pytest.raises(sk.NotFound, match=r"servers: \['nosuch'\] not in this pool"):
        a.lint(servers=["nosuch"])
    a.write("pkg/mod.py", "import os\n")
    with pytest.raises(sk.ArgumentError, match="message is empty"):
        a.commit(message=" \n")
