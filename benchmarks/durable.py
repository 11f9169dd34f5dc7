"""What durable branches cost: staging latency with the durable store against memory only,
and the time to restore 1,000 branches when a folder is opened again.

The input is a real library (more-itertools 11.2.1's sdist, its own files): each staging
writes one of its modules with a small edit. Staging is measured through the public API on
a Workspace in documents mode (no mount, no language servers: the staging path alone), four
ways side by side in one run: memory only (state=None), the durable store's default policy
("behind": the call returns once the record survives a crash of the process; a flusher thread
fsyncs it within milliseconds, group-committing what arrives meanwhile), "full" (the caller
waits for the blob fsyncs and a synchronous=FULL commit: survives a power loss on return) and
"normal" (never fsyncs: survives a crash of the process only). Then what journaling a run's
scratch layer costs (1,000 small files, the store alone, each policy). Restore: 1,000 branches
of 3 versions each are made, then the folder is opened
with restore=True and, as the baseline, restore=False (same store, same run).

Reopen after a long run: 20 branches of 58 versions each (1,160) over the library's four
largest files (46-256 KB), each version editing 2-4 of them, at one place (a delta record) or
at both ends (a blob): about 360 MB of blobs. The folder is opened in a fresh process, each
time with restore=True and then, as the baseline, restore=False (3 rounds, alternating), for
the wall and CPU time of the open and the process's PSS after it; beside them, the floor of
any restore that checks every blob: reading and hashing each once, in one thread.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/durable.py [--stagings 200] [--branches 1000]
        [--long-branches 20] [--long-versions 58]

A table, then one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import shadowkernel as sk
from shadowkernel.evals import pypi
from shadowkernel.overlay.store import BlobStore, File
from shadowkernel.paths import RelPath
from shadowkernel.workspace import durable
from shadowkernel.workspace.durable import DurableStore
from shadowkernel.workspace.state import BranchState

LIBRARY = ("more-itertools", "11.2.1")
DEFAULT = durable.SYNC
POLICIES = ("behind", "full", "normal")


def sources(into: Path) -> dict[str, str]:
    top = pypi.unpack(*LIBRARY, into)
    return {str(p.relative_to(top)): p.read_text() for p in sorted(top.rglob("*.py"))}


def open_ws(root: Path, state: Path | None, **options: object) -> sk.Workspace:
    return sk.Workspace(root, servers=[], mode="documents", state=state, **options)  # type: ignore[arg-type]


def stagings(
    root: Path, state: Path | None, files: dict[str, str], n: int, seed: int
) -> list[float]:
    """Seconds per staging call: n writes of the library's modules, each a little edited."""
    rng, names = random.Random(seed), sorted(files)
    times = []
    with open_ws(root, state) as ws:
        branch = ws.branch("bench")
        for i in range(n):
            path = rng.choice(names)
            text = files[path] + f"\n# edit {i}\n"
            start = time.perf_counter()
            branch.write(path, text)
            times.append(time.perf_counter() - start)
    return times


def make_branches(root: Path, state: Path, files: dict[str, str], count: int) -> None:
    """`count` branches of 3 versions each (made with the fast policy: only restoring counts)."""
    rng, names = random.Random(7), sorted(files)
    durable.SYNC = "normal"  # made fast: only restoring counts
    try:
        with open_ws(root, state) as ws:
            for i in range(count):
                branch = ws.branch(f"agent-{i}")
                for k in range(3):
                    path = rng.choice(names)
                    branch.write(path, files[path] + f"\n# agent {i} edit {k}\n")
    finally:
        durable.SYNC = DEFAULT


def scratch_seconds(base: Path, root: Path, sync: str, n: int = 1000) -> float:
    """Journaling what one run wrote, n small files (the store alone: a run costs more)."""
    blobs = BlobStore()
    store = DurableStore(str(base / f"scratch-{sync}"), str(root), sync=sync)
    try:
        state = BranchState("run")
        store.fork(state)
        written = {RelPath(f"out/f{i}.txt"): File(blobs.make(b"line %d\n" % i * 40))
                   for i in range(n)}  # fmt: skip
        start = time.perf_counter()
        store.scratch(state, written)
        return time.perf_counter() - start
    finally:
        store.close()
        blobs.close()


