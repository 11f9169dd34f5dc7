"""Incremental didChange: the ranged changes `text_change` and `text_changes` compute, applied
as a server applies them (in turn, positions in the negotiated encoding), give exactly the new
text."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types as lsp

from shadowkernel.lsp.documents import TextIndex, changes_after, text_change, text_changes
from shadowkernel.text.positions import line_starts


def apply(old: str, change: dict, encoding: str) -> str:
    """A server's view: the range's positions resolved in `old`, the span replaced."""
    index, starts = TextIndex(old, encoding), line_starts(old)  # type: ignore[arg-type]

    def offset(position: dict) -> int:
        line, column = index.from_lsp(lsp.Position(position["line"], position["character"]))
        return starts[line - 1] + column - 1

    span = change["range"]
    return old[: offset(span["start"])] + change["text"] + old[offset(span["end"]) :]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_seeded_random_edits_round_trip(encoding: str) -> None:
    rng = random.Random(20)
    pieces = ["", "x", "\n", "😀", "é\n", "ab"]
    for _ in range(2000):
        old = "".join(rng.choice("ab\n😀é x") for _ in range(rng.randint(0, 30)))
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(new))
            new[at : rng.randint(at, min(len(new), at + 5))] = rng.choice(pieces)
        change = text_change(old, "".join(new), encoding)  # type: ignore[arg-type]
        if change is None:
            assert old == "".join(new)
        else:
            assert apply(old, change, encoding) == "".join(new)


def test_an_inserted_line_sends_only_that_line() -> None:
    old = "".join(f"line {i}\n" for i in range(1000))
    new = old.replace("line 500\n", "line 500\nadded = 1\n")
    change = text_change(old, new)
    assert change == {"range": {"start": {"line": 501, "character": 0},
                                "end": {"line": 501, "character": 0}},
                      "text": "added = 1\n"}  # fmt: skip


def test_full_text_for_a_resend_and_for_carriage_returns() -> None:
    assert text_change("same", "same") is None  # a resend: a new version of the same text
    assert text_change("a\r\nb", "a\r\nc") is None  # a span could split a \r\n


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
def test_seeded_random_edits_in_many_places_round_trip(encoding: str) -> None:
    """Edits far apart in a large text (as two branches' versions of one file differ): each
    place becomes a change of its own, applied in turn."""
    rng = random.Random(21)
    words = ["alpha", "beta\n", "😀", "é\n", "gamma = 1\n", "\n"]
    for _ in range(60):
        old = "".join(f"line {i} {rng.choice(words)}\n" for i in range(rng.randint(0, 3000)))
        new = old
        for _ in range(rng.randint(1, 6)):
            at = rng.randint(0, len(new))
            end = rng.randint(at, min(len(new), at + rng.choice([0, 5, 50])))
            new = new[:at] + rng.choice(["", "x", "😀\n", "added = 2\n"]) + new[end:]
        changes = text_changes(old, new, encoding)  # type: ignore[arg-type]
        carried = changes_after(TextIndex(old, encoding), new)[1]  # type: ignore[arg-type]
        assert carried.starts.tolist() == line_starts(new)  # the index a client keeps
        if changes is None:
            assert old == new
            continue
        text = old
        for change in changes:
            text = apply(text, change, encoding)
        assert text == new


def test_two_edits_far_apart_send_two_short_changes() -> None:
    old = "".join(f"line {i}\n" for i in range(5000))
    new = old.replace("line 10\n", "line 10\nfirst = 1\n").replace("line 4990\n", "")
    changes = text_changes(old, new)
    assert changes is not None and len(changes) == 2
    assert changes[1] == {"range": {"start": {"line": 11, "character": 0},
                                    "end": {"line": 11, "character": 0}},
                          "text": "first = 1\n"}  # fmt: skip
    assert changes[0]["text"] == "" and changes[0]["range"]["start"]["line"] == 4989
    text = old
    for change in changes:  # the later place first: the earlier one's positions still hold
        text = apply(text, change, "utf-16")
    assert text == new
    assert text_changes("same", "same") is None
