"""`experiment`: every task x condition x seed, each cell an episode in its own branch.

In process (default) the cells share one Workspace over the suite's projects and run on
`concurrency` threads, so their requests interleave on the shared shadow(s) (`lanes`). With
`workers=` a Ray address (or "local" to start Ray here), each Ray worker opens its own
Workspace and takes cells from a queue.

Finished cells are cached as JSON files in `cache` (a folder), keyed by the agent's
fingerprint, the task's content, the condition, the seed, the budget, the language servers
and the check's timeout, so an interrupted run resumes where it stopped (and a run with
other servers or another timeout does not get the first run's rows back); cells that finish
while an interrupt or a failed cell stops the run are cached too. The result is one row per
cell in task, condition, seed order; columns starting with `seconds_` are wall-clock and
excluded by `reproducible()`. A seeded run with a scripted or simulated agent reproduces
`reproducible(df)` bit for bit.

Accounting per cell, from the shadow's timeline (the cell's branch and its grading
branches): `lint_requests` and `run_requests` (counts, reproducible), `seconds_switch` (time
the shadow spent switching to the cell's versions) and `seconds_wait` (time its requests
queued behind other cells'), beside the tokens and wall time.

Caveats: a cell's agent must be picklable for Ray; the timeline of a Ray run concatenates
the workers' timelines with lanes renumbered, and their clocks start at each worker's own
workspace start.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import pandas as pd

from ..agents.loop import TIMING_FIELDS, Episode, run_episode
from ..agents.observation import CONDITIONS, FEEDBACK, Condition
from ..agents.observation import condition as as_condition
from ..agents.transcript import Transcript, cell_file, current
from ..errors import ArgumentError, NotFound
from .check import make_checker
from .suite import Suite, Task, builtin_suite, load_suite

DEFAULT_CONDITIONS = tuple(CONDITIONS)
COLUMNS = (
    "task", "project", "kind", "condition", "seed", "agent", "simulated", "solved", "turns",
    "stopped", "tokens", "prompt_tokens", "completion_tokens", "tokens_reported",
    "lints_shown", "new_lints_shown", "runs_shown", "failed_steps", "error", "final_exit",
    "lint_requests", "run_requests", "episode", "seconds_total", "seconds_agent",
    "seconds_check", "seconds_lint", "seconds_switch", "seconds_wait",
)  # fmt: skip


Tape = tuple[str, str]  # (folder, "record" | "replay"): where a cell's model exchanges go


@dataclass(frozen=True)
class Cell:
    task: Task
    condition: Condition
    seed: int

    @property
    def branch_name(self) -> str:
        """The cell's branch, named as git allows (condition names such as 'on-edit:codes'
        and task ids hold characters git refuses in a branch name)."""
        return "|".join(_ref_part(p) for p in (self.task.id, self.condition.name, f"s{self.seed}"))


def _ref_part(text: str) -> str:
    """`text` as one part of a git branch name: what git refuses there becomes '-'."""
    part = re.sub(r"[^A-Za-z0-9._+=,@-]|\.\.|@\{", "-", text)
    part = "_" + part[1:] if part.startswith(".") else part
    return part + "_" if part.endswith((".", ".lock")) else part


def reproducible(df: pd.DataFrame) -> pd.DataFrame:
    """The results without wall-clock columns: what a seeded rerun reproduces exactly."""
    return df.drop(columns=[c for c in df.columns if c.startswith("seconds_")])


def steps(df: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded step of every cell (from the `episode` column)."""
    frames = []
    for row in df.itertuples(index=False):
        frame = Episode.from_json(json.loads(row.episode)).frame()
        frame.insert(0, "seed", row.seed)
        frame.insert(0, "condition", row.condition)
        frame.insert(0, "task", row.task)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def episode(df: pd.DataFrame, task: str, condition: str, seed: int = 0) -> Episode:
    """The recorded episode of one cell of `df` (sk.experiment's frame)."""
    rows = df[(df.task == task) & (df.condition == condition) & (df.seed == seed)]
    if rows.empty:
        conditions = ", ".join(map(str, dict.fromkeys(df.condition)))
        raise NotFound(f"no cell task={task!r}, condition={condition!r}, seed={seed!r} in the "
                       f"results; their conditions: {conditions}; seeds: "
                       f"{', '.join(map(str, sorted(set(df.seed))))}")  # fmt: skip
    return Episode.from_json(json.loads(rows.iloc[0].episode))


# -- one cell -----------------------------------------------------------------------------------


def agent_name(agent: Any) -> str:
    return str(getattr(agent, "name", type(agent).__name__))


