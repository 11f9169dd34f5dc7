"""The workspace's pure parts, directly: staging into overrides, the accept plan, keep's rules."""

from __future__ import annotations

from shadowkernel.overlay.store import WHITEOUT, BlobStore, Dir, File, Symlink, freeze
from shadowkernel.paths import RelPath
from shadowkernel.workspace import accept, scratch, staging
from shadowkernel.workspace.staging import LINK

P = RelPath


def test_staged_adds_files_whiteouts_and_the_new_folders_above_them() -> None:
    store = BlobStore()
    before = freeze({P("keep.py"): WHITEOUT})
    data = {P("new/deep/a.py"): b"A\n", P("gone.py"): None}
    out = staging.staged(before, data, {P("new/deep/a.py"): 0o755}, store.make,
                         lambda p: p == "new")  # fmt: skip
    assert out[P("gone.py")] is WHITEOUT and out[P("keep.py")] is WHITEOUT
    made = out[P("new/deep/a.py")]
    assert isinstance(made, File) and made.blob.bytes() == b"A\n" and made.mode == 0o755
    assert out[P("new/deep")] == Dir(origin=None) and P("new") not in out  # "new" exists
    assert P("new/deep/a.py") not in before  # the old manifest is untouched


def test_merge_plan_writes_merges_and_stops_on_overlaps() -> None:
    base = {P("a"): b"1\n2\n3\n", P("b"): b"x\n", P("c"): b"k\n", P("d"): None}
    mine = {P("a"): b"1\n2\n3!\n", P("b"): b"y\n", P("c"): b"k\n", P("d"): b"new\n"}
    theirs = {P("a"): b"1!\n2\n3\n", P("b"): b"z\n", P("c"): b"changed\n", P("d"): None}
    plan = accept.merge_plan(mine, base.get, theirs.get)
    assert plan.writes == {P("a"): b"1!\n2\n3!\n", P("d"): b"new\n"}
    assert plan.merged == [P("a")] and plan.conflicts == [P("b")]  # c: mine unchanged


def test_keep_rules_read_nested_gitignores_from_the_root() -> None:
    ignores = {P(".gitignore"): b"*.log\n/dist/\n", P("pkg/.gitignore"): b"gen_*.py\n/local/\n"}
    rules = scratch.ignore_rules(ignores.get, [P("pkg/sub/gen_x.py")])
    ignored = {p for p in ["a.log", "dist/x", "sub/dist/x", "pkg/sub/gen_x.py", "gen_y.py",
                           "pkg/local/f", "pkg/sub/local/f", "pkg/__pycache__/m.pyc",
                           ".git/HEAD", "node_modules/x/i.js"]
               if rules.match_file(p)}  # fmt: skip
    assert ignored == {"a.log", "dist/x", "pkg/sub/gen_x.py", "pkg/local/f",
                       "pkg/__pycache__/m.pyc", ".git/HEAD", "node_modules/x/i.js"}  # fmt: skip


def test_kept_takes_files_links_and_deletions_with_their_modes() -> None:
    store = BlobStore()
    written = {
        P("a.py"): File(store.make(b"A\n")),
        P("bin"): File(store.make(b"\0\1"), mode=0o755),
        P("gone.py"): None,
        P("wiped.py"): WHITEOUT,
        P("dir"): Dir(),
        P("link"): Symlink(b"a.py"),
        P("x.log"): File(store.make(b"log\n")),
    }
    rules = scratch.ignore_rules({P(".gitignore"): b"*.log\n"}.get, written)
    out = scratch.kept(written, rules, lambda f: f.blob.bytes())
    data, modes = out
    assert data == {P("a.py"): b"A\n", P("bin"): b"\0\1", P("gone.py"): None,
                    P("wiped.py"): None, P("link"): b"a.py"}  # fmt: skip
    assert modes == {P("a.py"): 0o644, P("bin"): 0o755, P("link"): LINK}


def test_recent_texts_give_a_staged_text_once_then_decode() -> None:
    """The lint after a write opens the text it was staged from (no decode); afterwards, or
    past the budget, the bytes are decoded (the same text)."""
    recent = staging.RecentTexts(budget=10)
    text = "caf\u00e9 = 1\n"
    data = text.encode()
    recent.remember(data, text)
    assert recent.text(data) is text
    assert recent.text(data) == text and recent.text(data) is not text  # read once: decoded
    first, second = b"a = 1\n", b"b = 22\n"
    recent.remember(first, "a = 1\n")
    recent.remember(second, "b = 22\n")  # 13 bytes > 10: the oldest goes
    assert recent.text(second) == "b = 22\n" and recent.text(first) == "a = 1\n"
