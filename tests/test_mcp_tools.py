"""The tool table's specs (agents/tools.py), directly: what a model reads about each tool.

The MCP server and tool-calling agents derive their schemas from these specs, so every tool
and every parameter must be described, and every tool carries MCP's hints.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from typing_extensions import Doc, TypedDict

from shadowkernel.agents.shapes import page
from shadowkernel.agents.tools import TOOL_NAMES, Tools
from shadowkernel.agents.toolspec import READS, Hints, json_schema, spec_of, tool
from shadowkernel.mcp.texts import summary


class NoWorkspace:
    branches: dict[str, Any] = {}


def test_every_tool_and_parameter_is_described_and_hinted() -> None:
    specs = Tools(NoWorkspace(), allow_accept=True).specs()
    assert tuple(s.name for s in specs) == TOOL_NAMES
    for spec in specs:
        assert len(spec.description) > 30, spec.name
        schema = spec.input_schema()
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert len(prop["description"]) > 10, (spec.name, name)
        assert set(spec.hints.as_mcp()) == {"readOnlyHint", "destructiveHint",
                                            "idempotentHint", "openWorldHint"}  # fmt: skip
    by_name = {s.name: s for s in specs}
    assert by_name["read_file"].hints.read_only and by_name["lint"].hints.idempotent
    assert by_name["accept"].hints.destructive and not by_name["accept"].hints.read_only
    assert not by_name["write_file"].hints.read_only
    assert by_name["run"].host == ("cancel", "on_output")  # the host's, never the model's
    assert "cancel" not in by_name["run"].input_schema()["properties"]


def test_accept_is_offered_only_when_allowed() -> None:
    assert "accept" not in Tools(NoWorkspace()).names()
    assert "accept" not in [s.name for s in Tools(NoWorkspace()).specs()]
    assert "--allow-accept" in Tools(NoWorkspace()).withheld("accept")


def test_schemas_say_what_models_need() -> None:
    specs = {s.name: s for s in Tools(NoWorkspace()).specs()}
    lint = specs["lint"].input_schema()
    assert lint["required"] == ["branch"]
    assert lint["properties"]["servers"]["anyOf"][0] == {"type": "array",
                                                         "items": {"type": "string"}}  # fmt: skip
    assert "'ruff'" in lint["properties"]["servers"]["description"]
    assert lint["properties"]["new_only"]["default"] is False
    symbols = specs["symbols"].input_schema()["properties"]
    assert "query" in symbols["path"]["description"] and "path" in symbols["query"]["description"]
    assert "1-based" in specs["definition"].input_schema()["properties"]["line"]["description"]
    assert "seconds" in specs["run"].input_schema()["properties"]["timeout"]["description"]
    said = {
        n: p["description"] for n, p in specs["merge_check"].input_schema()["properties"].items()
    }
    assert "first branch" in said["a"] and "<<<<<<<" in said["a"]
    assert "second branch" in said["b"] and ">>>>>>>" in said["b"]


def test_openai_and_anthropic_forms() -> None:
    spec = {s.name: s for s in Tools(NoWorkspace()).specs()}["read_file"]
    assert spec.openai() == {"type": "function", "function": {
        "name": "read_file", "description": spec.description,
        "parameters": spec.input_schema()}}  # fmt: skip
    assert spec.anthropic() == {"name": "read_file", "description": spec.description,
                                "input_schema": spec.input_schema()}  # fmt: skip


def test_a_tool_without_descriptions_is_refused() -> None:
    @tool(READS)
    def undescribed(self: object, branch: str) -> dict[str, Any]:
        """A tool whose parameter nobody described for a model."""
        return {}

    with pytest.raises(TypeError, match="'branch' has no description"):
        spec_of(undescribed)

    @tool(Hints(read_only=True), brnach="a typo")
    def typo(self: object) -> dict[str, Any]:
        """A tool that describes a parameter it does not have."""
        return {}

    with pytest.raises(TypeError, match="brnach"):
        spec_of(typo)


class Undescribed(TypedDict):
    branch: Annotated[str, Doc("the branch's name")]
    version: int


def test_a_tool_whose_result_has_an_undescribed_field_is_refused() -> None:
    @tool(READS, branch="the branch")
    def vague(self: object, branch: str) -> Undescribed:
        """A tool whose result a model could not read: what is `version`?"""
        return {"branch": branch, "version": 0}

    with pytest.raises(TypeError, match=r"vague: its result: field Undescribed.version has no"):
        spec_of(vague)


def test_parameter_types_as_json_schema() -> None:
    assert json_schema(float) == {"type": "number"}
    assert json_schema(list[str] | None) == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}  # fmt: skip
    with pytest.raises(TypeError):
        json_schema(dict)


def test_a_file_is_read_in_pages_that_say_what_follows() -> None:
    first, last = page("abcdefg", 0, 5), page("abcdefg", 5, 5)
    assert (first["content"], first["more"], first["next_offset"]) == ("abcde", True, 5)
    assert (last["content"], last["more"], last["next_offset"]) == ("fg", False, None)
    assert page("abc", 9, 5) == {"content": "", "offset": 9, "total_chars": 3, "more": False,
                                 "next_offset": None}  # fmt: skip
    text = summary("read_file", {"branch": "a", "version": 0, "path": "m.py", **first})
    assert text.startswith("abcde") and "more from offset=5" in text
    assert summary("read_file", {"branch": "a", "version": 0, "path": "m.py", **last}) == "fg"