def fingerprint(agent: Any) -> str:
    return str(getattr(agent, "fingerprint", None) or f"{type(agent).__qualname__}:{agent!r}")


def cell_key(agent: Any, suite: Suite, cell: Cell, budget: int, setting: Any = ()) -> str:
    """The cache key of a cell; `setting`: what else decides its row (the servers whose
    lints it shows, the check's timeout)."""
    data = json.dumps([fingerprint(agent), suite.name, cell.task.id, cell.task.digest,
                       asdict(cell.condition), cell.seed, budget, setting])  # fmt: skip
    return hashlib.blake2b(data.encode(), digest_size=12).hexdigest()


def setting(servers: Sequence[Any], timeout: float) -> list[Any]:
    """What decides a cell's row beside the agent, task, condition, seed and budget."""
    return [[s if isinstance(s, str) else repr(s) for s in servers], timeout]


def row(cell: Cell, ep: Episode, agent: Any, seconds: float) -> dict[str, Any]:
    s = ep.steps
    record = ep.to_json()
    for step in record["steps"]:
        for name in TIMING_FIELDS:
            step.pop(name, None)
    last_exit = next((x.exit_code for x in reversed(s) if x.checked), None)
    return {
        "task": cell.task.id, "project": cell.task.project, "kind": cell.task.kind,
        "condition": cell.condition.name, "seed": cell.seed, "agent": agent_name(agent),
        "simulated": bool(getattr(agent, "simulated", False)), "solved": ep.solved,
        "turns": ep.turns, "stopped": ep.stopped, "tokens": ep.tokens,
        "prompt_tokens": sum(x.prompt_tokens for x in s),
        "completion_tokens": sum(x.completion_tokens or 0 for x in s),
        "tokens_reported": all(x.tokens_reported for x in s) if s else False,
        "lints_shown": sum(len(x.lints_seen) for x in s),
        "new_lints_shown": sum(sum(1 for y in x.lints_seen if y["new"]) for x in s),
        "runs_shown": sum(x.run_seen for x in s), "failed_steps": ep.failed_steps,
        "error": ep.error, "final_exit": last_exit,
        "episode": json.dumps(record, sort_keys=True), "seconds_total": seconds,
        "seconds_agent": sum(x.seconds_agent for x in s),
        "seconds_check": sum(x.seconds_check for x in s),
        "seconds_lint": sum(x.seconds_lint for x in s),
    }  # fmt: skip


def accounting(events: Sequence[Any], branch: str) -> dict[str, Any]:
    """The shadow's work for one cell: its branch's requests and their grading branches'."""
    mine = [e for e in events if e.branch == branch or e.branch.startswith(branch + "|grade-")]
    return {"lint_requests": sum(1 for e in mine if e.kind == "lint"),
            "run_requests": sum(1 for e in mine if e.kind == "run"),
            "seconds_switch": sum(e.switch for e in mine),
            "seconds_wait": sum(e.wait for e in mine)}  # fmt: skip


def run_cell(ws: Any, agent: Any, suite: Suite, cell: Cell, budget: int, timeout: float,
             tape: Tape | None = None) -> dict[str, Any]:  # fmt: skip
    """One episode in a fresh branch of `ws`; the branch is dropped afterwards. With a
    `tape` (folder, "record" or "replay") its model requests are recorded or replayed."""
    start = time.perf_counter()
    before = len(ws.events())  # a name can come back in a later experiment on ws
    check = make_checker(suite, timeout)
    transcript = None if tape is None else Transcript(cell_file(tape[0], cell.branch_name),
                                                      tape[1])  # fmt: skip
    branch = ws.branch(cell.branch_name)
    try:
        with current(transcript):
            if getattr(agent, "tool_calling", False):
                ep = agent.episode(branch, cell.task, check, cell.condition, seed=cell.seed,
                                   budget=budget)  # fmt: skip
            else:
                ep = run_episode(agent, branch, cell.task, check, cell.condition, budget=budget,
                                 seed=cell.seed)  # fmt: skip
    finally:
        branch.drop()
    out = row(cell, ep, agent, time.perf_counter() - start)
    out.update(accounting(ws.events()[before:], cell.branch_name))
    return out


# -- the cache ------------------------------------------------------------------------------------


class Cache:
    """Finished cells as one JSON file each (written atomically)."""

    def __init__(self, folder: str | os.PathLike[str] | None) -> None:
        self.folder = None if folder is None else os.fspath(folder)
        if self.folder:
            _make_folder("cache", self.folder)

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.folder:
            return None
        try:
            with open(os.path.join(self.folder, key + ".json")) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # missing, or cut short by a crash: run the cell again

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not self.folder:
            return
        fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".cell-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f, sort_keys=True)
        os.replace(temp, os.path.join(self.folder, key + ".json"))


