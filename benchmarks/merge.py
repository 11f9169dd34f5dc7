"""Three-way merges of real files: `git merge-file` (what merge_check uses where git is
installed) against the pure merge (`text.merge.merge3`, the fallback), side by side.

    .venv/bin/python benchmarks/merge.py [--cases 300]     # about 10 seconds

Cases: seeded random edit pairs (the generator of tests/test_merge_git.py) over the sources
of more-itertools 11.2.1 (5 to 60 line excerpts), and whole files with edits spread over
them. Per case both merges run once, alternating which goes first; the table gives medians
per file and the share of cases whose output (bytes and conflict count) is identical.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_merge_git import LABELS, case, edited  # noqa: E402  (one generator for both)

from shadowkernel.evals import pypi  # noqa: E402
from shadowkernel.text import merge  # noqa: E402


def whole_file(rng: random.Random, sources: list[bytes]) -> tuple[bytes, bytes, bytes]:
    lines = rng.choice(sources).splitlines(keepends=True)
    sides = []
    for _ in range(2):
        side = lines
        for _ in range(rng.randint(1, 6)):
            side = edited(rng, side, rng.randint(0, len(side)))
        sides.append(b"".join(side))
    return b"".join(lines), sides[0], sides[1]


def one(base: bytes, ours: bytes, theirs: bytes, pure_first: bool) -> tuple[float, float, bool]:
    """(git seconds, pure seconds, whether their outputs are identical) for one case."""
    git = merge.git_executable()
    assert git is not None, "needs git"
    texts = [d.decode("utf-8", "surrogateescape") for d in (base, ours, theirs)]
    times: dict[str, float] = {}
    for which in ("pure", "git") if pure_first else ("git", "pure"):
        start = time.perf_counter()
        if which == "git":
            by_git = merge.git_merge_file(git, base, ours, theirs, LABELS)
        else:
            by_us = merge.merge3(texts[0], texts[1], texts[2], LABELS)
        times[which] = time.perf_counter() - start
    ours_out = (by_us.marked.encode("utf-8", "surrogateescape"), len(by_us.conflicts))
    return times["git"], times["pure"], (by_git.data, by_git.conflicts) == ours_out


def measure(cases: list[tuple[bytes, bytes, bytes]]) -> dict[str, float]:
    rows = [one(*c, pure_first=i % 2 == 1) for i, c in enumerate(cases)]
    git_ms = statistics.median(r[0] for r in rows) * 1e3
    pure_ms = statistics.median(r[1] for r in rows) * 1e3
    identical = sum(r[2] for r in rows) / len(rows)
    return {"cases": len(rows), "git_ms": git_ms, "pure_ms": pure_ms,
            "pure_over_git": pure_ms / git_ms, "identical": identical}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        top = pypi.unpack("more-itertools", "11.2.1", Path(folder))
        files = sorted(top.rglob("*.py")) + sorted(top.rglob("*.rst"))
        sources = [f.read_bytes() for f in files if f.stat().st_size > 200]
    rng = random.Random(11)
    excerpts = [case(rng, sources) for _ in range(args.cases)]
    whole = [whole_file(rng, sources) for _ in range(args.cases // 3)]
    rows = {"excerpts": measure(excerpts), "whole files": measure(whole)}
    print(f"{'cases':<12} {'n':>5} {'git ms':>8} {'pure ms':>8} {'pure/git':>9} {'identical':>10}")
    for name, r in rows.items():
        print(f"{name:<12} {r['cases']:>5.0f} {r['git_ms']:>8.2f} {r['pure_ms']:>8.2f} "
              f"{r['pure_over_git']:>9.2f} {r['identical']:>10.1%}")  # fmt: skip
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
