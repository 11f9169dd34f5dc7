"""What does MCP add on top of the Python API, on a real project, through a real client?

- stdio, per server (ruff, pyright, and `defaults`: the server without `--servers`, ruff with
  jedi-language-server to navigate): `shadowkernel mcp SRC --servers S` as a subprocess,
  driven by the SDK's client, beside a `Workspace` on the same project in this process. Each
  round trip stages the project's largest module with a new undefined name at its end
  (`write_file`) and asks for final lints of that file at exactly that version (`lint`);
  the two sides alternate edit by edit, so load hits both alike. The figure is the ratio of
  their medians (target: MCP within 1.2x of the API).
- HTTP: `--http 127.0.0.1:0` with `--clients` clients at once, each on its own branch doing
  `--rounds` write+lint round trips on a smaller module; every answer is compared with a
  fresh workspace's lints of the same text (one fresh branch per answer).

The project is a real library's sdist from PyPI (`--project NAME==VERSION`, default
more-itertools 11.2.1, fetched once and cached by shadowkernel.evals.pypi). Prints a table,
then as its last line one JSON object with every figure and the targets. It reports; it
never asserts. Figures are noisy on a shared machine: the load is printed.

    .venv/bin/python benchmarks/mcp.py [--project more-itertools==11.2.1] [--edits N]
                                       [--servers ruff,pyright,defaults] [--path SERVER=PATH]
                                       [--clients N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# This file is named like the SDK: keep its folder off the path before importing `mcp`.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import anyio  # noqa: E402

REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
from mcp_helpers import Agent, http_server, over_http, over_stdio  # noqa: E402

from shadowkernel import Workspace  # noqa: E402
from shadowkernel.cli import default_mcp_servers  # noqa: E402
from shadowkernel.evals.pypi import unpack  # noqa: E402

sys.path.append(HERE)  # last: the SDK's `mcp` is imported and found before this folder
import _project  # noqa: E402

TARGET_RATIO = 1.2  # MCP's median stage -> final lints over the API's, per server
DEFAULTS = "defaults"  # a row of `shadowkernel mcp` without --servers (and the API likewise)


def project(spec: str, into: Path) -> Path:
    name, _, version = spec.partition("==")
    return unpack(name, version, into)


def edit(text: str, i: int) -> str:
    """An edit whose lints differ from every other edit's (a new undefined name)."""
    return text + f"\nvalue_{i} = undefined_{i}\n"


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rows_of(lints: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["path"], r["line"], r["column"], r["code"], r["message"], bool(r["new"]))
                  for r in lints)  # fmt: skip


async def side_by_side(
    root: Path, server: str, path: str, edits: int, state: Path
) -> dict[str, Any]:
    """Alternating MCP (stdio) and API round trips on one branch each; seconds per side. Both
    keep their branches durably, each in a state directory of its own (`state` for the API):
    one folder's default one is held by one process at a time."""
    base = (root / path).read_text()
    times: dict[str, list[float]] = {"mcp": [], "api": []}
    defaults = server == DEFAULTS  # the server's own choice: ruff, and jedi to navigate
    servers = default_mcp_servers() if defaults else [server]
    options = () if defaults else ("--servers", server)
    with Workspace(root, servers=servers, state=state) as ws:
        direct = ws.branch("a")
        async with over_stdio(root, *options, name="bench", defaults=defaults) as agent:
            await agent.call("create_branch", name="a")
            await round_trip(agent, "a", path, edit(base, 0))  # cold: servers start
            direct.write(path, edit(base, 0))
            direct.lint([path])
            for i in range(1, edits + 1):
                started = time.perf_counter()
                lints = await round_trip(agent, "a", path, edit(base, i))
                times["mcp"].append(time.perf_counter() - started)
                started = time.perf_counter()
                direct.write(path, edit(base, i))
                table = direct.lint([path])
                times["api"].append(time.perf_counter() - started)
                assert any(r["message"].find(f"undefined_{i}") >= 0 for r in lints)
                assert rows_of(lints) == rows_of(table.drop(columns=["fixes"]).to_dict("records"))
    return times


async def round_trip(agent: Agent, branch: str, path: str, text: str) -> list[dict[str, Any]]:
    staged = await agent.call("write_file", branch=branch, path=path, content=text)
    answer = await agent.call("lint", branch=branch, paths=[path])
    assert answer["version"] == staged["version"]
    return answer["lints"]  # type: ignore[no-any-return]


def bench_stdio(spec: str, server: str, edits: int, path: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"sk-mcp-{server}-") as tmp:
        root = project(spec, Path(tmp))
        path = path or _project.modules(root)[0]
        lines = (root / path).read_text().count("\n")
        times = anyio.run(side_by_side, root, server, path, edits, Path(tmp) / "api-state")
    mcp, api = statistics.median(times["mcp"]), statistics.median(times["api"])
    return {
        "row": f"stdio {server}: write_file + lint {path} ({lines} lines)",
        "server": server,
        "p50_ms": ms(mcp),
        "p95_ms": ms(percentile(times["mcp"], 0.95)),
        "api_p50_ms": ms(api),
        "api_p95_ms": ms(percentile(times["api"], 0.95)),
        "ratio": round(mcp / api, 3),
        "exact": f"{edits}/{edits}",  # each answer equal to the API's for the same text
    }


