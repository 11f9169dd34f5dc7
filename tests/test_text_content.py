"""Content checks for staged text (text.content)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from shadowkernel.errors import StagingError
from shadowkernel.text.content import ENCODE_CHUNK, MAX_TEXT_BYTES, decode, encode, utf8


def test_binary_and_huge_content_are_refused() -> None:
    with pytest.raises(StagingError, match="binary"):
        decode(b"a\0b", "f.bin")
    with pytest.raises(StagingError, match="UTF-8"):
        decode(b"\xff\xfe", "f.txt")
    with pytest.raises(StagingError, match="byte limit"):
        encode("x" * (MAX_TEXT_BYTES + 1), "big.py")
    with pytest.raises(StagingError, match="must be str"):
        encode(b"bytes", "f.py")  # type: ignore[arg-type]


def test_encoding_a_chunk_at_a_time_gives_the_whole_texts_bytes(library: Path) -> None:
    """`encode` goes a chunk at a time (a string with one non-ASCII character is encoded
    character by character, a slice without one is copied): the bytes must be the whole's,
    whatever straddles a chunk's edge. more.py holds two non-ASCII characters."""
    real = (library / "more_itertools/more.py").read_text(encoding="utf-8")
    assert not real.isascii() and len(real) > ENCODE_CHUNK
    rng = random.Random(20)
    wide = ["é", "§", "€", "𝔘", "\u2028", "x", "\n"]
    edge = ENCODE_CHUNK - 1
    texts = [real, "a" * edge + "€" + "b" * ENCODE_CHUNK, "a" * edge + "𝔘" + "b" * 3]
    texts += ["".join(rng.choice(wide) for _ in range(rng.randrange(3 * ENCODE_CHUNK)))
              for _ in range(20)]  # fmt: skip
    for text in texts:
        assert utf8(text) == text.encode("utf-8")
        assert encode(text, "f.py") == text.encode("utf-8")
    lone = "a" * ENCODE_CHUNK + "\ud800" + "é"  # a lone surrogate past the first chunk
    with pytest.raises(StagingError, match="not encodable as UTF-8"):
        encode(lone, "f.py")
