"""Workspace paths (paths.py): the one 'is this path inside that folder'."""

from __future__ import annotations

import os

import pytest

from shadowkernel.errors import PathError
from shadowkernel.paths import RelPath, is_within, rel, relative_to


@pytest.mark.parametrize(
    ("path", "folder", "inside"),
    [
        ("pkg/m.py", "pkg", True),
        ("pkg", "pkg", True),
        ("pkg2/m.py", "pkg", False),  # a shared prefix is not a parent
        ("pkg", "pkg/m.py", False),
        ("anything", "", True),  # the workspace root holds every relative path
        ("/a/b", "/a", True),
        ("/a/", "/a", True),
        ("/a", "/a/", True),
        ("/ab", "/a", False),
        ("/x", "/", True),
        ("/", "/a", False),
    ],
)
def test_is_within_str_and_bytes(path: str, folder: str, inside: bool) -> None:
    assert is_within(path, folder) is inside
    assert is_within(os.fsencode(path), os.fsencode(folder)) is inside


def test_is_within_bytes_that_are_not_utf8() -> None:
    assert is_within(b"/r/\xff/x", b"/r/\xff")
    assert not is_within(b"/r/\xfe/x", b"/r/\xff")


def test_relative_to() -> None:
    assert relative_to("/r/a//b/", "/r") == "a/b"
    assert relative_to("/r", "/r/") == RelPath("")
    assert relative_to("/rx/a", "/r") is None
    with pytest.raises(PathError, match="leaves the workspace"):
        relative_to("/r/../etc", "/r")


def test_rel_refuses_absolute_and_escaping_paths() -> None:
    assert rel("./a//b/") == "a/b"
    for bad in ("/etc", "a/../../b", "a\0b"):
        with pytest.raises(PathError):
            rel(bad)
