"""The record/replay seam on its own: what a cell's transcript writes, and a replay that
answers without calling and stops at the first request that differs from the record."""

from __future__ import annotations

import json

import pytest

from shadowkernel.agents.transcript import (
    ReplayError,
    Transcript,
    cell_file,
    current,
    exchange,
    first_difference,
)

RESPONSE = {"choices": [{"message": {"content": "hi"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3}}  # fmt: skip


def test_record_then_replay_without_calling(tmp_path):
    path = cell_file(tmp_path, "task-a|on-edit:codes|s0")
    assert path.endswith("task-a_on-edit_codes_s0.jsonl")
    calls = []
    with current(Transcript(path, "record")):
        assert exchange({"model": "m", "n": 1}, lambda r: calls.append(r) or RESPONSE) == RESPONSE
    (line,) = [json.loads(x) for x in open(path)]
    assert line["usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
    assert line["request"] == {"model": "m", "n": 1} and line["latency"] >= 0
    with current(Transcript(path, "replay")):
        assert exchange({"n": 1, "model": "m"}, pytest.fail) == RESPONSE  # key order is moot
        with pytest.raises(ReplayError, match="holds 1 requests"):
            exchange({"model": "m", "n": 1}, pytest.fail)
    with current(Transcript(path, "replay")), pytest.raises(ReplayError, match=r"request\.n"):
        exchange({"model": "m", "n": 2}, pytest.fail)
    assert exchange({"x": 1}, lambda r: {"echo": r}) == {"echo": {"x": 1}}  # no cell: a call


def test_first_difference_names_the_path():
    a = {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}]}
    b = {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "y"}]}
    assert first_difference(a, b).startswith("request.messages[1].content")
    with pytest.raises(ReplayError, match="no record"):
        Transcript("/nonexistent/x.jsonl", "replay").exchange({}, pytest.fail)
