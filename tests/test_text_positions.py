"""Lines, offsets and columns (text.positions): one LSP line-break rule for every caller."""

from __future__ import annotations

import random

import pytest

from shadowkernel.errors import StagingError
from shadowkernel.text.merge import merge3
from shadowkernel.text.patches import apply_patch, render_diff
from shadowkernel.text.positions import line_starts, lines, offset, split_lines, terminated
from shadowkernel.text.ranges import apply_workspace_edit

# characters str.splitlines() breaks at but LSP, diffs and editors do not
NOT_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def test_split_lines_breaks_only_at_lsp_line_breaks() -> None:
    text = "a\r\nb\rc\nd\x0ce\u2028f"
    assert split_lines(text, keepends=True) == ["a\r\n", "b\r", "c\n", "d\x0ce\u2028f"]
    assert lines(text) == ["a", "b", "c", "d\x0ce\u2028f"]
    assert line_starts(text) == [0, 3, 5, 7]


@pytest.mark.parametrize("seed", range(50))
def test_split_lines_agrees_with_lines_and_line_starts(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(["a", "é", "\n", "\r", "\r\n", *NOT_BREAKS]) for _ in range(30))
    parts = split_lines(text, keepends=True)
    assert "".join(parts) == text
    assert [len("".join(parts[:k])) for k in range(len(parts))] == line_starts(text)[: len(parts)]
    assert [part.rstrip("\r\n") for part in parts] == lines(text)[: len(parts)]
    assert not any(c in "\r\n" for part in parts for c in part.rstrip("\r\n"))


@pytest.mark.parametrize("seed", range(50))
def test_split_lines_is_splitlines_where_both_rules_agree(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(["a", "é", " ", "\n", "\r", "\r\n"]) for _ in range(30))
    for keepends in (False, True):
        expected = text.splitlines(keepends)
        assert split_lines(text, keepends) == expected
        # a form feed first takes the other path (str.splitlines would break there)
        first = ["\f" + expected[0]] if expected else ["\f"]
        assert split_lines("\f" + text, keepends) == first + expected[1:]


def test_split_lines_of_empty_and_final_break() -> None:
    assert split_lines("", keepends=True) == []
    assert split_lines("a\n", keepends=True) == ["a\n"]
    assert split_lines("a\n\n", keepends=True) == ["a\n", "\n"]


def test_terminated_adds_a_line_break_only_where_one_is_missing() -> None:
    assert terminated("") == "" and terminated("a") == "a\n"
    assert [terminated(t) for t in ("a\n", "a\r\n", "a\r")] == ["a\n", "a\r\n", "a\r"]
    assert terminated("a\x0c") == "a\x0c\n" and terminated("a\u2028") == "a\u2028\n"


def test_offset_is_one_based_clamps_to_the_line_and_past_the_end() -> None:
    text = "ab\r\ncd"
    starts = line_starts(text)
    assert offset(text, starts, 1, 1) == 0
    assert offset(text, starts, 1, 99) == 2  # clamped before the \r\n
    assert offset(text, starts, 2, 2) == 5
    assert offset(text, starts, 7, 1) == len(text)
    with pytest.raises(StagingError, match="1-based"):
        offset(text, starts, 0, 1)


def test_a_form_feed_is_text_in_diffs() -> None:
    old, new = "a\x0cb\nz\n", "a\x0cc\nz\n"
    patch = render_diff("m.py", old.encode(), new.encode())
    assert "No newline" not in patch
    changed = [line for line in lines(patch) if line.startswith(("-", "+"))][2:]  # past ---/+++
    assert changed == ["-a\x0cb", "+a\x0cc"]
    assert apply_patch(patch, {"m.py": old}.get) == {"m.py": new}  # type: ignore[arg-type]


def test_a_form_feed_is_text_in_merges() -> None:
    base = "x\x0cy\nkeep\nz\n"
    ours, theirs = base.replace("x", "X"), base.replace("z", "Z")
    assert merge3(base, ours, theirs).text == "X\x0cy\nkeep\nZ\n"
    conflict = merge3(base, base.replace("keep", "A"), base.replace("keep", "B"))
    assert conflict.conflicts == ((2, 2),)  # the line an editor shows, not one past it


def test_workspace_edit_lines_end_at_a_lone_carriage_return() -> None:
    text = "a\rb😀c\n"  # LSP line 1 is "b😀c"; the emoji is 2 UTF-16 units
    edit = {"changes": {"file:///r/m.py": [
        {"range": {"start": {"line": 1, "character": 3}, "end": {"line": 1, "character": 4}},
         "newText": "X"}]}}  # fmt: skip
    changes = apply_workspace_edit(edit, lambda uri: "m.py", {"m.py": text}.get)  # type: ignore[arg-type,return-value]
    assert changes == {"m.py": "a\rb😀X\n"}
