"""Judging mutants in batches (one pytest process, a forked child per mutant) decides exactly
what a process per mutant decides: on a project whose functions take every shape the swap
must handle (a plain function, a method, an lru_cache'd one, a closure made at import, a
function run at import, a module imported only inside a test), both ways give the same suite
byte for byte. tests/test_suites_repro.py compares them on more-itertools too."""

from __future__ import annotations

import importlib
import json

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.evals.mutation_runs import Baseline
from shadowkernel.evals.mutation_suite import candidates

pytestmark = [needs_fuse, pytest.mark.slow, pytest.mark.timeout(900)]

SHAPES = """\
import functools


def clamp(x, lo, hi):
    if x < lo:
        return lo
    return min(x, hi)


class Box:
    def __init__(self, n):
        self.n = n

    def double(self):
        return self.n * 2


@functools.lru_cache(maxsize=None)
def square(x):
    return x * x


def make_adder(k):
    def add(x):
        return x + k

    return add


add_one = make_adder(1)  # its inner function exists before any test runs


def table(n):
    return [i * i for i in range(n)]


SQUARES = table(4)  # runs at import time
"""
LATER = """\
def halve(x):
    return x // 2
"""
TESTS = """\
from shapes import SQUARES, Box, add_one, clamp, square


def test_clamp():
    assert clamp(5, 0, 3) == 3 and clamp(-1, 0, 3) == 0


def test_box():
    assert Box(3).double() == 6


def test_square():
    assert square(3) == 9


def test_add_one():
    assert add_one(1) == 2


def test_squares():
    assert SQUARES == [0, 1, 4, 9]


def test_later():
    from later import halve  # imported only when the test runs

    assert halve(9) == 4
"""


def test_batches_decide_what_a_process_per_mutant_decides(tmp_path, monkeypatch):
    for name, text in (("shapes.py", SHAPES), ("later.py", LATER), ("test_shapes.py", TESTS)):
        (tmp_path / name).write_text(text)
    generation = importlib.import_module("shadowkernel.evals.mutation_suite")
    alone: list[str] = []  # the candidates a batch could not judge, judged a process each
    judge = generation.judge
    monkeypatch.setattr(generation, "judge", lambda *a: alone.append(a[-1].path) or judge(*a))

    def suite(fork: bool) -> sk.evals.Suite:
        return sk.mutation_suite(tmp_path, "python -m pytest test_shapes.py", n=40, seed=0,
                                 per_function=20, pass_to_pass=2, fork=fork)  # fmt: skip

    batched = suite(fork=True)
    assert set(alone) == {"later.py"}  # its module is not imported before the tests run
    alone.clear()
    single = suite(fork=False)
    assert len(alone) == int(single.extra["tried"])
    assert batched.to_json() == single.to_json()
    functions = {t.origin.split(":")[1].split(" ")[0] for t in batched}
    assert {"clamp", "Box.double", "square", "make_adder.add", "halve"} <= functions
    assert json.loads(batched.extra["rejected"]) == json.loads(single.extra["rejected"])


def test_import_time_false_leaves_out_functions_run_at_import():
    text = "def made():\n    return 1 + 1\n\n\ndef used(x):\n    return x + 1\n\n\nVALUE = made()\n"
    coverage = {"m.py": {"": [1, 2, 5, 9], "t.py::test_used": [6], "t.py::test_value": [2]}}
    base = Baseline(frozenset({"t.py::test_used", "t.py::test_value"}), {}, coverage, 0.0,
                    ("t.py::test_used", "t.py::test_value"))  # fmt: skip
    every = {m.function for m in candidates({"m.py": text}, base, seed=0)}
    assert every == {"made", "used"}
    assert {m.function for m in candidates({"m.py": text}, base, 0, import_time=False)} == {"used"}


MEMO = '''\
import random


class Parser:
    """Parses text, keeping what it parsed in a cache shared by every parser."""

    _CACHE = {}
    _MAX = 4

    def parse(self, text):
        if text not in self._CACHE:
            if len(self._CACHE) >= self._MAX:
                self._evict()
            self._CACHE[text] = text.upper()
        return self._CACHE[text]

    def _evict(self):
        for key in random.sample(sorted(self._CACHE), int(self._MAX / 2)):
            del self._CACHE[key]
'''
MEMO_TESTS = """\
from memo import Parser


def test_fill():  # five words: the fifth evicts two
    parser = Parser()
    assert [parser.parse(w) for w in "abcde"] == list("ABCDE")


def test_bounded():  # reads the cache, calls nothing of memo.py
    assert len(Parser._CACHE) <= Parser._MAX


def test_evicts():
    parser = Parser()
    for word in "vwxyz":
        parser.parse(word)
    assert len(Parser._CACHE) <= Parser._MAX
"""


@pytest.mark.parametrize("fork", [True, False])
def test_a_test_failing_through_what_an_earlier_one_left_makes_no_task(tmp_path, fork):
    """The mutant `>=` -> `>` in `parse` lets the class-level cache hold one entry too many.
    `test_fill` still passes on it but leaves the cache over its bound, so `test_bounded`,
    which runs none of memo.py's code, fails after it; of the tests reaching `parse` only
    `test_evicts` fails. Judged on those alone it became a task that `validate()` rejects
    (jmespath's parser cache, 2026-12-02); the whole set, run on the mutant in the task's
    order, rejects it."""
    (tmp_path / "memo.py").write_text(MEMO)
    (tmp_path / "test_memo.py").write_text(MEMO_TESTS)
    suite = sk.mutation_suite(tmp_path, "python -m pytest test_memo.py", n=10, seed=0,
                              per_function=5, pass_to_pass=5, fork=fork)  # fmt: skip
    kept = {t.origin.split(": ", 1)[1] for t in suite}
    assert "`>=` became `>`" not in kept
    assert json.loads(suite.extra["rejected"])["the whole set fails otherwise on the mutant"] >= 1
    assert kept, "the other mutants of parse() still make tasks"
    loaded = sk.evals.Suite.from_json(suite.to_json(), tmp_path)  # as a user reads a build
    assert loaded.to_json() == suite.to_json()
    table = loaded.validate()
    assert table.fails_on_task.all() and table.passes_on_original.all(), table
    with pytest.raises(sk.ArgumentError, match="not a suite written by Suite.to_json"):
        sk.evals.Suite.from_json('{"tasks": []}', tmp_path)
