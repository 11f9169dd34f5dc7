"""Tool-calling agents against scripted model servers on 127.0.0.1 (the one fake: the `openai`
and `anthropic` clients make real HTTP requests), on a real shadow with a real ruff server.

The same script runs under every feedback mode: read the file, write a version with a syntax
error, write the fixed version, finish. The recorded requests show that each condition
changes exactly what the model sees, and nothing else."""

from __future__ import annotations

import json

import pytest
from model_servers import ChatServer, MessagesServer, serving
from overlay_helpers import needs_fuse

import shadowkernel as sk
from shadowkernel.agents import ReplayError
from shadowkernel.agents.observation import condition
from shadowkernel.evals import builtin_suite, reproducible

SUITE = builtin_suite().select(["textkit-slugify-runs"])
TASK = SUITE.tasks[0]
PATH = TASK.files[0]
ORIGINAL = (__import__("pathlib").Path(SUITE.workspace_root) / PATH).read_text()
FIXED = ORIGINAL.replace(TASK.solution[0].old, TASK.solution[0].new)
BROKEN = ORIGINAL + "\ndef broken(:\n    pass\n"
SCRIPT = [
    [("read_file", {"path": PATH})],
    [("write_file", {"path": PATH, "content": BROKEN})],
    [("write_file", {"path": PATH, "content": FIXED})],
    [("finish", {"summary": "split on runs"})],
]

pytestmark = [needs_fuse, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture(scope="module")
def ws():
    with sk.Workspace(SUITE.workspace_root) as workspace:
        yield workspace


def run(ws, conditions, kind=ChatServer, **options):
    """One experiment per condition against a fresh scripted server: (frame, requests)."""
    frames, requests = [], {}
    for name in conditions:
        with serving(kind, SCRIPT) as server:
            agent = (sk.OpenAIToolAgent("tiny", base_url=server.url + "/v1") if kind is ChatServer
                     else sk.AnthropicToolAgent("tiny", base_url=server.url))  # fmt: skip
            frames.append(sk.experiment(agent, SUITE, [name], workspace=ws, progress=False,
                                        **options))  # fmt: skip
            requests[name] = server.requests
    import pandas as pd

    return pd.concat(frames, ignore_index=True), requests


def tool_result(body: dict) -> dict:
    """The last tool result a chat-completions request carries."""
    return json.loads(body["messages"][-1]["content"])


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body["tools"]]


def test_each_feedback_mode_changes_exactly_what_the_model_sees(ws):
    df, requests = run(ws, ["none", "on-edit", "guard", "lint-tool"])
    assert list(df["condition"]) == ["none", "on-edit", "guard", "lint-tool"]
    assert df["solved"].all() and (df["turns"] == 4).all() and df["tokens_reported"].all()
    assert {len(r) for r in requests.values()} == {4}
    # the tools: the table's, plus finish; the lint tool only where lints come from it
    for name, bodies in requests.items():
        names = tool_names(bodies[0])
        assert {"read_file", "write_file", "replace_in_file", "apply_patch", "run",
                "definition", "finish"} <= set(names)  # fmt: skip
        assert ("lint" in names) == (name == "lint-tool")
        assert all("branch" not in t["function"]["parameters"]["properties"]
                   for t in bodies[0]["tools"])  # fmt: skip
    # the broken write's result (seen in request 3) is where the modes differ
    broken = {name: tool_result(bodies[2]) for name, bodies in requests.items()}
    assert "lints" not in broken["none"] and "lints" not in broken["lint-tool"]
    assert broken["none"] == broken["lint-tool"] and broken["none"]["version"] == 1
    assert broken["on-edit"]["lints"] and all(
        x["severity"] == "error" and x["path"] == PATH for x in broken["on-edit"]["lints"]
    )
    assert broken["guard"]["refused"] is True and "error-severity" in broken["guard"]["reason"]
    assert broken["guard"]["lints"] == broken["on-edit"]["lints"]

    # everything else the model saw is the same under every condition
    def without_results(bodies):
        return [[m for m in b["messages"] if m["role"] != "tool"] for b in bodies]

    first = without_results(requests["none"])
    assert all(without_results(b) == first for b in requests.values())
    for bodies in requests.values():
        assert tool_result(bodies[1])["content"] == ORIGINAL  # the read: the same file
    # the guard kept the branch's files: the fixed write then made version 1, not 2
    assert tool_result(requests["guard"][3])["version"] == 3  # 1 broken + 1 restored + fixed
    guard = sk.evals.episode(df, TASK.id, "guard")
    assert guard.steps[1].lints_seen and not guard.steps[1].edits