def timed_open(root: Path, state: Path, restore: bool) -> tuple[float, int]:
    start = time.perf_counter()
    ws = open_ws(root, state, restore=restore)
    took = time.perf_counter() - start
    count = len(ws.branches)
    ws.close()
    return took, count


BIG = ("tests/test_more.py", "more_itertools/more.py", "tests/test_recipes.py",
       "more_itertools/recipes.py")  # fmt: skip


def make_long_run(root: Path, state: Path, branches: int, versions: int) -> None:
    """`branches` agents' long runs of `versions` versions over the library's largest files:
    each version (one LSP workspace edit) inserts a line into 2-4 of them, 80% at both ends
    (recorded as a blob), else at one place (recorded as a delta)."""
    rng = random.Random(5)
    durable.SYNC = "normal"  # made fast: only reopening counts
    try:
        with open_ws(root, state) as ws:
            for b in range(branches):
                branch = ws.branch(f"long-{b}")
                lengths = {p: len((root / p).read_text().splitlines()) for p in BIG}
                for v in range(versions):
                    line = f"# agent {b} version {v}\n"
                    edits = {p: _insertions(lengths, p, rng, line)
                             for p in rng.sample(BIG, rng.choice((2, 3, 3, 4)))}  # fmt: skip
                    branch.apply_edit({"changes": {(root / p).as_uri(): e
                                                   for p, e in edits.items()}})  # fmt: skip
    finally:
        durable.SYNC = DEFAULT


def _insertions(
    lengths: dict[str, int], path: str, rng: random.Random, line: str
) -> list[dict[str, object]]:
    """TextEdits inserting `line` into `path` near both ends (80%), else at one place."""
    count, eighth = lengths[path], lengths[path] // 8
    if rng.random() < 0.8:
        spots = [rng.randrange(eighth), count - 1 - rng.randrange(eighth)]
    else:
        spots = [rng.randrange(count)]
    lengths[path] += len(spots)
    at = [{"line": spot, "character": 0} for spot in spots]
    return [{"range": {"start": a, "end": a}, "newText": line} for a in at]


REOPEN_CHILD = """
import gc, json, sys, time
import shadowkernel as sk
import shadowkernel.workspace  # imported before timing: the open alone counts

gc.collect()  # the imports' first full collection (60-70 ms) falls outside the open, not in it

def pss_mb():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("Pss:")) / 1024

root, state, restore = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
before, wall, cpu = pss_mb(), time.perf_counter(), time.process_time()
ws = sk.Workspace(root, servers=[], mode="documents", state=state, restore=restore)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
versions = sum(len(b.versions) - 1 for b in ws.branches.values())
print(json.dumps({"wall": wall, "cpu": cpu, "pss_mb": pss_mb(), "pss_before_mb": before,
                  "versions": versions}))
ws.close()
"""


