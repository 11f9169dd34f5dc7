"""Content checks for staged text (text.content)."""

from __future__ import annotations

import pytest

from shadowkernel.errors import StagingError
from shadowkernel.text.content import MAX_TEXT_BYTES, decode, encode


def test_binary_and_huge_content_are_refused() -> None:
    with pytest.raises(StagingError, match="binary"):
        decode(b"a\0b", "f.bin")
    with pytest.raises(StagingError, match="UTF-8"):
        decode(b"\xff\xfe", "f.txt")
    with pytest.raises(StagingError, match="byte limit"):
        encode("x" * (MAX_TEXT_BYTES + 1), "big.py")
    with pytest.raises(StagingError, match="must be str"):
        encode(b"bytes", "f.py")  # type: ignore[arg-type]
