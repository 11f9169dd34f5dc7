"""Every field of every tool's output schema says what it means, as the input arguments do.

A model (or a host's developer) reading `tools/list` learns what `new: null` means, which
values `severity` takes and what `version` is before it calls. Listed by the real
`shadowkernel mcp` to the `mcp` SDK's client over stdio; the answers of real calls are
validated against the schemas they were listed with.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp_helpers import MOD, make_src, over_stdio, schema_fields
from overlay_helpers import needs_fuse

pytestmark = [needs_fuse, pytest.mark.timeout(240)]


def test_every_output_field_is_described_and_results_match_the_schema(tmp_path: Path) -> None:
    src = make_src(tmp_path)

    async def session() -> None:
        async with over_stdio(src, "--servers", "ruff") as agent:
            listed = {t.name: t for t in (await agent.session.list_tools()).tools}
            said: dict[str, str] = {}
            for tool in listed.values():
                schema = tool.output_schema
                assert schema and schema["type"] == "object", tool.name
                for name, prop in schema_fields(schema, tool.name):
                    assert len(prop.get("description", "")) > 5, name
                    said[name] = prop["description"]
            assert "null" in said["lint.lints[].new"] and "introduced" in said["lint.lints[].new"]
            assert "'warning'" in said["lint.lints[].severity"]
            assert "version" in said["lint.version"] and "staging" in said["read_file.version"]
            assert "exclusive" in said["definition.locations[].end_column"]
            assert "null" in said["run.result.exit_code"]
            assert "null" in said["read_file.next_offset"]

            answers = {"create_branch": await agent.call("create_branch", name="a")}
            answers["write_file"] = await agent.call(
                "write_file", branch="a", path="pkg/mod.py", content=MOD.replace("a + b", "a + c")
            )
            answers["lint"] = await agent.call("lint", branch="a")
            answers["read_file"] = await agent.call("read_file", branch="a", path="pkg/mod.py")
            answers["list_files"] = await agent.call("list_files", branch="a", path="pkg")
            answers["run"] = await agent.call("run", branch="a", command="echo hi")
            answers["diff"] = await agent.call("diff", branch="a")
            answers["list_branches"] = await agent.call("list_branches")
            assert any(row["new"] for row in answers["lint"]["lints"])
            for name, answer in answers.items():
                jsonschema.validate(answer, listed[name].output_schema)

    anyio.run(session)
