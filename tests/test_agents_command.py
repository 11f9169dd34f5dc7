"""CommandAgent with a real agent process: a script that is an MCP client (the SDK's) solves a
task through `shadowkernel mcp`'s tools on the cell's branch; the experiment grades it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents.command import mcp_config, pin_arguments, substitute
from shadowkernel.evals import builtin_suite

SUITE = builtin_suite().select(["textkit-slugify-runs"])
TASK = SUITE.tasks[0]
SOLVER = str(Path(__file__).with_name("mcp_solver.py"))

pytestmark = [needs_fuse, pytest.mark.timeout(600)]


def test_an_mcp_client_process_solves_the_task_through_the_tools(tmp_path):
    fix = tmp_path / "fix.json"
    (edit,) = TASK.solution
    fix.write_text(json.dumps({"path": edit.path, "old": edit.old, "new": edit.new}))
    agent = sk.CommandAgent([sys.executable, SOLVER, "{mcp_config}", "{prompt}", str(fix)],
                            time_limit=300)  # fmt: skip
    df = sk.experiment(agent, SUITE, progress=False)
    assert list(df["condition"]) == ["lint-tool"] and df["solved"].all(), df["error"].iloc[0]
    episode = sk.evals.episode(df, TASK.id, "lint-tool")
    (step,) = episode.steps
    assert step.edits == [{"kind": "write", "path": edit.path, "text": step.edits[0]["text"]}]
    assert edit.new in step.edits[0]["text"] and episode.stopped == "finished"
    # What the command asked its server is on the experiment's timeline, under its client's
    # name and the cell's branch, on the experiment's clock: before the cell's grading run.
    events = df.attrs["timeline"].frame
    asked = events[events["client"] == "solver-cli"]
    (grading,) = events[(events["client"] == "") & (events["op"] == "run")].itertuples()
    assert list(asked["op"]) == ["lint"] and list(asked["branch"]) == [grading.branch], events
    assert 0 <= asked["queued"].iloc[0] <= asked["finished"].iloc[0] <= grading.queued
    assert asked["ok"].all() and events["id"].is_unique


def test_a_command_that_does_nothing_is_graded_unsolved():
    agent = sk.CommandAgent([sys.executable, "-c", "import sys; sys.argv", "{prompt}"])
    df = sk.experiment(agent, SUITE, ["lint-tool"], progress=False)
    assert not df["solved"].any() and df["error"].isna().all()


def test_the_configuration_and_the_placeholders():
    config = mcp_config("http://127.0.0.1:5/mcp", "t0k")
    assert config["mcpServers"]["shadowkernel"]["headers"] == {"Authorization": "Bearer t0k"}
    assert substitute(["x={prompt}", "{ {workdir}"], {"prompt": "p", "workdir": "/w"}) == [
        "x=p",
        "{ /w",
    ]
    with pytest.raises(sk.ArgumentError, match="uses none of"):
        sk.CommandAgent("claude -p hello")


def test_the_server_is_pinned_to_the_cells_branch_with_the_start_staged(tmp_path):
    argv = pin_arguments("cell-1", [("a.py", "x = 1\n"), ("gone.py", None)], str(tmp_path))
    assert argv[:2] == ["--branch", "cell-1"] and argv[-2:] == ["--delete", "gone.py"]
    assert argv[2:4] == ["--state", str(tmp_path / "state")]
    flag, staged = argv[4:6]
    path, file = staged.split("=", 1)
    assert flag == "--stage" and path == "a.py" and Path(file).read_text() == "x = 1\n"


def test_a_file_that_is_no_saved_timeline_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("x = 1\n")
    (tmp_path / "other.json").write_text("{}")
    with sk.Workspace(src, servers=[]) as ws:
        with pytest.raises(sk.ArgumentError, match="not a saved timeline"):
            ws.adopt_timeline(tmp_path / "other.json")
        ws.save_timeline(tmp_path / "empty.json")
        assert ws.adopt_timeline(tmp_path / "empty.json") == [] and ws.events() == []
