"""SEARCH/REPLACE blocks (text.blocks): one grammar for cells and model replies."""

from __future__ import annotations

import pytest

from shadowkernel.errors import StagingError
from shadowkernel.text.blocks import replace_once


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
