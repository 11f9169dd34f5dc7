"""Runs: per-run setup cost, and real workloads inside a run vs natively, in both views.

    .venv/bin/python benchmarks/runs.py [--repeat N]   # N = 7 by default
    .venv/bin/python benchmarks/runs.py --user skprobe  # the same, as a normal user

The workspace (a git repository of generated packages plus a `.venv` with pandas made by
`uv`) is built once under /tmp/shadowkernel-bench-runs and reused. Workload times are taken
inside the run by bash's `time`, so they compare the workload itself; the setup rows time
`run_in_shadow(["true"])` end to end against spawning `true` natively. Prints a table, then
one JSON object as the last line. Needs root, FUSE and bwrap. Every run is sandboxed as
`run_in_shadow` does it (bubblewrap, read-only machine, copy-on-write $HOME, cgroups; the
setup rows offline, so with a network namespace of their own; the workloads with
`network=True`, which changes nothing they do).

overlayfs runs of one manifest reuse a kept overlay view (warm caches), as a branch's runs do;
"overlayfs-new" runs get a new view each time (a manifest that differs per run, as after a
staged edit or a change in the user's folder), to show what a first run costs.

`--user NAME` measures what a normal user gets (overlayfs in their own user namespace, no
cgroups): root builds a copy of the workspace owned by NAME under
/tmp/shadowkernel-bench-runs-user (its `.venv` on the system's /usr/bin/python3, since the
project's interpreter may sit in /root), then runs this script as NAME (`setpriv`) with that
Python, this tree and the venv's site-packages on its path. The "fuse" column there is what
normal users' runs went through before they had overlayfs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shadowkernel.overlay.shadow import Shadow  # noqa: E402
from shadowkernel.overlay.store import File  # noqa: E402
from shadowkernel.paths import RelPath  # noqa: E402
from shadowkernel.run import run_in_shadow  # noqa: E402
from shadowkernel.run.sandbox import Bind, Plan, command_line  # noqa: E402

ROOT = Path("/tmp/shadowkernel-bench-runs")
WORKSPACE = ROOT / "workspace"
USER_ROOT = Path("/tmp/shadowkernel-bench-runs-user")
SYSTEM_PYTHON = "/usr/bin/python3"
LAYOUT = "1"
MODES = ["overlayfs", "overlayfs-new", "fuse"]
STAMP = RelPath("src/app/api/zz_stamp.py")  # differs per run: forces a new view
TARGETS = {"import pandas": 1.15, "git status": 1.5, "full read": 1.3, "find": 1.5}
SETUP_TARGET_MS = 25  # at zero overrides, sandbox included
WORKLOADS = {
    "import pandas": ".venv/bin/python -c 'import pandas'",
    "git status": "git status --porcelain",
    "full read": "find . -type f -print0 | xargs -0 cat",
    "find": "find .",
}


# -- the workspace --------------------------------------------------------------------------------


def ensure_workspace() -> Path:
    marker = ROOT / "layout"
    if marker.exists() and marker.read_text() == LAYOUT:
        return WORKSPACE
    shutil.rmtree(ROOT, ignore_errors=True)
    WORKSPACE.mkdir(parents=True)
    for package in ("app", "core", "io", "models"):
        for sub in ("api", "cli", "db", "utils"):
            directory = WORKSPACE / "src" / package / sub
            directory.mkdir(parents=True)
            (directory / "__init__.py").write_text("")
            for i in range(15):
                body = "".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(40))
                (directory / f"mod{i}.py").write_text(f'"""{package}.{sub}.mod{i}"""\n\n' + body)
    (WORKSPACE / ".gitignore").write_text(".venv/\n__pycache__/\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=WORKSPACE, check=True)
    subprocess.run([*git, "add", "."], cwd=WORKSPACE, check=True)
    subprocess.run([*git, "commit", "-qm", "initial"], cwd=WORKSPACE, check=True)
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, ".venv"], cwd=WORKSPACE,
                   check=True)  # fmt: skip
    # Copies and bytecode at install time: importing then reads only, as in a used venv.
    subprocess.run(["uv", "pip", "install", "-q", "--python", ".venv/bin/python", "--link-mode",
                    "copy", "--compile-bytecode", "pandas"], cwd=WORKSPACE, check=True)  # fmt: skip
    marker.write_text(LAYOUT)
    return WORKSPACE


def ensure_user_workspace(user: str) -> Path:
    """A copy of the workspace owned by `user`, its venv on the system's Python."""
    workspace, marker = USER_ROOT / "workspace", USER_ROOT / "layout"
    if marker.exists() and marker.read_text() == f"{LAYOUT} {user}":
        return workspace
    source = ensure_workspace()
    shutil.rmtree(USER_ROOT, ignore_errors=True)
    USER_ROOT.mkdir()
    shutil.copytree(source, workspace, symlinks=True, ignore=shutil.ignore_patterns(".venv"))
    subprocess.run(["uv", "venv", "-q", "--python", SYSTEM_PYTHON, ".venv"], cwd=workspace,
                   check=True)  # fmt: skip
    subprocess.run(["uv", "pip", "install", "-q", "--python", ".venv/bin/python", "--link-mode",
                    "copy", "--compile-bytecode", "pandas"], cwd=workspace, check=True)  # fmt: skip
    subprocess.run(["chown", "-R", f"{user}:{user}", str(USER_ROOT)], check=True)
    marker.write_text(f"{LAYOUT} {user}")
    return workspace


