"""File URIs (text.uris), parsed in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from shadowkernel.errors import PathError
from shadowkernel.paths import RelPath
from shadowkernel.text.uris import file_uri_path, path_to_uri, uri_to_path, uri_to_rel

ROOTS = ["/mnt/shadow", "/home/u/project/"]


def test_a_uri_below_any_root_is_a_relpath() -> None:
    assert uri_to_rel("file:///mnt/shadow/pkg/m.py", ROOTS) == "pkg/m.py"
    assert uri_to_rel("file:///home/u/project/a%20b/c.py", ROOTS) == "a b/c.py"
    assert uri_to_path(ROOTS, "file:///mnt/shadow/./pkg//m.py") == ("pkg/m.py", True)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("https://example.com/m.py", "not a file URI"),
        ("file:///etc/passwd", "outside the workspace"),
        ("file:///mnt/shadowy/m.py", "outside the workspace"),  # a sibling sharing a prefix
        ("file:///mnt/shadow", "outside the workspace"),  # the root names no file
        ("file:///mnt/shadow/../etc/passwd", "leaves the workspace"),
    ],
)
def test_other_uris_are_path_errors(uri: str, message: str) -> None:
    with pytest.raises(PathError, match=message):
        uri_to_rel(uri, ROOTS)


def test_uri_to_path_keeps_what_lies_outside() -> None:
    assert uri_to_path(ROOTS, "file:///usr/lib/x.pyi") == ("/usr/lib/x.pyi", False)
    assert uri_to_path(ROOTS, "untitled:Untitled-1") == ("untitled:Untitled-1", False)
    assert file_uri_path("file:///a%23b") == "/a#b"


def test_path_to_uri_round_trips(tmp_path: Path) -> None:
    uri = path_to_uri(tmp_path, RelPath("dir with space/é.py"))
    assert uri_to_path([tmp_path], uri) == ("dir with space/é.py", True)
