"""What two texts share at their ends (text/ends.py), against a brute-force reference, on str
and bytes, with seeded random edits of a real file; and the durable store's changes built on
it (a version recorded as its change from the previous content) give back every byte."""

from __future__ import annotations

import random

import pytest

from shadowkernel.evals import pypi
from shadowkernel.text.ends import common_prefix, common_suffix, ends
from shadowkernel.workspace.durable import DELTA_MIN, _delta, _undelta


def brute(a: str | bytes, b: str | bytes) -> tuple[int, int]:
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(a), len(b)) - prefix
           and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]):  # fmt: skip
        suffix += 1
    return prefix, suffix


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> str:
    top = pypi.unpack("more-itertools", "11.2.1", tmp_path_factory.mktemp("pypi"))
    return (top / "more_itertools" / "recipes.py").read_text()


def edit(rng: random.Random, text: str, most: int = 3) -> str:
    """One to `most` random replacements, insertions or deletions."""
    for _ in range(rng.randint(1, most)):
        at = rng.randrange(len(text) + 1)
        cut = rng.choice([0, 0, 1, rng.randrange(40)])
        new = rng.choice(["", "x", "é", "\n", "def f():\n    pass\n"])
        text = text[:at] + new + text[at + cut :]
    return text


def test_ends_match_the_brute_force_reference(real: str) -> None:
    rng = random.Random(20)
    for case in range(200):
        a = real[rng.randrange(len(real) // 2) :][: rng.choice([0, 1, 50, 3000])]
        b = edit(rng, a) if case % 5 else a  # every fifth: equal texts
        assert ends(a, b) == brute(a, b), case
        assert ends(a.encode(), b.encode()) == brute(a.encode(), b.encode()), case


def test_a_version_recorded_as_its_change_gives_back_every_byte(real: str) -> None:
    rng = random.Random(8)
    before = real.encode()
    assert len(before) >= DELTA_MIN
    changes = 0
    for _ in range(100):
        after = edit(rng, before.decode(), most=1).encode()
        delta = _delta(before, after)
        if delta is not None:
            changes += 1
            assert _undelta(before, delta) == after
        before = after
    assert changes == 100  # an edit in one place of a large file is recorded as a change
    assert _delta(before, None) is None and _delta(None, before) is None
    assert _delta(before, bytes(reversed(before))) is None  # a rewrite is a blob


def test_the_reference_itself() -> None:
    assert brute("abcXdef", "abcYYdef") == (3, 3)
    assert brute("aaa", "aa") == (2, 0)
    assert brute(b"", b"x") == (0, 0)


def test_prefix_and_suffix_within_ranges_match_the_brute_force_reference(real: str) -> None:
    """The offsets `lsp.documents` splits hunks with: each side's own range, short and long
    (past the first gallop), str and bytes."""
    rng = random.Random(5)
    for case in range(300):
        a = real[: rng.choice([0, 7, 5_000, 20_000])]
        b = edit(rng, a) if case % 4 else a
        for x, y in ((a, b), (a.encode(), b.encode())):
            a0, b0 = rng.randrange(len(x) + 1), rng.randrange(len(y) + 1)
            a1, b1 = rng.randint(a0, len(x)), rng.randint(b0, len(y))
            if case % 3 == 0:  # the same window of both: long shared stretches
                a0 = b0 = min(a0, b0)
                a1 = b1 = max(a0, min(a1, b1))
            want = brute(x[a0:a1], y[b0:b1])
            got = (common_prefix(x, y, a0, a1, b0, b1), common_suffix(x, y, a0, a1, b0, b1))
            assert got[0] == want[0], case
            assert got[1] == brute(x[a0:a1][::-1], y[b0:b1][::-1])[0], case
