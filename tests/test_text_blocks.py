"""SEARCH/REPLACE blocks (text.blocks): one grammar for cells and model replies."""

from __future__ import annotations

import pytest

from shadowkernel.errors import StagingError
from shadowkernel.text.blocks import apply_blocks, parse_blocks, replace_once, scan_blocks


def test_replace_once_replaces_the_one_match() -> None:
    assert replace_once("a = 1\nb = 2\n", "b = 2", "b = 3", "m.py") == "a = 1\nb = 3\n"


@pytest.mark.parametrize(
    ("text", "what"), [("x = 1\n", "does not occur"), ("y\ny\n", "occurs 2 times")]
)
def test_replace_once_names_file_and_search_text(text: str, what: str) -> None:
    with pytest.raises(StagingError, match=rf"m\.py: the search text 'y' {what}"):
        replace_once(text, "y", "z", "m.py")


def test_replace_once_refuses_an_empty_search() -> None:
    with pytest.raises(StagingError, match="empty"):
        replace_once("x", "", "y", "m.py")


# -- the grammar ----------------------------------------------------------------------------------

BLOCK = "<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n"


def test_cell_blocks_apply_in_order() -> None:
    cell = (
        BLOCK
        + "prose between blocks is ignored\n"
        + BLOCK.replace("old", "new").replace("new\n>>>", "newer\n>>>")
    )
    blocks = parse_blocks(cell)
    assert [(b.search, b.replace) for b in blocks] == [("old\n", "new\n"), ("new\n", "newer\n")]
    assert apply_blocks("a\nold\n", blocks, "m.py") == "a\nnewer\n"


@pytest.mark.parametrize(
    "cell",
    [
        BLOCK.replace(">>>>>>>", ">>>>"),  # IPython strips a doctest prompt: '>>>' is gone
        BLOCK.replace("<<<<<<<", "<<<<<")
        .replace("=======", "=========")
        .replace(">>>>>>>", ">>>>>"),
        BLOCK.replace("\n", "\r\n"),
        BLOCK.replace("SEARCH\n", "SEARCH  \n").replace("=======\n", "======= \t\n"),
    ],
)
def test_marker_variants_are_one_grammar(cell: str) -> None:
    [block] = parse_blocks(cell)
    assert (block.search.rstrip("\r\n"), block.replace.rstrip("\r\n")) == ("old", "new")


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("<<<<<<< SEARCH\na\n<<<<<<< SEARCH\n", "line 3: '<<<<<<< SEARCH' inside an open block"),
        (">>>>>>> REPLACE\n", "line 1: '>>>>>>> REPLACE' without"),
        ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n", "line 3: '>>>>>>> REPLACE' without"),
        ("<<<<<<< SEARCH\nx\n=======\n", "not closed"),
        ("<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n", "line 4: the SEARCH part is empty"),
        ("just text\n", "no search/replace blocks"),
    ],
)
def test_a_cell_refuses_the_first_problem(cell: str, message: str) -> None:
    with pytest.raises(StagingError, match=message):
        parse_blocks(cell)


def test_scan_keeps_misplaced_markers_as_text_and_reports_them() -> None:
    text = (
        "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nb\n=======\n=======\n>>>>>>> REPLACE\n"
    )
    scan = scan_blocks(text)
    [block] = scan.blocks
    assert block.search == "a\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nb\n"
    assert block.replace == "=======\n"  # a second divider is replacement text
    assert [p.split(":")[0] for p in scan.problems] == ["line 3", "line 4"]
    assert scan.opened


def test_a_form_feed_inside_a_block_is_text() -> None:
    [block] = parse_blocks(BLOCK.replace("old", "o\x0cld"))
    assert block.search == "o\x0cld\n"


@pytest.mark.parametrize(
    ("before", "label"),
    [
        ("", None),  # nothing before the block
        ("pkg/m.py\n", "pkg/m.py"),
        ("intro\n\npkg/m.py  \n \n", "pkg/m.py"),
        ("pkg/m.py\n```python\n", "pkg/m.py"),  # a fence opened right before the block
        ("```python\n", "```python"),
        ("\n\n", ""),
    ],
)
def test_the_label_is_the_line_before_a_block(before: str, label: str | None) -> None:
    [block] = scan_blocks(before + BLOCK).blocks
    assert block.label == label
    text = before + BLOCK
    assert text[block.start :].startswith("<<<<<<< SEARCH" if label is None else label)
    assert block.end == len(text)


def test_a_block_right_after_another_has_no_label() -> None:
    first, second = scan_blocks("a.py\n" + BLOCK + BLOCK).blocks
    assert (first.label, second.label) == ("a.py", None)


def test_labelled_blocks_need_a_line_before_them() -> None:
    text = BLOCK + "b.py\n" + BLOCK
    scan = scan_blocks(text, labelled=True)
    [block] = scan.blocks  # the first SEARCH line has nothing before it: prose
    assert (block.label, block.start) == ("b.py", len(BLOCK))
    assert scan.opened and scan.problems == ("line 5: '>>>>>>> REPLACE' without "
                                             "'<<<<<<< SEARCH' and '=======' before it",)  # fmt: skip


def test_cells_and_replies_read_a_block_alike() -> None:
    from shadowkernel.agents.edits import Replace, parse_reply

    cell = BLOCK.replace("old", "  x = 1\n=====not a divider").replace(">>>>>>>", ">>>>")
    [block] = parse_blocks(cell)
    assert parse_reply("pkg/m.py\n" + cell) == (Replace("pkg/m.py", block.search, block.replace),)