def reopen(root: Path, state: Path, restore: bool) -> dict[str, float]:
    """Open the folder in a fresh process: its wall and CPU seconds (every thread's), PSS."""
    command = [sys.executable, "-c", REOPEN_CHILD, str(root), str(state), str(int(restore))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def check_floor(state: Path) -> tuple[float, int, int]:
    """Reading and hashing every blob once, in one thread: seconds, blobs, bytes."""
    names = os.listdir(state / "blobs")
    start, size = time.perf_counter(), 0
    for name in names:
        with open(state / "blobs" / name, "rb") as f:
            hashlib.file_digest(f, "sha256")
            size += f.tell()
    return time.perf_counter() - start, len(names), size


def ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stagings", type=int, default=200)
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--long-branches", type=int, default=20)
    parser.add_argument("--long-versions", type=int, default=58)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shadowkernel-bench-durable-") as scratch:
        base = Path(scratch)
        files = sources(base / "library")
        root = base / "project"
        root.mkdir()
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        lat: dict[str, list[float]] = {}
        for policy in ("memory", *POLICIES, "memory"):  # memory twice: first warms up
            state = None if policy == "memory" else base / f"state-{policy}"
            durable.SYNC = DEFAULT if policy == "memory" else policy
            lat[policy] = stagings(root, state, files, args.stagings, seed=1)
        durable.SYNC = DEFAULT
        scratch = {sync: scratch_seconds(base, root, sync) for sync in POLICIES}
        make_branches(root, base / "state-many", files, args.branches)
        opens = {r: [timed_open(root, base / "state-many", r) for _ in range(3)]
                 for r in (False, True)}  # fmt: skip
        long_state = base / "state-long"
        make_long_run(root, long_state, args.long_branches, args.long_versions)
        reopens: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(3):  # alternating: load from elsewhere hits both alike
            for restore in (True, False):
                reopens[restore].append(reopen(root, long_state, restore))
        floor_s, blob_count, blob_bytes = check_floor(long_state)
    restored = opens[True][0][1]
    restore_s = statistics.median(t for t, _ in opens[True])
    empty_s = statistics.median(t for t, _ in opens[False])
    report = {
        "library": "-".join(LIBRARY), "files": len(files), "stagings": args.stagings,
        **{f"stage_ms_{p}": round(ms(lat[p]), 3) for p in ("memory", *POLICIES)},
        **{f"stage_p95_ms_{p}": round(ms(lat[p], 0.95), 3) for p in ("memory", *POLICIES)},
        **{f"ratio_{p}_vs_memory": round(ms(lat[p]) / ms(lat["memory"]), 1) for p in POLICIES},
        "branches": restored, "versions_per_branch": 3,
        "open_s_restore": round(restore_s, 3), "open_s_no_restore": round(empty_s, 3),
        "restore_s": round(restore_s - empty_s, 3),
        "restore_ms_per_branch": round(1000 * (restore_s - empty_s) / max(restored, 1), 3),
        **{f"scratch_1000_files_s_{p}": round(scratch[p], 3) for p in POLICIES},
        "long_versions": reopens[True][0]["versions"], "long_blobs": blob_count,
        "long_blob_mb": round(blob_bytes / 2**20, 1), "long_check_floor_s": round(floor_s, 3),
        **{f"reopen_{k}_{'restore' if r else 'no_restore'}":
           round(statistics.median(o[k] for o in reopens[r]), 3)
           for r in (True, False) for k in ("wall", "cpu", "pss_mb")},
    }  # fmt: skip
    print(f"staging one file of {report['library']} ({args.stagings} calls; median / p95)")
    print(f"{'policy':<34}{'median':>10}{'p95':>10}{'vs memory':>11}")
    labels = {"memory": "memory only (state=None)", "behind": "durable, behind (default)",
              "full": "durable, full", "normal": "durable, normal"}  # fmt: skip
    for name, label in labels.items():
        ratio = ms(lat[name]) / ms(lat["memory"])
        print(f"{label:<34}{ms(lat[name]):>7.2f} ms{ms(lat[name], 0.95):>7.2f} ms{ratio:>10.1f}x")
    print(
        "\njournaling a run's scratch of 1,000 small files: "
        + ", ".join(f"{scratch[p]:.2f} s {p}" for p in POLICIES)
    )
    print(f"\nopening the folder with {restored} branches of 3 versions (median of 3)")
    print(f"{'restore=False (baseline)':<34}{empty_s:>8.3f} s")
    print(f"{'restore=True':<34}{restore_s:>8.3f} s   (restore itself {restore_s - empty_s:.3f} s, "
          f"{report['restore_ms_per_branch']:.2f} ms per branch)")  # fmt: skip
    print(
        f"\nreopening after a long run: {report['long_versions']} versions, "
        f"{blob_count} blobs ({report['long_blob_mb']:.0f} MB); fresh process, median of 3"
    )
    print(f"{'open':<34}{'wall':>10}{'cpu':>10}{'PSS after':>12}")
    for restore, label in ((True, "restore=True"), (False, "restore=False (baseline)")):
        name = "restore" if restore else "no_restore"
        wall, cpu, pss = (report[f"reopen_{k}_{name}"] for k in ("wall", "cpu", "pss_mb"))
        print(f"{label:<34}{wall:>8.3f} s{cpu:>8.3f} s{pss:>9.0f} MB")
    print(f"{'floor: read and hash every blob':<34}{floor_s:>8.3f} s  (one thread)")
    print(json.dumps(report, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
