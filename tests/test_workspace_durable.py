"""Branches that outlive the workspace: a second `Workspace` on the folder brings them back
(names, versions, files, bases, the scratch layer), `restore=False` starts empty deleting
nothing, `drop()` deletes durably, one process at a time holds a state directory, and nothing
is ever written into the user's folder."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from overlay_helpers import make_project, needs_fuse, snapshot, version_blobs
from waiting import wait_for

import shadowkernel as sk
from shadowkernel.workspace import durable, statedir

pytestmark = [needs_fuse, pytest.mark.timeout(180)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def reopen(project: Path, state: Path, **options: object) -> sk.Workspace:
    return sk.Workspace(project, servers=[], state=state, **options)  # type: ignore[arg-type]


def history(ws: sk.Workspace) -> dict[str, list[tuple[int, str, dict]]]:
    """Every branch's versions: number, op and files."""
    return {name: [(v.number, v.op, dict(v.files)) for v in b.versions]
            for name, b in ws.branches.items()}  # fmt: skip


def test_branches_come_back_with_their_names_versions_files_and_scratch(
    project: Path, tmp_path: Path
) -> None:
    before, state = snapshot(project), tmp_path / "state"
    with reopen(project, state) as ws:
        assert ws.restored == 0 and ws.state_dir == str(state)
        a = ws.branch("a")
        a.write("pkg/mod.py", "def add(a, b):\n    return a - b\n")
        a.write("pkg/new/thing.py", "X = 'é'\n")
        a.delete("docs/guide.txt")
        many = "mkdir gen && for i in $(seq 40); do echo $i > gen/$i.txt; done"  # one syncfs
        assert a.run(f"echo built > out.txt && chmod +x run.sh && {many}", network=True).ok
        b = ws.branch("b")
        b.replace("README.md", "demo", "demo, improved")
        kept = history(ws)
        diff_a, bases_a = str(a.diff()), dict(a.bases)
    with reopen(project, state) as again:
        assert again.restored == 2
        assert list(again.branches) == ["a", "b"]
        assert history(again) == kept
        a = again.branches["a"]
        assert a.read("pkg/new/thing.py") == "X = 'é'\n"
        assert str(a.diff()) == diff_a and dict(a.bases) == bases_a
        seen = a.run("cat out.txt; test -x run.sh && echo exec; cat docs/guide.txt || echo gone;"
                     " cat gen/40.txt; ls gen | wc -l", network=True)  # fmt: skip
        assert seen.stdout == "built\nexec\ngone\n40\n40\n", seen.stderr  # the scratch came back
        assert a.write("pkg/mod.py", "X = 3\n") == 4  # staging goes on from the restored head
    with reopen(project, state) as third:
        assert third.branches["a"].version == 4
        assert third.branches["a"].versions[-1].op == "write pkg/mod.py"
    assert snapshot(project) == before


