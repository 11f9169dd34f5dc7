"""Pure edit application: unified diffs, search/replace, LSP edits, diff rendering."""

from __future__ import annotations

import random

import pytest

from shadowkernel.edits import (
    MAX_TEXT_BYTES,
    TextEdit,
    apply_patch,
    apply_text_edits,
    decode,
    encode,
    parse_patch,
    render_diff,
    replace_once,
    uri_to_rel,
    workspace_edit_changes,
)
from shadowkernel.errors import PathError, StagingError


def reader(files: dict[str, str]):
    return lambda path: files.get(path)


# -- search / replace -----------------------------------------------------------------------------


def test_replace_once_replaces_the_one_match() -> None:
    assert replace_once("a = 1\nb = 2\n", "b = 2", "b = 3", "m.py") == "a = 1\nb = 3\n"


@pytest.mark.parametrize(("text", "what"), [("x = 1\n", "does not occur"), ("y\ny\n", "occurs 2 times")])
def test_replace_once_names_file_and_search_text(text: str, what: str) -> None:
    with pytest.raises(StagingError, match=rf"m\.py: the search text 'y' {what}"):
        replace_once(text, "y", "z", "m.py")


def test_replace_once_refuses_an_empty_search() -> None:
    with pytest.raises(StagingError, match="empty"):
        replace_once("x", "", "y", "m.py")


# -- content limits -------------------------------------------------------------------------------


def test_binary_and_huge_content_are_refused() -> None:
    with pytest.raises(StagingError, match="binary"):
        decode(b"a\0b", "f.bin")
    with pytest.raises(StagingError, match="UTF-8"):
        decode(b"\xff\xfe", "f.txt")
    with pytest.raises(StagingError, match="byte limit"):
        encode("x" * (MAX_TEXT_BYTES + 1), "big.py")
    with pytest.raises(StagingError, match="must be str"):
        encode(b"bytes", "f.py")  # type: ignore[arg-type]


# -- unified diffs ------------------------------------------------------------------------------------


def random_text(rng: random.Random) -> str:
    words = ["alpha", "beta", "", "gamma", "x = 1", "def f():", "    return 2"]
    lines = [rng.choice(words) for _ in range(rng.randint(0, 12))]
    text = "\n".join(lines)
    return text + "\n" if rng.random() < 0.7 and text else text


def mutate(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(lines))
        if rng.random() < 0.5 and lines and at < len(lines):
            del lines[at]
        else:
            lines.insert(at, f"new {rng.randint(0, 99)}\n")
    out = "".join(lines)
    return out.rstrip("\n") if rng.random() < 0.2 else out


@pytest.mark.parametrize("seed", range(200))
def test_render_then_apply_round_trips(seed: int) -> None:
    rng = random.Random(seed)
    old = random_text(rng)
    new = mutate(rng, old)
    patch = render_diff("m.py", old.encode(), new.encode(), context=rng.randint(0, 3))
    if old == new:
        assert patch == ""
        return
    assert apply_patch(patch, reader({"m.py": old})) == {"m.py": new}


def test_patch_creates_and_deletes_files() -> None:
    patch = render_diff("new.py", None, b"x = 1\n") + render_diff("old.py", b"y\n", None)
    assert apply_patch(patch, reader({"old.py": "y\n"})) == {"new.py": "x = 1\n", "old.py": None}


def test_plain_diff_without_git_prefixes() -> None:
    patch = "--- m.py\n+++ m.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert apply_patch(patch, reader({"m.py": "a\n"})) == {"m.py": "b\n"}


def test_hunk_applies_where_its_context_moved() -> None:
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
    text = "top\nmore\nx\ny\n"
    assert apply_patch(patch, reader({"m.py": text})) == {"m.py": "top\nmore\nx\nz\n"}


