"""Range edits and WorkspaceEdit JSON (text.ranges), and lsp/'s lsprotocol adapter."""

from __future__ import annotations

import pytest

from shadowkernel.errors import PathError, StagingError
from shadowkernel.lsp.documents import workspace_edit_changes
from shadowkernel.text.ranges import TextEdit, apply_text_edits, apply_workspace_edit
from shadowkernel.text.uris import uri_to_rel


def reader(files: dict[str, str]):
    return lambda path: files.get(path)


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
    changes = apply_workspace_edit(edit, lambda u: uri_to_rel(u, [root]), reader({"m.py": text}))
    assert changes == {"m.py": None, "n.py": 'x = "😀"; z = 1\n', "pkg/new.py": ""}


def test_workspace_edit_outside_the_workspace_is_a_path_error() -> None:
    edit = {"changes": {"file:///etc/passwd": []}}
    with pytest.raises(PathError, match="outside the workspace"):
        apply_workspace_edit(edit, lambda u: uri_to_rel(u, ["/mnt/shadow"]), reader({}))


def test_lsprotocol_workspace_edit_is_accepted() -> None:
    from lsprotocol import types as lsp

    edit = lsp.WorkspaceEdit(changes={"file:///r/m.py": [lsp.TextEdit(
        lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)), "b")]})  # fmt: skip
    changes = workspace_edit_changes(edit, lambda u: uri_to_rel(u, ["/r"]), reader({"m.py": "a\n"}))
    assert changes == {"m.py": "b\n"}
