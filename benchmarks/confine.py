"""What each confinement layer adds to a run's start: bwrap, bwrap with the seccomp filter,
bwrap with the network and Landlock scoping, Landlock alone, and nothing (native).

    .venv/bin/python benchmarks/confine.py [--repeat N]   # N = 30 by default

Each row starts `true` through the command line the runner builds for that layer
(`sandbox.command_line` over `sandbox.confined`; bwrap with the whole machine read-only, its
own user, PID, IPC, UTS and network namespaces, as `run_in_shadow` starts it, less the
overlay views and cgroups, which cost the same for every layer) and waits for it to end,
through the runner's own `run_process`. The layers take turns, so load changes hit them
alike; the median of N starts is reported, and its ratio to native. Prints a table, then one
JSON object as the last line. Needs bwrap and Landlock (ABI >= 6 for the scoping row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shadowkernel.run import capabilities, landlock, seccomp  # noqa: E402
from shadowkernel.run.process import run_process  # noqa: E402
from shadowkernel.run.sandbox import Plan, command_line, confined  # noqa: E402

CAP = 1 << 16


def plans() -> dict[str, Plan]:
    base = Plan(argv=("true",), cwd="/", namespaces=True, network=False,
                privileged=os.geteuid() == 0)  # fmt: skip
    abi, program, python = landlock.abi(), seccomp.program_file(), sys.executable
    bare = Plan(argv=("true",), cwd="/", namespaces=False, network=False, privileged=False)
    return {
        "native": bare,
        "bwrap": base,
        "bwrap+seccomp": confined(base, "bwrap", 0, [], python, program),
        "bwrap+seccomp, network, Landlock scoping": confined(
            replace(base, network=True), "bwrap", abi, [], python, program
        ),
        "landlock": confined(bare, "landlock", abi, ["/tmp"], python, None),
    }


def start(plan: Plan) -> float:
    began = time.perf_counter()
    outcome = run_process(command_line(plan), dict(os.environ), 60, CAP)
    if outcome.exit_code != 0:
        raise SystemExit(f"{command_line(plan)[:6]}... failed: {outcome.stderr.text()[-500:]}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    repeat = parser.parse_args().repeat
    if capabilities.probe().namespaces or landlock.abi() < 6:
        raise SystemExit(f"needs bwrap ({capabilities.probe().namespaces or 'ok'}) and Landlock "
                         f"ABI >= 6 (here {landlock.abi()})")  # fmt: skip
    layers = plans()
    for plan in layers.values():
        start(plan)  # warm: page cache, the interpreter's files
    times: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(repeat):
        for name, plan in layers.items():
            times[name].append(start(plan))
    median = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"run start by confinement layer, median of {repeat} (Landlock ABI {landlock.abi()}, "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f})")  # fmt: skip
    print(f"{'layer':<42} {'ms':>8} {'x native':>9} {'+ms vs bwrap':>13}")
    for name, ms in median.items():
        print(f"{name:<42} {ms:8.2f} {ms / median['native']:9.2f} "
              f"{ms - median['bwrap']:13.2f}")  # fmt: skip
    print(json.dumps({
        "benchmark": "confine", "repeat": repeat, "landlock_abi": landlock.abi(),
        "median_ms": {k: round(v, 3) for k, v in median.items()},
        "ratio_to_native": {k: round(v / median["native"], 2) for k, v in median.items()},
        "seccomp_ms_over_bwrap": round(median["bwrap+seccomp"] - median["bwrap"], 3),
        "landlock_ms_over_native": round(median["landlock"] - median["native"], 3),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