def test_restore_false_starts_empty_and_drop_deletes_durably(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with reopen(project, state) as ws:
        ws.branch("a").write("pkg/mod.py", "A = 1\n")
        ws.branch("b").write("pkg/mod.py", "B = 1\n")
    with reopen(project, state, restore=False) as fresh:
        assert fresh.restored == 0 and dict(fresh.branches) == {}
        fresh.branch("a").write("pkg/mod.py", "newer a\n")  # the name of a kept branch
    with reopen(project, state) as ws:
        names = list(ws.branches)
        older = next(n for n in names if n.startswith("a~"))
        assert sorted(names) == sorted(["a", "b", older])
        assert ws.branches["a"].read("pkg/mod.py") == "newer a\n"  # the newest keeps the name
        assert ws.branches[older].read("pkg/mod.py") == "A = 1\n"
        ws.branches["b"].drop()
        ws.branches[older].drop()
    with reopen(project, state) as ws:
        assert list(ws.branches) == ["a"]
        assert ws.branches["a"].read("pkg/mod.py") == "newer a\n"


def test_a_dropped_branchs_blobs_leave_the_state_directory_when_it_closes(
    project: Path, tmp_path: Path
) -> None:
    """A dropped branch's content goes from disk once the workspace closes, not only at the
    next open; blobs another branch names stay."""
    state = tmp_path / "state"
    blobs = state / "blobs"
    big, shared = os.urandom(4 << 20), b"shared\n" * 4096
    with reopen(project, state) as ws:
        keep, gone = ws.branch("keep"), ws.branch("gone")
        keep.write_bytes("data/shared.bin", shared)
        gone.write_bytes("data/shared.bin", shared)
        gone.write_bytes("data/big.bin", big)
        named = hashlib.sha256(big).hexdigest()
        assert (blobs / named).exists()
        gone.drop()
    assert not (blobs / named).exists()
    assert (blobs / hashlib.sha256(shared).hexdigest()).exists()
    with reopen(project, state) as ws:
        assert list(ws.branches) == ["keep"]
        assert ws.branches["keep"].read_bytes("data/shared.bin") == shared


def test_a_branch_whose_base_changed_comes_back_as_it_was(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with reopen(project, state) as ws:
        ws.branch("a").replace("pkg/mod.py", "def add", "def plus")
    (project / "pkg/mod.py").write_text("def add(a, b):\n    return a + b\n\n\nY = 2\n")
    with reopen(project, state) as ws:
        a = ws.branches["a"]
        assert a.bases["pkg/mod.py"] == b"def add(a, b):\n    return a + b\n"  # as recorded
        assert a.accept().merged == ("pkg/mod.py",)  # accept's three-way merge takes it from here
    assert (project / "pkg/mod.py").read_text() == "def plus(a, b):\n    return a + b\n\n\nY = 2\n"


def test_restored_branches_merge_over_the_base_they_share(project: Path, tmp_path: Path) -> None:
    """Which of two bases is older (a merge's base) comes back too: a accepted after b
    forked still conflicts with b, and c, forked after the accept, still merges with a."""
    state, mod = tmp_path / "state", "def add(a, b):\n    return a + b\n"
    with reopen(project, state) as ws:
        b = ws.branch("b")
        b.replace("pkg/mod.py", "a + b", "a + b + 1")
        a = ws.branch("a")
        a.replace("pkg/mod.py", "a + b", "a + b + 0")
        a.accept()
        ws.branch("c").replace("pkg/mod.py", "def add", "def plus")
    with reopen(project, state) as ws:
        a, b, c = (ws.branches[n] for n in "abc")
        ab = ws.merge_check(a, b, "ab")
        assert ab.conflicts == ("pkg/mod.py",) and ab.bases["pkg/mod.py"] == mod.encode()
        assert ws.merge_check(c, a, "ca").conflicts == ()
        assert ws.branches["ca"].read("pkg/mod.py") == mod.replace("add", "plus").replace(
            "a + b", "a + b + 0")  # fmt: skip


def test_restored_bases_keep_their_age(project: Path, tmp_path: Path) -> None:
    """A merge branch's base is as old as its sides' (b's and d's here, taken before a was
    accepted). After a restart a merge of it with c, forked after the accept, still takes
    that older base and keeps a's accepted edit (the newer base would have it reverted); and
    a's base, renewed by its accept, stays older than c's, taken after the user's next edit."""
    state = tmp_path / "state"
    mod = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n" \
        "def mul(a, b):\n    return a * b\n"  # fmt: skip
    (project / "pkg/mod.py").write_text(mod)
    with reopen(project, state) as ws:
        b, d, a = ws.branch("b"), ws.branch("d"), ws.branch("a")
        b.replace("pkg/mod.py", "a - b", "a - b - 1")
        d.replace("pkg/mod.py", "a * b", "a * b * 1")
        a.replace("pkg/mod.py", "a + b", "a + b + 0")
        a.accept()
        user = '"""Math."""\n' + mod.replace("a + b", "a + b + 0")
        (project / "pkg/mod.py").write_text(user)  # the user edits on after the accept
        ws.branch("c").replace("pkg/mod.py", "def add", "# c\ndef add")
        ws.merge_check(b, d, "m")  # recorded after c took its (newer) base
    with reopen(project, state) as ws:
        m, c, a = (ws.branches[n] for n in "mca")
        joined = ws.merge_check(m, c, "mc")
        assert joined.conflicts == ()
        theirs = c.read("pkg/mod.py")
        assert theirs == user.replace("def add", "# c\ndef add")
        assert joined.read("pkg/mod.py") == theirs.replace("a - b", "a - b - 1").replace(
            "a * b", "a * b * 1")  # fmt: skip
        assert ws.merge_check(a, c, "ac").read("pkg/mod.py") == theirs


def test_a_merges_conflicts_come_back_and_accept_still_refuses_them(
    project: Path, tmp_path: Path
) -> None:
    """A merge_check branch restored after a restart still lists its conflicts and accept
    still refuses the paths not staged since; what was resolved before the restart stays
    resolved."""
    state = tmp_path / "state"
    (project / "pkg/other.py").write_text("O = 1\n")
    with reopen(project, state) as ws:
        a, b = ws.branch("a"), ws.branch("b")
        for branch, n in ((a, 0), (b, 1)):
            branch.replace("pkg/mod.py", "a + b", f"a + b + {n}")
            branch.write("pkg/other.py", f"O = {n + 2}\n")
        merged = ws.merge_check(a, b, "m")
        assert merged.conflicts == ("pkg/mod.py", "pkg/other.py")
        merged.write("pkg/other.py", "O = 5\n")
    before = snapshot(project)
    with reopen(project, state) as ws:
        merged = ws.branches["m"]
        assert merged.conflicts == ("pkg/mod.py", "pkg/other.py")
        with pytest.raises(sk.ConflictError, match="'m': pkg/mod.py still holds the conflict "
                           "markers merge_check put there; nothing") as caught:  # fmt: skip
            merged.accept()
        assert caught.value.paths == ("pkg/mod.py",) and snapshot(project) == before
        merged.write("pkg/mod.py", "def add(a, b):\n    return a + b + 1\n")
    with reopen(project, state) as ws:
        assert ws.branches["m"].accept().written == ("pkg/mod.py", "pkg/other.py")
    assert (project / "pkg/other.py").read_text() == "O = 5\n"


def test_state_none_keeps_nothing(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    with sk.Workspace(project, servers=[], state=None) as ws:
        assert ws.state_dir is None
        ws.branch("a").write("x.py", "x = 1\n")
    assert not (tmp_path / "xdg").exists()
    with sk.Workspace(project, servers=[]) as ws:
        assert ws.restored == 0 and dict(ws.branches) == {}


def test_the_default_state_lives_under_xdg_state_home_never_in_the_folder(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(project)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    with sk.Workspace(project, servers=[]) as ws:
        ws.branch("a").write("pkg/mod.py", "A = 1\n")
        where = Path(ws.state_dir or "")
    assert where.parent == tmp_path / "xdg" / "shadowkernel"
    assert where.name.startswith("project-") and (where / "record.sqlite").exists()
    assert (where / "folder").read_text() == str(project)
    with sk.Workspace(project, servers=[]) as ws:
        assert ws.branches["a"].read("pkg/mod.py") == "A = 1\n"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert statedir.state_home() == str(tmp_path / "home/.local/state/shadowkernel")
    assert snapshot(project) == before


def test_bad_state_directories_are_refused_by_name(project: Path, tmp_path: Path) -> None:
    with pytest.raises(sk.PathError, match="inside the folder"):
        reopen(project, project / ".state")
    with reopen(project, tmp_path / "state"):
        pass
    other = make_project(tmp_path / "other")
    with pytest.raises(sk.PathError, match=f"holds the branches of {project}"):
        reopen(other, tmp_path / "state")
    with pytest.raises(sk.ArgumentError, match="restore="):
        reopen(project, tmp_path / "state", restore="yes")
    assert not (project / ".state").exists()


def test_one_process_at_a_time_holds_a_state_directory(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with reopen(project, state) as ws:
        ws.branch("a").write("pkg/mod.py", "A = 1\n")
        with pytest.raises(sk.ConflictError, match="another Workspace of this process"):
            reopen(project, state)
        assert ws.branches["a"].write("pkg/mod.py", "A = 2\n") == 2  # the holder goes on
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(project), str(state)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(sk.ConflictError, match=f"process {holder.pid} \\(.*python"):
            reopen(project, state)
    finally:
        holder.communicate("")  # stdin closes: it closes its workspace and exits
    with reopen(project, state) as ws:  # released
        assert ws.branches["a"].version == 2


HOLD = """
import sys, shadowkernel as sk
with sk.Workspace(sys.argv[1], servers=[], state=sys.argv[2], mode="documents"):
    print("open", flush=True)
    sys.stdin.read()
"""


def test_the_state_directory_is_private(project: Path, tmp_path: Path) -> None:
    with reopen(project, tmp_path / "state") as ws:
        ws.branch("a").write("pkg/mod.py", "secret = 1\n")
    assert os.stat(tmp_path / "state").st_mode & 0o077 == 0
    assert os.stat(tmp_path / "state" / "blobs").st_mode & 0o077 == 0


def test_a_damaged_store_is_named_and_orphans_are_swept(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with reopen(project, state) as ws:
        ws.branch("a").write("pkg/mod.py", "A = 1\n")
    blobs = state / "blobs"
    (blobs / "tmp-crashed-write").write_bytes(b"half a blo")  # a write a crash cut short
    (blobs / ("0" * 64)).write_bytes(b"named by no record")
    with reopen(project, state) as ws:
        assert ws.branches["a"].read("pkg/mod.py") == "A = 1\n"
    named = {b"A = 1\n", (project / "pkg/mod.py").read_bytes()}  # the version and its base
    assert {p.name for p in blobs.iterdir()} == {hashlib.sha256(d).hexdigest() for d in named}
    for blob in blobs.iterdir():
        blob.unlink()
    with pytest.raises(sk.PathError, match="cannot restore its branches.*restore=False"):
        reopen(project, state)
    with reopen(project, state, restore=False) as ws:
        assert dict(ws.branches) == {}


def test_a_power_loss_before_the_flush_ends_a_branch_at_its_last_whole_version(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Records past the flusher's watermark may name blobs a power loss kept from the disk:
    the branch comes back at its last whole version, the others whole."""
    state = tmp_path / "state"
    with reopen(project, state) as ws:  # closing flushes: the watermark covers v1
        ws.branch("a").write("pkg/mod.py", "A = 1\n")
    monkeypatch.setattr(durable, "SYNC", "normal")  # nothing is flushed from here on
    with reopen(project, state) as ws:
        a, b = ws.branches["a"], ws.branch("b")
        a.write("pkg/mod.py", "A = 2\n")
        a.write("pkg/mod.py", "A = 3\n")
        b.write("README.md", "b's\n")
    (state / "blobs" / hashlib.sha256(b"A = 2\n").hexdigest()).unlink()  # never written back
    monkeypatch.setattr(durable, "SYNC", "behind")
    with reopen(project, state) as ws:
        a, b = ws.branches["a"], ws.branches["b"]
        assert [dict(v.files) for v in a.versions] == [{}, {"pkg/mod.py": b"A = 1\n"}]
        assert b.read("README.md") == "b's\n"
        assert a.write("pkg/mod.py", "A = 4\n") == 2  # it goes on from there
    assert "branch 'a' lost its changes after version 1" in caplog.text
    with reopen(project, state) as ws:
        assert ws.branches["a"].read("pkg/mod.py") == "A = 4\n"
        assert ws.branches["a"].version == 2


def test_small_changes_of_a_large_file_are_recorded_as_changes_and_come_back_whole(
    library: Path, tmp_path: Path
) -> None:
    """A real library's 5,644-line file edited version after version: each small change is a
    record of a few hundred bytes, no blob; edits far apart, a delete and a rewrite are blobs;
    a second workspace restores every version byte for byte."""
    project, state, path = library, tmp_path / "state", "more_itertools/more.py"
    base = (project / path).read_text()
    lines = base.splitlines(keepends=True)
    with reopen(project, state) as ws:
        a = ws.branch("a")
        a.write(path, "".join(["X = 1\n", *lines]))  # a change from the base (first touch)
        a.replace(path, "X = 1\n", "X = 2\n")  # from the previous version
        a.write(path, "".join([*lines[:-3], "Y = 3\n", *lines[-3:]]))  # both ends: a blob
        a.delete(path)
        a.write(path, base.replace("def ", "def  "))  # after a delete, a rewrite: blobs
        a.write(path, base.replace("def ", "def  ") + "Z = 4\n")
        kept = history(ws)
    records = _records(state)
    changes = [body["data"][path] for kind, body in records if kind == "version"]
    assert [isinstance(c, list) for c in changes] == [True, True, False, False, False, True]
    assert all(len(json.dumps(c)) < 200 for c in changes if isinstance(c, list))
    named = {p.name for p in (state / "blobs").iterdir()}
    assert named == {hashlib.sha256(d).hexdigest()
                     for d in ((project / path).read_bytes(), kept["a"][3][2][path],
                               kept["a"][5][2][path])}  # fmt: skip
    with reopen(project, state) as again:
        assert history(again) == kept
        assert again.branches["a"].read(path) == base.replace("def ", "def  ") + "Z = 4\n"
    seq, body = _first_version(state)  # damage: a change that does not fit what it changes
    body["data"][path][0] = 10**8
    with sqlite3.connect(state / "record.sqlite") as db:
        db.execute("UPDATE records SET body = ? WHERE seq = ?", (json.dumps(body), seq))
    with pytest.raises(sk.PathError, match="cannot restore its branches"):
        reopen(project, state)


def _first_version(state: Path) -> tuple[int, dict]:
    with sqlite3.connect(state / "record.sqlite") as db:
        seq, body = db.execute("SELECT seq, body FROM records WHERE kind = 'version' "
                               "ORDER BY seq LIMIT 1").fetchone()  # fmt: skip
    return seq, json.loads(body)


def _records(state: Path) -> list[tuple[str, dict]]:
    with sqlite3.connect(state / "record.sqlite") as db:
        rows = db.execute("SELECT kind, body FROM records ORDER BY seq").fetchall()
    return [(kind, json.loads(body)) for kind, body in rows]


def test_a_history_past_the_memory_budget_comes_back_whole(library: Path, tmp_path: Path) -> None:
    """With no memory budget every superseded version's bytes live in spill files only; they
    still read back as staged, before and after a restore (which replays the versions)."""
    project, state, path = library, tmp_path / "state", "more_itertools/more.py"
    lines = (project / path).read_text().splitlines(keepends=True)
    with reopen(project, state, memory_budget=0) as ws:
        a = ws.branch("a")
        for k in range(6):
            a.write(path, "".join([*lines[: 100 * k], f"X{k} = {k}\n", *lines[100 * k :]]))
        kept, diff_3 = history(ws), str(a.diff(version=3))
        assert [v.files.held(path) is not None for v in a.versions[1:]] == [False] * 5 + [True]
    with reopen(project, state, memory_budget=0) as again:
        restored = again.branches["a"]
        assert history(again) == kept and str(restored.diff(version=3)) == diff_3
        assert "+X2 = 2" in diff_3 and restored.versions[1].files.held(path) is None


BUDGET = 4 * 2**20  # the heads and the changes' middles fit; a rewrite's old bytes may spill


def test_random_work_on_a_real_library_comes_back_after_every_restart(
    library: Path, tmp_path: Path
) -> None:
    """Seeded work of agents on a real library (bursts of small edits and now and then a
    rewrite of its largest files, deletes, a new module; merges, drops, accepts), the workspace
    closed and reopened at random: before each close and after each reopen every branch has
    every version it had, each reading back byte for byte what was staged, though long runs of
    versions are kept as changes from the next and some bytes spilled past the budget."""
    project, state = tmp_path / "project", tmp_path / "state"
    shutil.copytree(library, project)  # accept writes into it
    rng, names, longest = random.Random(7), itertools.count(), 0
    model: dict[str, list[dict[str, str | None]]] = {}  # branch -> versions -> path -> digest

    def check(ws: sk.Workspace) -> None:
        assert sorted(ws.branches) == sorted(model)
        for name, versions in model.items():
            got = ws.branches[name].versions
            assert len(got) == len(versions), name
            for number, files in enumerate(versions):
                assert {p: _digest(got[number].files[p]) for p in files} == files, (name, number)

    ws = reopen(project, state, memory_budget=BUDGET)
    try:
        for _ in range(60):
            roll = rng.random()
            if len(model) < 2 or (roll < 0.1 and len(model) < 5):
                name = f"agent-{next(names)}"
                ws.branch(name)
                model[name] = [{}]
            elif roll < 0.7:  # an agent's burst of edits
                name = rng.choice(sorted(model))
                for _ in range(rng.randrange(1, 40)):
                    model[name].append(_stage(rng, ws.branches[name], project, model[name][-1]))
            elif roll < 0.78 and len(model) < 6:
                a, b = rng.sample(sorted(model), 2)
                merged = ws.merge_check(ws.branches[a], ws.branches[b], f"merge-{next(names)}")
                model[merged.name] = [{p: _digest(v.files[p]) for p in v.files}
                                      for v in merged.versions]  # fmt: skip
            elif roll < 0.84:
                del model[name := rng.choice(sorted(model))]
                ws.branches[name].drop()
            elif roll < 0.9:
                with contextlib.suppress(sk.ConflictError):  # the user's file moved on
                    ws.branches[rng.choice(sorted(model))].accept()
            else:
                check(ws)
                longest = max(longest, _longest_run(ws))
                ws.close()
                ws = reopen(project, state, memory_budget=BUDGET)
                check(ws)
        assert max(longest, _longest_run(ws)) >= 30  # versions kept as changes, in a row
    finally:
        ws.close()
    with reopen(project, state, memory_budget=BUDGET) as ws:
        check(ws)


def _stage(rng: random.Random, branch: sk.Branch, project: Path,
           files: dict[str, str | None]) -> dict[str, str | None]:  # fmt: skip
    """One edit of a path (mostly the largest file), staged; the version's files as digests."""
    path = rng.choices(("more_itertools/more.py", "more_itertools/recipes.py",
                        "more_itertools/new.py"), (6, 1, 1))[0]  # fmt: skip
    old = branch.files[path] if path in branch.files else _read(project / path)
    if old is not None and rng.random() < 0.02:
        branch.delete(path)
        return {**files, path: None}
    new = _edited(rng, old or b"")
    branch.write_bytes(path, new)
    return {**files, path: _digest(new)}


def _longest_run(ws: sk.Workspace) -> int:
    """The most versions of a path in a row kept as changes from the next, in any branch."""
    return max((blob.change.run for b in ws.branches.values() for v in b.versions
                for blob in version_blobs(v) if blob.change), default=0)  # fmt: skip


def _edited(rng: random.Random, data: bytes) -> bytes:
    """A small edit at a random place, or now and then a rewrite of half the lines."""
    if rng.random() < 0.02:
        lines = data.splitlines(keepends=True) or [b"x = 1\n"]
        rng.shuffle(lines)
        return b"".join(lines[: len(lines) // 2 + 1])
    at, comment = rng.randrange(len(data) + 1), f"# {rng.random()}\n".encode()
    return data[:at] + comment * rng.randrange(3) + data[at + rng.randrange(80) :]


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def test_the_flusher_checkpoints_the_record_not_the_callers(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging commits its record into the WAL and returns; copying the WAL into the
    database (with its fsyncs) is the flusher's, once the WAL passes CHECKPOINT_BYTES (here
    one byte): the database file alone, copied while the workspace is open, holds the
    records, and the callers' connection never checkpoints."""
    monkeypatch.setattr(durable, "CHECKPOINT_BYTES", 1)
    state = tmp_path / "state"
    with reopen(project, state) as ws:
        assert ws.durable is not None
        assert ws.durable._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        a = ws.branch("a")
        for i in range(5):
            a.write("pkg/mod.py", f"def add(a, b):\n    return a + b + {i}\n")

        def records_in_the_database_file() -> int:
            copy = tmp_path / "copy.sqlite"
            copy.write_bytes((state / "record.sqlite").read_bytes())  # no WAL beside it
            try:
                with contextlib.closing(sqlite3.connect(copy)) as db:
                    return int(db.execute("SELECT COUNT(*) FROM records").fetchone()[0])
            except sqlite3.OperationalError:  # the schema itself is still in the WAL only
                return 0
            finally:
                copy.unlink()

        wait_for(lambda: records_in_the_database_file() >= 6, 30, "a fork and 5 versions")