# -- the experiment ------------------------------------------------------------------------------


def experiment(
    agent: Any,
    suite: Suite | None = None,
    conditions: Sequence[str | Condition] | None = None,
    seeds: int | Iterable[int] = 1,
    *,
    budget: int = 4,
    workers: str | None = None,
    n_workers: int = 2,
    concurrency: int = 2,
    lanes: int = 1,
    servers: Sequence[Any] = ("ruff",),
    cache: str | os.PathLike[str] | None = None,
    progress: bool = True,
    timeout: float = 60,
    workspace: Any = None,
    record: str | os.PathLike[str] | None = None,
    replay: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Run `agent` on every task x condition x seed of `suite` (default: the built-in suite).

    `agent`: a callable from an Observation to edits, "simulated" (a SimulatedAgent over
    the suite), or a tool-calling agent (`OpenAIToolAgent`, `AnthropicToolAgent`,
    `CommandAgent`: it acts on its branch itself, for up to its own `max_turns` requests
    rather than `budget` turns); `suite`: a Suite, "builtin" or a suite folder;
    `conditions`: names from CONDITIONS or Conditions (default: those of the agent's kind;
    feedback modes such as "on-edit:codes" for tool-calling agents). Bad arguments raise
    ArgumentError naming them. `seeds`: a count
    (0..n-1) or the seeds themselves. `workers`: None runs in this process
    (`concurrency` cells at a time on one Workspace with `lanes` shadows, or on `workspace`);
    "local" or a Ray address fans out to `n_workers` Ray actors, each with its own Workspace.
    `cache`: a folder of finished cells; a rerun skips them. `record`: a folder where every
    model request and response of each cell is written (JSON lines: tokens, latency);
    `replay`: such a folder, answered from instead of the model (nothing is called; a
    request that differs from the record fails the cell). Returns one row per cell;
    `df.attrs` holds the `timeline` and whether the agent is `simulated`.
    """
    suite = as_suite(suite)
    agent = as_agent(agent, suite)
    conds = fitting(agent, as_conditions(default_conditions(agent) if conditions is None
                                         else conditions))  # fmt: skip
    seed_list = as_seeds(seeds)
    _check_counts(budget=budget, n_workers=n_workers, concurrency=concurrency, lanes=lanes)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ArgumentError(f"timeout={timeout!r}: give the seconds a check may take (> 0)")
    if workers is not None and not isinstance(workers, str):
        raise ArgumentError(f"workers={workers!r}: give None (this process), 'local' or a Ray "
                            "address such as 'ray://host:10001'")  # fmt: skip
    store = Cache(cache)
    tape = as_tape(record, replay)
    cells = [Cell(t, c, s) for t in suite for c in conds for s in seed_list]
    shown_by = setting(getattr(workspace, "servers", servers), timeout)
    keys = [cell_key(agent, suite, c, budget, shown_by) for c in cells]
    done = {k: v for k in keys if (v := store.get(k)) is not None}
    todo = [(k, c) for k, c in zip(keys, cells, strict=True) if k not in done]
    bar = _progress(len(cells), len(done), agent, progress)
    simulated = bool(getattr(agent, "simulated", False))
    try:
        if workers is None:
            events = _run_local(agent, suite, todo, budget, timeout, concurrency, lanes, servers,
                                workspace, store, done, bar, tape)  # fmt: skip
        else:
            events = _run_ray(agent, suite, todo, budget, timeout, workers, n_workers, lanes,
                              servers, store, done, bar, tape)  # fmt: skip
    finally:
        bar.close()
    df = pd.DataFrame([done[k] for k in keys], columns=list(COLUMNS))
    from ..sched.timeline import Timeline

    title = f"experiment timeline ({agent_name(agent)}{', SIMULATED' if simulated else ''})"
    df.attrs.update(simulated=simulated, agent=agent_name(agent), budget=budget,
                    timeline=Timeline(events, title=title, simulated=simulated))  # fmt: skip
    return df


def as_suite(suite: Any) -> Suite:
    """A Suite from itself, None or "builtin" (the built-in suite), or a suite folder's path."""
    if isinstance(suite, Suite):
        return suite
    if suite is None or suite == "builtin":
        return builtin_suite()
    if isinstance(suite, str | os.PathLike) and os.path.isdir(suite):
        return load_suite(suite)
    raise ArgumentError(f"suite={suite!r}: give a Suite (sk.builtin_suite(), sk.mutation_suite(), "
                        "sk.swebench_suite(), sk.load_suite(path)), 'builtin' or a suite "
                        "folder")  # fmt: skip


def as_agent(agent: Any, suite: Suite) -> Any:
    """The agent itself (any callable from an Observation to edits), or "simulated"."""
    if agent == "simulated":
        from ..agents.simulated import SimulatedAgent

        return SimulatedAgent(suite)
    if not callable(agent):
        raise ArgumentError(f"agent={agent!r}: give a callable from an Observation to edits "
                            "(sk.SimulatedAgent(suite), sk.OpenAIChatAgent(model, base_url=...), "
                            "sk.ScriptedAgent(...)) or 'simulated'")  # fmt: skip
    return agent


def as_tape(record: Any, replay: Any) -> Tape | None:
    if record is not None and replay is not None:
        raise ArgumentError("record= and replay=: give one of them (replay reads what record "
                            "wrote)")  # fmt: skip
    if replay is not None and not os.path.isdir(replay):
        raise ArgumentError(f"replay={replay!r}: not a folder; give the record= folder of an "
                            "earlier run")  # fmt: skip
    if record is not None:
        _make_folder("record", record)
        return os.path.abspath(record), "record"
    return None if replay is None else (os.path.abspath(replay), "replay")


def _make_folder(name: str, folder: Any) -> None:
    """`folder` made if missing; a path that cannot be a folder is an ArgumentError."""
    try:
        os.makedirs(folder, exist_ok=True)
    except (OSError, TypeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ArgumentError(f"{name}={folder!r}: give a folder ({reason})") from None


def default_conditions(agent: Any) -> tuple[str, ...]:
    """The agent's own (`agent.conditions`), else every feedback mode for a tool-calling
    agent, else the SEARCH/REPLACE conditions."""
    own = getattr(agent, "conditions", None)
    if own:
        return tuple(own)
    return tuple(FEEDBACK) if getattr(agent, "tool_calling", False) else DEFAULT_CONDITIONS


def fitting(agent: Any, conds: list[Condition]) -> list[Condition]:
    """The conditions, when each means something to this kind of agent."""
    tools = bool(getattr(agent, "tool_calling", False))
    own = getattr(agent, "conditions", None)
    for c in conds:
        if own and c.name not in own:
            raise ArgumentError(f"condition {c.name!r}: {agent_name(agent)} takes only "
                                f"{', '.join(own)}")  # fmt: skip
        if tools and (c.lints != "none" or c.run):
            raise ArgumentError(f"condition {c.name!r} shows lints in a prompt; a tool-calling "
                                f"agent takes feedback modes: {', '.join(FEEDBACK)}")  # fmt: skip
        if not tools and c.feedback != "none":
            raise ArgumentError(f"condition {c.name!r} is for tool-calling agents; this agent "
                                f"takes {', '.join(CONDITIONS)}")  # fmt: skip
    return conds


def as_conditions(conditions: Any) -> list[Condition]:
    if isinstance(conditions, str | Condition):
        conditions = [conditions]
    try:
        conds = [as_condition(c) for c in conditions]
    except TypeError:
        raise ArgumentError(f"conditions={conditions!r}: give a list of condition names "
                            f"({', '.join(CONDITIONS)}) or Conditions") from None  # fmt: skip
    if not conds:
        raise ArgumentError(f"conditions=[]: give at least one of {', '.join(CONDITIONS)}")
    names = [c.name for c in conds]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ArgumentError(f"conditions: {', '.join(map(repr, twice))} given twice; each "
                            "condition needs a name of its own (its cells are paired by "
                            "it)")  # fmt: skip
    return conds


def as_seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seed_list = list(range(seeds))
    elif isinstance(seeds, Iterable) and not isinstance(seeds, str):
        seed_list = list(seeds)
    else:
        seed_list = []
    if not seed_list or not all(isinstance(s, int) and not isinstance(s, bool) for s in seed_list):
        raise ArgumentError(f"seeds={seeds!r}: give a count >= 1 (seeds 0..n-1) or a list of "
                            "integer seeds")  # fmt: skip
    if twice := sorted({s for s in seed_list if seed_list.count(s) > 1}):
        raise ArgumentError(f"seeds={seeds!r}: {', '.join(map(str, twice))} given twice; a "
                            "seed's cells would be the same cells")  # fmt: skip
    return seed_list


def _check_counts(**counts: Any) -> None:
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ArgumentError(f"{name}={value!r}: give an integer >= 1")


def _progress(total: int, done: int, agent: Any, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    label = "cells" + (" (simulated agent)" if getattr(agent, "simulated", False) else "")
    return tqdm(total=total, initial=done, desc=label, disable=not enabled, unit="cell")


def _run_local(agent, suite, todo, budget, timeout, concurrency, lanes, servers, workspace,
               store, done, bar, tape) -> list:  # fmt: skip
    if not todo:
        return workspace.events() if workspace is not None else []
    from ..workspace import Workspace
    from ..workspace.bridge import as_completed

    # Cells' branches are throwaway (resume= keeps the rows), and Ray's workers each open the
    # suite's projects: in memory, since one process at a time holds a durable state.
    ws = workspace or Workspace(suite.workspace_root, servers=servers, lanes=lanes, state=None)
    pool = cf.ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="sk-cell")
    futures: dict[cf.Future[dict[str, Any]], str] = {}
    stopping = threading.Event()  # a cell failed or Ctrl-C came: start no other cell

    def cell(c: Cell) -> dict[str, Any]:
        if stopping.is_set():
            raise _NotStarted
        try:
            return run_cell(ws, agent, suite, c, budget, timeout, tape)
        except BaseException:
            stopping.set()
            raise

    try:
        futures.update({pool.submit(cell, c): k for k, c in todo})
        for future in as_completed(futures):  # Ctrl-C ends the wait, whichever thread took it
            if isinstance(future.exception(), _NotStarted):
                continue  # the failed cell that stopped the run comes too
            key = futures[future]
            done[key] = future.result()  # a KeyboardInterrupt in a cell ends the run here
            store.put(key, done[key])
            bar.update(1)
        return ws.events()
    finally:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)  # the cells running go on to their end
        _keep_finished(futures, done, store)
        if workspace is None:
            ws.close()


class _NotStarted(Exception):
    """A cell left out because the run is stopping."""


def _keep_finished(futures: dict[cf.Future[dict[str, Any]], str], done: dict[str, Any],
                   store: Cache) -> None:  # fmt: skip
    """After an interrupt or a failed cell: cache the cells that finished meanwhile (a rerun
    resumes after them rather than paying for them again)."""
    for future, key in futures.items():
        if key not in done and future.done() and not future.cancelled() \
                and future.exception() is None:  # fmt: skip
            store.put(key, future.result())


# -- Ray ------------------------------------------------------------------------------------------


class _Worker:
    """A Ray actor: its own Workspace over the suite's projects."""

    def __init__(self, agent, suite, budget, timeout, lanes, servers, tape) -> None:
        from ..workspace import Workspace

        self.agent, self.suite, self.budget, self.timeout = agent, suite, budget, timeout
        self.tape = tape
        self.ws = Workspace(suite.workspace_root, servers=servers, lanes=lanes, state=None)

    def run(self, cell: Cell) -> dict[str, Any]:
        return run_cell(self.ws, self.agent, self.suite, cell, self.budget, self.timeout,
                        self.tape)  # fmt: skip

    def events(self) -> list:
        return self.ws.events()

    def close(self) -> None:
        self.ws.close()


def _run_ray(agent, suite, todo, budget, timeout, workers, n_workers, lanes, servers, store,
             done, bar, tape) -> list:  # fmt: skip
    import ray
    from ray.util import ActorPool

    started = False
    if not ray.is_initialized():
        address = None if workers == "local" else workers
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    actors: list[Any] = []  # Ray's actor handles: its stubs do not type methods' .remote
    try:
        remote: Any = ray.remote(num_cpus=0)(_Worker)  # the cells wait on subprocesses, not CPUs
        actors = [remote.remote(agent, suite, budget, timeout, lanes, tuple(servers), tape)
                  for _ in range(max(1, min(n_workers, len(todo) or 1)))]  # fmt: skip
        cells = [c for _, c in todo]
        for result in ActorPool(actors).map_unordered(lambda a, c: a.run.remote(c), cells):
            key = _key_of(result, todo)
            done[key] = result
            store.put(key, result)
            bar.update(1)
        events = []
        for i, worker_events in enumerate(ray.get([a.events.remote() for a in actors])):
            events += [replace(e, lane=i * max(lanes, 1) + e.lane, id=i * 1_000_000 + e.id)
                       for e in worker_events]  # fmt: skip
        return events
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.get(actor.close.remote(), timeout=30)
                ray.kill(actor)
        if started:
            ray.shutdown()


def _key_of(result: dict[str, Any], todo: list[tuple[str, Cell]]) -> str:
    for key, cell in todo:
        if (cell.task.id, cell.condition.name, cell.seed) == (
                result["task"], result["condition"], result["seed"]):  # fmt: skip
            return key
    raise KeyError(f"a Ray worker returned an unknown cell {result['task']!r}")
