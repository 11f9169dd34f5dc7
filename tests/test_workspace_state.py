"""A branch's state as one object: staging, merging and the scratch layer on `BranchState`
directly (no shadow, no servers), and nobody reaching into a branch's private members."""

from __future__ import annotations

import ast
import pickle
import random
from pathlib import Path

import pytest
from overlay_helpers import version_blobs

from shadowkernel.errors import ClosedError, ShadowError, StagingError
from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File
from shadowkernel.paths import RelPath
from shadowkernel.workspace.folder import Folder
from shadowkernel.workspace.staging import DELTA_RUN
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


# -- a long history on a real file: the memory budget holds ---------------------------------------

BIG = RelPath("more_itertools/more.py")  # 5,644 lines, 175 KB (conftest's `library`)


def edits_of(base: bytes, n: int) -> list[bytes]:
    """n versions of `base`, each with its own line inserted at its own top-level place."""
    lines = base.splitlines(keepends=True)
    places = [i for i, line in enumerate(lines) if line.startswith((b"def ", b"class "))]
    return [b"".join([*lines[: places[k % len(places)]], b"zz_%d = %d\n" % (k, k),
                      *lines[places[k % len(places)] :]]) for k in range(n)]  # fmt: skip


def held_bytes(state: BranchState) -> int:
    """Bytes of file content the branch's versions keep in memory (each object once)."""
    held = {id(d): len(d) for v in state.versions for p in v.files if (d := v.files.held(p))}
    return sum(held.values())


def test_a_long_history_keeps_in_memory_the_budget_and_the_head(library: Path) -> None:
    base = (library / BIG).read_bytes()
    budget, store = 4 * len(base), BlobStore(memory_budget=4 * len(base))
    folder, state = Folder(str(library)), BranchState("agent")
    texts = edits_of(base, 30)
    try:
        for text in texts:
            state.stage({BIG: text}, "write", folder, store.make)
        # The blobs made while the budget lasted, and the head: 5 copies (it was 30).
        assert held_bytes(state) <= budget + len(base) * 2
        assert state.head.files.held(BIG) is texts[-1]  # the head stays in memory
        # Every version still reads as staged: spilled ones come back from their blob.
        assert [v.files[BIG] for v in state.versions[1:]] == texts
        assert dict(state.versions[3].files) == {BIG: texts[2]}
    finally:
        store.close()


def small_edits(base: bytes, n: int, seed: int, large: int = 0) -> list[bytes]:
    """n versions, each a random small edit of the one before (a line added, removed or
    changed anywhere), and every `large`th a large one (a third of the file rewritten)."""
    rng, text, out = random.Random(seed), base, []
    for k in range(n):
        at = rng.randrange(len(text))
        if large and k % large == large - 1:
            text = text[:at] + text[at:][::-1][: len(text) // 3] + text[at + len(text) // 3 :]
        else:
            cut = rng.choice([0, 0, rng.randrange(1, 200)])
            text = (
                text[:at] + rng.choice([b"", b"x = %d\n" % k, b"# \xc3\xa9\n"]) + text[at + cut :]
            )
        out.append(text)
    return out


def test_small_changes_keep_older_versions_as_changes_read_back_exactly(library: Path) -> None:
    base = (library / BIG).read_bytes()
    store, folder = BlobStore(), Folder(str(library))
    try:
        for seed, large in ((1, 10), (2, 0)):
            state, texts = BranchState("agent"), small_edits(base, 70, seed, large)
            for text in texts:
                state.stage({BIG: text}, "write", folder, store.make)
            blobs = [v.manifest[BIG].blob for v in state.versions[1:]]  # type: ignore[union-attr]
            # Every version reads as staged, from its blob and from its files.
            assert [v.files[BIG] for v in state.versions[1:]] == texts
            assert [b.bytes() for b in blobs] == texts
            # Whole copies: the head, each version a large change replaced, one after
            # DELTA_RUN changes in a row.
            whole = [b for b in blobs if b.data is not None]
            assert len(whole) == 1 + (7 if large else 70 // (DELTA_RUN + 1))
            assert held_bytes(state) == sum(b.size for b in whole)  # the rest: from blobs
            hops = []  # reading one goes through at most DELTA_RUN changes
            for blob in blobs:
                hops.append(0)
                while blob.change is not None:
                    hops[-1], blob = hops[-1] + 1, blob.change.newer
            assert max(hops) == (9 if large else DELTA_RUN)
            # What the store counts is what it keeps: whole bytes, and the changes' middles.
            assert store.in_memory == sum(
                len(b.data) if b.data is not None else len(b.change.middle)  # type: ignore[union-attr]
                for b in {id(b): b for v in state.versions for b in version_blobs(v)}.values()
            )
            # Another process (the overlay) gets the bytes, not the chain.
            shrunk = next(b for b in blobs if b.change is not None)
            sent = pickle.loads(pickle.dumps(shrunk))
            assert sent.data == shrunk.bytes() and sent.change is None and sent == shrunk
            del state, blobs, whole, shrunk, sent, blob
        assert store.in_memory == 0  # everything counted went with the branches
    finally:
        store.close()


def test_a_released_version_read_after_its_spill_is_gone_names_the_path(library: Path) -> None:
    base = (library / BIG).read_bytes()
    store, state = BlobStore(memory_budget=0), BranchState("agent")
    for text in edits_of(base, 3):
        state.stage({BIG: text}, "write", Folder(str(library)), store.make)
    store.close()  # as a workspace's close removes its spill files
    assert state.head.files[BIG] is not None  # the head is in memory
    with pytest.raises(ShadowError, match=f"{BIG}.*spilled past the memory budget"):
        state.versions[1].files[BIG]
    assert state.versions[1].files.present(BIG)  # told without reading the bytes back


def test_line_maps_live_with_the_version_and_carry_over_unchanged_paths(
    folder: Folder, make
) -> None:  # type: ignore[no-untyped-def]
    state = BranchState("agent")
    mod, run = RelPath("pkg/mod.py"), RelPath("run.sh")
    state.stage({mod: b"x = 0\na = 1\nb = 2\nc = 3\n"}, "write", folder, make)
    base = folder.content(mod) or b""
    first = state.head.files.line_map(mod, base)
    assert first.get(2) == 1 and first.get(1) is None
    state.stage({run: b"echo bye\n"}, "write", folder, make)  # mod's bytes are the same object
    assert state.head.files.has_line_map(mod, base)
    other = bytes(bytearray(base))  # equal bytes, another object (say, a base after accept)
    assert not state.head.files.has_line_map(mod, other)
    assert state.head.files.line_map(mod, other) == first
