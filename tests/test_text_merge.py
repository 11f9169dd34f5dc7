"""Pure three-way merge (text.merge)."""

from __future__ import annotations

import random

import pytest

from shadowkernel.text.merge import merge3

BASE = "one\ntwo\nthree\nfour\nfive\nsix\n"


def test_changes_far_apart_merge_cleanly() -> None:
    ours = BASE.replace("one", "ONE")
    theirs = BASE.replace("six", "SIX")
    assert merge3(BASE, ours, theirs).text == "ONE\ntwo\nthree\nfour\nfive\nSIX\n"


def test_identical_changes_merge_once() -> None:
    both = BASE.replace("three", "3")
    assert merge3(BASE, both, both).text == both


def test_overlapping_changes_conflict() -> None:
    result = merge3(BASE, BASE.replace("three", "x"), BASE.replace("three", "y"))
    assert not result.clean
    assert result.text is None
    assert result.conflicts == ((3, 3),)


def test_adjacent_changes_conflict() -> None:
    result = merge3(BASE, BASE.replace("three", "x"), BASE.replace("four", "y"))
    assert not result.clean


def test_insertions_at_the_same_place_conflict_unless_equal() -> None:
    ours = BASE.replace("two\n", "two\nA\n")
    theirs = BASE.replace("two\n", "two\nB\n")
    assert not merge3(BASE, ours, theirs).clean
    assert merge3(BASE, ours, ours).text == ours


@pytest.mark.parametrize("seed", range(100))
def test_one_sided_changes_win(seed: int) -> None:
    rng = random.Random(seed)
    base = "".join(f"{rng.randint(0, 5)}\n" for _ in range(rng.randint(0, 10)))
    other = "".join(f"{rng.randint(0, 5)}\n" for _ in range(rng.randint(0, 10)))
    assert merge3(base, other, base).text == other
    assert merge3(base, base, other).text == other
    assert merge3(base, other, other).text == other