def as_user(user: str, repeat: int) -> int:
    """This benchmark, run again as `user` on their own copy of the workspace."""
    import pwd
    import site

    workspace, entry = ensure_user_workspace(user), pwd.getpwnam(user)
    path = os.pathsep.join([str(Path(__file__).resolve().parent.parent), *site.getsitepackages()])
    env = {"PATH": os.environ["PATH"], "HOME": entry.pw_dir, "USER": user, "PYTHONPATH": path}
    line = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
            "--", SYSTEM_PYTHON, __file__, "--workspace", str(workspace),
            "--repeat", str(repeat)]  # fmt: skip
    return subprocess.run(line, env=env, cwd="/").returncode


# -- measuring ------------------------------------------------------------------------------------


def timed(command: str) -> str:
    """A bash command printing the seconds `command` took (its own output discarded)."""
    quoted = command.replace("'", "'\\''")
    return f"TIMEFORMAT=%R; {{ time bash -c '{quoted}' >/dev/null 2>&1; }} 2>&1"


def native_seconds(workspace: Path, command: str) -> float:
    out = subprocess.run(["bash", "-c", timed(command)], cwd=workspace, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return float(out.stdout.split()[-1])


def stamped(shadow: Shadow, manifest: dict, mode: str) -> tuple[dict, str]:
    """(manifest, run_in_shadow mode) for `mode`; overlayfs-new adds a file unique to the run."""
    if mode != "overlayfs-new":
        return manifest, mode
    blob = shadow.store.make(b"STAMP = %d\n" % time.monotonic_ns())
    return {**manifest, STAMP: File(blob=blob, mode=0o644, mtime_ns=10**18)}, "overlayfs"


def run_seconds(shadow: Shadow, command: str, mode: str) -> float:
    manifest, mode = stamped(shadow, {}, mode)
    result = run_in_shadow(shadow, manifest, timed(command), mode=mode, network=True, timeout=600)
    if result.exit_code != 0:
        raise RuntimeError(f"{command!r} failed in {mode}: {result.stderr[-2000:]}")
    return float(result.stdout.split()[-1])


def median_of(repeat: int, measure) -> float:
    measure()  # warm the page cache and the FUSE kernel caches
    return statistics.median(measure() for _ in range(repeat))


def setup_times(shadow: Shadow, mode: str, overrides: int, repeat: int) -> float:
    store = shadow.store
    manifest = {
        RelPath(f"src/app/api/extra{i}.py"): File(
            blob=store.make(b"X = %d\n" % i), mode=0o644, mtime_ns=10**18
        )  # fmt: skip
        for i in range(overrides)
    }

    def once() -> float:
        stamp, how = stamped(shadow, manifest, mode)
        start = time.perf_counter()
        result = run_in_shadow(shadow, stamp, ["true"], mode=how)
        assert result.exit_code == 0, result.stderr
        return time.perf_counter() - start

    return median_of(repeat, once)


def workload_row(shadow: Shadow, workspace: Path, name: str, command: str, repeat: int) -> dict:
    """Medians natively and in each mode, measured round-robin with a rotating start so that
    load from elsewhere hits every column alike."""
    measures = {"native": lambda: native_seconds(workspace, command)}
    measures |= {mode: (lambda m=mode: run_seconds(shadow, command, m)) for mode in MODES}
    for measure in measures.values():
        measure()  # warm the page cache, the FUSE kernel caches and the kept overlay view
    keys, times = list(measures), {key: [] for key in measures}
    for i in range(repeat):
        for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
            times[key].append(measures[key]())
    native = statistics.median(times["native"])
    row = {"native_s": round(native, 4), "target_ratio": TARGETS[name]}
    for mode in MODES:
        inside = statistics.median(times[mode])
        row[f"{mode}_s"] = round(inside, 4)
        row[f"{mode}_ratio"] = round(inside / native, 2) if native else None
    return row


def start_costs(workspace: Path, repeat: int) -> dict[str, float]:
    """Milliseconds to start and end `true` in the bare sandbox (no cgroups, no layers) and,
    as a baseline at the same load, in the namespaces runs used before the sandbox (`unshare`,
    loopback up, one bind mount), minus a native spawn; round-robin."""
    plan = Plan(argv=("true",), cwd=str(workspace), namespaces=True, network=False,
                privileged=True, binds=(Bind(str(workspace), str(workspace)),))  # fmt: skip
    userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    before = ["unshare", *userns, "--mount", "--propagation", "private", "--pid", "--fork",
              "--kill-child", "--mount-proc", "--net", "sh", "-c",
              'ip link set lo up; mount --bind "$1" "$1"; '
              'cd "$1"; setpriv --bounding-set=-sys_admin,-dac_read_search,-sys_module true',
              "sh", str(workspace)]  # fmt: skip
    lines = {"native": ["true"], "bwrap": command_line(plan), "unshare (before)": before}
    times: dict[str, list[float]] = {name: [] for name in lines}
    for _ in range(repeat):
        for name, line in lines.items():
            start = time.perf_counter()
            subprocess.run(line, check=True)
            times[name].append(time.perf_counter() - start)
    native = statistics.median(times.pop("native"))
    return {name: round((statistics.median(t) - native) * 1000, 2) for name, t in times.items()}


def native_spawn(repeat: int) -> float:
    def once() -> float:
        start = time.perf_counter()
        subprocess.run(["true"], check=True)
        return time.perf_counter() - start

    return median_of(repeat, once)


# -- report ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--user", help="run as this normal user (see the module docstring)")
    parser.add_argument("--workspace", type=Path, help="an existing workspace to use")
    args = parser.parse_args()
    if args.user:
        sys.exit(as_user(args.user, args.repeat))
    workspace = args.workspace or ensure_workspace()
    files = sum(len(f) for _, _, f in os.walk(workspace))
    report: dict = {"workspace_files": files, "setup_ms": {}, "workloads": {},
                    "setup_target_ms": SETUP_TARGET_MS, "uid": os.geteuid(),
                    "load_start": os.getloadavg()[0]}  # fmt: skip
    with Shadow(workspace) as shadow:
        spawn = native_spawn(args.repeat * 4)
        report["native_spawn_ms"] = round(spawn * 1000, 2)
        report["start_ms"] = start_costs(workspace, args.repeat * 4)
        for mode in MODES:
            rows = {n: setup_times(shadow, mode, n, args.repeat * 4) for n in (0, 100, 1000)}
            report["setup_ms"][mode] = {
                "0": round((rows[0] - spawn) * 1000, 2),
                "100": round((rows[100] - spawn) * 1000, 2),
                "1000": round((rows[1000] - spawn) * 1000, 2),
                "per_override_us": round((rows[1000] - rows[0]) / 1000 * 1e6, 2),
            }
        for name, command in WORKLOADS.items():
            report["workloads"][name] = workload_row(shadow, workspace, name, command, args.repeat)
    report["load_end"] = os.getloadavg()[0]
    print_table(report)
    print(json.dumps(report, sort_keys=True))


def print_table(report: dict) -> None:
    print(f"uid {report['uid']}; workspace: {report['workspace_files']} files; "
          f"native spawn of `true`: "
          f"{report['native_spawn_ms']} ms; load {report['load_start']:.2f} at start, "
          f"{report['load_end']:.2f} at end")  # fmt: skip
    print(
        "\nstarting `true` in the bare sandbox, and in the namespaces runs used before it "
        "(minus native spawn):"
    )
    for name, ms in report["start_ms"].items():
        print(f"  {name:<18}{ms:>7.1f} ms")
    print(f"\nper-run setup (run_in_shadow(['true']) minus native spawn; target <= "
          f"{report['setup_target_ms']} ms + O(n))")  # fmt: skip
    print(f"{'mode':<15}{'0 overrides':>14}{'100':>10}{'1000':>10}{'per override':>16}")
    for mode, row in report["setup_ms"].items():
        print(f"{mode:<15}{row['0']:>11.1f} ms{row['100']:>7.1f} ms{row['1000']:>7.1f} ms"
              f"{row['per_override_us']:>13.1f} us")  # fmt: skip
    print("\nworkloads inside a run vs native (median seconds; ratio; target)")
    print(f"{'workload':<15}{'native':>9}" + "".join(f"{m:>22}" for m in MODES) + f"{'target':>9}")
    for name, row in report["workloads"].items():
        cells = "".join(f"{row[f'{m}_s']:>13.3f} ({row[f'{m}_ratio']:>4.2f}x)" for m in MODES)
        print(f"{name:<15}{row['native_s']:>9.3f}{cells}{row['target_ratio']:>8.2f}x")
    print()


if __name__ == "__main__":
    main()
