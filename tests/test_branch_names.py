"""Branch names follow git's rules: `arguments.branch_name` against `git check-ref-format
--branch` on hand-picked and seeded random names."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from shadowkernel.errors import ArgumentError
from shadowkernel.workspace.arguments import branch_name

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

PICKED = [
    "a", "feature/x", "fix-21", "agent.1", "é", "x/HEAD", "@", "a@b", "@/x",
    "HEAD", "-x", "../evil", "a b/c", "a..b", "a//b", "/a", "a/", ".a", "a/.b", "x.",
    "x.lock", "a.lock/b", "a@{b", "a\\b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\tb",
    "a\x7fb", "a\nb", "lock", "a.lo", ".", "..", "a/./b", "a/../b", "refs/heads/x", "@@",
]  # fmt: skip
ALPHABET = "ab./-@{}~^:?*[\\ \t\x7fHEADlock" + "é"


def git_accepts(name: str) -> bool:
    done = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True,
                          check=False, cwd="/")  # fmt: skip
    return done.returncode == 0


def ours_accepts(name: str) -> bool:
    try:
        branch_name(name)
    except ArgumentError:
        return False
    return True


def random_names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7))) for _ in range(n)]


@pytest.mark.parametrize("names", [PICKED, random_names(600, 21)], ids=["picked", "random"])
def test_names_follow_git_check_ref_format(names: list[str]) -> None:
    differ = [n for n in names if ours_accepts(n) != git_accepts(n)]
    assert differ == []
    assert 0 < sum(map(ours_accepts, names)) < len(names)


def test_a_refused_name_says_which_rule() -> None:
    with pytest.raises(ArgumentError, match=r"'\.\./evil'.*'\.\.'"):
        branch_name("../evil")
    with pytest.raises(ArgumentError, match="space"):
        branch_name("a b/c")
    with pytest.raises(ArgumentError, match="non-empty"):
        branch_name("")


def test_a_name_past_200_bytes_is_refused_before_git_sees_it() -> None:
    assert branch_name("n" * 200) == "n" * 200
    with pytest.raises(ArgumentError, match=r"'nnn.*\.\.\. is 5000 bytes long in UTF-8; give at "
                       r"most 200"):  # fmt: skip
        branch_name("n" * 5000)
    with pytest.raises(ArgumentError, match="is 202 bytes"):
        branch_name("é" * 101)  # 101 characters, two bytes each: git stores bytes