def test_crlf_files_keep_their_line_ends() -> None:
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert apply_patch(patch, reader({"m.py": "a\r\nb\r\n"})) == {"m.py": "a\r\nc\r\n"}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("just prose", "no file headers"),
        ("--- a/m.py\nnot a plus line\n", "without a '\\+\\+\\+'"),
        ("--- a/m.py\n+++ b/m.py\n", "no hunks"),
        ("--- a/m.py\n+++ b/m.py\n@@ bogus @@\n", "malformed hunk header"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n", "ends early"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-nope\n+b\n", "does not apply to m.py"),
        ("--- a/gone.py\n+++ b/gone.py\n@@ -1 +1 @@\n-a\n+b\n", "does not exist"),
        ("--- /dev/null\n+++ b/m.py\n@@ -0,0 +1 @@\n+b\n", "already exists"),
    ],
)
def test_malformed_patches_are_refused(patch: str, message: str) -> None:
    with pytest.raises(StagingError, match=message):
        apply_patch(patch, reader({"m.py": "a\nb\n"}))


def test_patch_path_outside_the_workspace_is_a_path_error() -> None:
    with pytest.raises(PathError, match="leaves the workspace"):
        parse_patch("--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n")


# -- LSP edits ----------------------------------------------------------------------------------------


def test_text_edits_apply_against_the_original_positions() -> None:
    text = "hello world\nsecond\n"
    out = apply_text_edits(
        text,
        [TextEdit("m", 1, 1, 1, 6, "bye"), TextEdit("m", 2, 1, 2, 7, "2nd"),
         TextEdit("m", 3, 1, 3, 1, "third\n")],
        "m",
    )  # fmt: skip
    assert out == "bye world\n2nd\nthird\n"


def test_overlapping_text_edits_are_refused() -> None:
    with pytest.raises(StagingError, match="overlap"):
        apply_text_edits("abcdef", [TextEdit("m", 1, 1, 1, 4, ""), TextEdit("m", 1, 2, 1, 3, "")],
                         "m")  # fmt: skip


def test_workspace_edit_with_utf16_positions_and_file_operations() -> None:
    root = "/mnt/shadow"
    text = 'x = "😀"; y = 1\n'
    edit = {
        "documentChanges": [
            {
                "textDocument": {"uri": f"file://{root}/m.py", "version": 1},
                # the emoji is 2 UTF-16 units: "y" sits at character 10
                "edits": [
                    {
                        "range": {
                            "start": {"line": 0, "character": 10},
                            "end": {"line": 0, "character": 11},
                        },
                        "newText": "z",
                    }
                ],
            },  # fmt: skip
            {"kind": "rename", "oldUri": f"file://{root}/m.py", "newUri": f"file://{root}/n.py"},
            {"kind": "create", "uri": f"file://{root}/pkg/new.py"},
        ]
    }
    changes = workspace_edit_changes(edit, lambda u: uri_to_rel(u, [root]), reader({"m.py": text}))
    assert changes == {"m.py": None, "n.py": 'x = "😀"; z = 1\n', "pkg/new.py": ""}


def test_workspace_edit_outside_the_workspace_is_a_path_error() -> None:
    edit = {"changes": {"file:///etc/passwd": []}}
    with pytest.raises(PathError, match="outside the workspace"):
        workspace_edit_changes(edit, lambda u: uri_to_rel(u, ["/mnt/shadow"]), reader({}))


def test_lsprotocol_workspace_edit_is_accepted() -> None:
    from lsprotocol import types as lsp

    edit = lsp.WorkspaceEdit(changes={"file:///r/m.py": [lsp.TextEdit(
        lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), "b")]})  # fmt: skip
    changes = workspace_edit_changes(edit, lambda u: uri_to_rel(u, ["/r"]), reader({"m.py": "a\n"}))
    assert changes == {"m.py": "b\n"}


def test_render_diff_of_binary_content_says_so() -> None:
    assert "Binary files" in render_diff("f.bin", b"\xff", b"\xfe")