def bench_http(spec: str, clients: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sk-mcp-http-") as tmp:
        root = project(spec, Path(tmp))
        path = _project.modules(root)[1]  # the second largest: many answers, each checked
        base = (root / path).read_text()
        texts = {f"c{c}": [edit(base, c * 100 + r) for r in range(rounds)]
                 for c in range(clients)}  # fmt: skip
        answers: dict[str, list[list[tuple[Any, ...]]]] = {}
        times: list[float] = []

        async def client(url: str, token: str, name: str) -> None:
            async with over_http(url, token, name=name) as agent:
                await agent.call("create_branch", name=name)
                answers[name] = []
                for text in texts[name]:
                    started = time.perf_counter()
                    answers[name].append(rows_of(await round_trip(agent, name, path, text)))
                    times.append(time.perf_counter() - started)

        async def all_clients(url: str, token: str) -> float:
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for name in texts:
                    group.start_soon(client, url, token, name)
            return time.perf_counter() - started

        with http_server(root, Path(tmp) / "token", "--servers", "ruff") as served:
            wall = anyio.run(all_clients, served.url, served.token)
        exact = 0
        with Workspace(root, servers=["ruff"], state=None) as fresh:  # the reference only
            for name, sequence in texts.items():
                for r, text in enumerate(sequence):
                    branch = fresh.branch(f"{name}-{r}")
                    branch.write(path, text)
                    table = branch.lint([path])
                    expected = rows_of(table.drop(columns=["fixes"]).to_dict(orient="records"))
                    exact += answers[name][r] == expected
    total = clients * rounds
    return {
        "row": f"HTTP {clients} clients x {rounds}: write_file + lint {path}",
        "p50_ms": ms(statistics.median(times)),
        "p95_ms": ms(percentile(times, 0.95)),
        "api_p50_ms": None,
        "ratio": None,
        "exact": f"{exact}/{total}",
        "wall_s": round(wall, 2),
        "exact_count": exact,
        "answers": total,
    }


def verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for row in rows:
        if row["row"].startswith("stdio") and "error" not in row:
            found[f"{row['server']}_stdio_over_api"] = {
                "target": TARGET_RATIO, "ratio": row["ratio"],
                "pass": row["ratio"] <= TARGET_RATIO}  # fmt: skip
        if row["row"].startswith("HTTP"):
            found["http_all_exact"] = {"pass": row["exact_count"] == row["answers"]}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default="more-itertools==11.2.1",
                        help="a PyPI sdist, NAME==VERSION")  # fmt: skip
    parser.add_argument("--edits", type=int, default=12)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--servers", default=f"ruff,pyright,{DEFAULTS}")
    parser.add_argument("--path", action="append", metavar="SERVER=PATH", default=[],
                        help="the module a server stages (default: the largest)")  # fmt: skip
    args = parser.parse_args()
    args.path = dict(p.split("=", 1) for p in args.path)
    load = os.getloadavg()
    rows = []
    for server in [s for s in args.servers.split(",") if s]:
        print(f"stdio {server} ...", file=sys.stderr, flush=True)
        try:
            path = args.path.get(server) if args.path else None
            rows.append(bench_stdio(args.project, server, args.edits, path))
        except Exception as error:  # noqa: BLE001 - reported as the row's figure
            while isinstance(error, BaseExceptionGroup):  # anyio's task groups wrap it
                error = error.exceptions[0]
            message = " ".join(str(error).split())[-300:]
            rows.append({"row": f"stdio {server}: failed", "server": server, "error": message})
    if args.clients:
        print(f"HTTP, {args.clients} clients ...", file=sys.stderr, flush=True)
        rows.append(bench_http(args.project, args.clients, args.rounds))
    columns = ["row", "p50_ms", "p95_ms", "api_p50_ms", "ratio", "exact"]
    widths = {c: max(len(c), *(len(str(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c)).ljust(widths[c]) for c in columns))
        if "error" in row:
            print(f"  {row['error']}")
    print(f"(project {args.project}; ratio = MCP p50 / API p50, alternating; load average at "
          f"start {load[0]:.2f}, {os.cpu_count()} cores)")  # fmt: skip
    print(json.dumps({"benchmark": "mcp", "project": args.project, "edits": args.edits,
                      "clients": args.clients, "rounds": args.rounds, "load": load[0],
                      "rows": rows, "targets": verdicts(rows)}))  # fmt: skip


if __name__ == "__main__":
    # Branches are durable by default: keep this run's (and its servers') out of the user's
    # state home, where the temporary copies' folders would be left behind.
    with tempfile.TemporaryDirectory(prefix="sk-bench-state-") as state_home:
        os.environ["XDG_STATE_HOME"] = state_home
        main()