def test_the_format_axis_shapes_each_lint(ws):
    df, requests = run(ws, ["on-edit:codes", "on-edit:messages", "on-edit:fixes"])
    rows = {name: tool_result(bodies[2])["lints"] for name, bodies in requests.items()}
    assert set(rows["on-edit:codes"][0]) == {"path", "line", "column", "code"}
    assert set(rows["on-edit:messages"][0]) == {"path", "line", "column", "code", "severity",
                                                "message"}  # fmt: skip
    assert set(rows["on-edit:fixes"][0]) == {*rows["on-edit:messages"][0], "fixes"}
    assert condition("guard:codes").feedback == "guard"
    with pytest.raises(sk.ArgumentError, match="feedback mode"):
        condition("on-edit:colours")


def test_the_messages_api_loop(ws):
    df, requests = run(ws, ["on-edit"], kind=MessagesServer)
    assert df["solved"].all() and df["prompt_tokens"].iloc[0] == sum(2000 + n for n in (1, 2, 3, 4))
    bodies = requests["on-edit"]
    assert [t["name"] for t in bodies[0]["tools"]][-1] == "finish"
    assert "input_schema" in bodies[0]["tools"][0] and bodies[0]["system"]
    result = bodies[2]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_2_0"
    assert json.loads(result["content"])["lints"]
    assert bodies[2]["messages"][-2]["content"][0]["type"] == "tool_use"


def test_record_then_replay_without_the_server(ws, tmp_path):
    recorded, _ = run(ws, ["on-edit"], record=tmp_path / "tape")
    (cell,) = list((tmp_path / "tape").iterdir())
    lines = [json.loads(x) for x in cell.read_text().splitlines()]
    assert len(lines) == 4 and all(x["latency"] >= 0 for x in lines)
    assert lines[0]["usage"] == {"prompt_tokens": 1001, "completion_tokens": 21}
    assert lines[0]["request"]["model"] == "tiny"
    # the server is gone: the replay must not call it (a call would fail to connect)
    agent = sk.OpenAIToolAgent("tiny", base_url="http://127.0.0.1:9/v1")
    replayed = sk.experiment(agent, SUITE, ["on-edit"], workspace=ws, progress=False,
                             replay=tmp_path / "tape")  # fmt: skip
    assert reproducible(replayed).equals(reproducible(recorded))
    # a condition whose requests differ from the record stops with the difference named
    other = sk.experiment(agent, SUITE, ["none"], workspace=ws, progress=False,
                          replay=tmp_path / "tape")  # fmt: skip
    assert not other["solved"].any() and "no record" in other["error"].iloc[0]


def test_cost_per_solved_task_from_prices(ws):
    df, _ = run(ws, ["none"])
    s = sk.summary(df, prices={"input": 2.0, "output": 8.0})
    cost = (df["prompt_tokens"].sum() * 2.0 + df["completion_tokens"].sum() * 8.0) / 1e6
    assert s.conditions.loc["none", "cost_per_solved"] == pytest.approx(cost)
    with pytest.raises(sk.ArgumentError, match="prices"):
        sk.summary(df, prices={"input": -1})


def test_a_tool_agent_refuses_prompt_conditions():
    agent = sk.OpenAIToolAgent("tiny", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(sk.ArgumentError, match="feedback modes"):
        sk.experiment(agent, SUITE, ["new-lints"], progress=False)
    assert ReplayError.__mro__[1] is sk.ShadowError


def test_number_arguments_state_the_bounds_the_tools_enforce() -> None:
    """A model or a host's validator reads the bounds in the schema (the tools still check
    them: the MCP SDK validates types, not bounds)."""
    from shadowkernel.agents.tools import OUTPUT_CAP, Tools
    from shadowkernel.agents.toolspec import spec_of

    def bounds(tool: str) -> dict[str, dict[str, float]]:
        properties = spec_of(getattr(Tools, tool)).input_schema()["properties"]
        keys = ("minimum", "maximum", "exclusiveMinimum")
        return {name: {k: v for k, v in p.items() if k in keys} for name, p in properties.items()
                if any(k in p for k in keys)}  # fmt: skip

    assert bounds("read_file") == {"offset": {"minimum": 0}, "limit": {"minimum": 1}}
    assert bounds("run") == {"timeout": {"exclusiveMinimum": 0},
                             "max_output": {"minimum": 1, "maximum": OUTPUT_CAP}}  # fmt: skip
    for tool in ("definition", "references", "hover"):
        assert bounds(tool) == {"line": {"minimum": 1}, "column": {"minimum": 1}}
