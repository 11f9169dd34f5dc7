"""An agent host wiring `shadowkernel mcp` in, on a real library (more-itertools' sdist from
PyPI) over streamable HTTP, with the FastMCP client (not ours): it lists the tools, reads
their schemas, and calls every tool with good arguments and bad ones, protected paths and a
symlink into one included. Each answer matches the output schema the tool was listed with
(FastMCP makes a type of it, named after the schema's title), each bad call is a tool error
of one sentence, and the user's folder is unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp_helpers import http_server, schema_fields
from overlay_helpers import needs_fuse, snapshot

pytestmark = [needs_fuse, pytest.mark.timeout(400)]

SECRET = "sk-live-notarealsecret0123456789"
MORE = "more_itertools/more.py"
TAKE_CALL = "    return take(n, q), p\n"  # a call of recipes.take in more.py


class Host:
    """The host's side: the listed tools, and calls checked against their output schemas."""

    def __init__(self, client: Client, schemas: dict[str, dict[str, Any]]) -> None:
        self.client, self.schemas = client, schemas

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments, raise_on_error=False)
        assert not result.is_error, f"{tool}{arguments}: {result.content[0].text}"
        schema = self.schemas[tool]
        jsonschema.validate(result.structured_content, schema)
        assert type(result.data).__name__ == schema["title"], (tool, type(result.data))
        return result.structured_content  # type: ignore[return-value]

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.client.call_tool(tool, arguments, raise_on_error=False)
        assert result.is_error, f"{tool}{arguments} did not fail"
        message = result.content[0].text
        assert "\n" not in message and "Error executing tool" not in message, message
        return message


async def a_host(url: str, token: str) -> None:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    async with Client(transport) as client:
        listed = {t.name: t for t in await client.list_tools()}
        for tool in listed.values():
            assert tool.output_schema and tool.output_schema["title"], tool.name
            for name, prop in schema_fields(tool.output_schema, tool.name):
                assert prop.get("description"), name
        host = Host(client, {name: t.output_schema for name, t in listed.items()})
        await good_calls(host)
        await bad_calls(host)


async def good_calls(host: Host) -> None:
    await host.call("create_branch", name="a")
    root = await host.call("list_files", branch="a")
    names = [e["name"] for e in root["entries"]]
    assert "more_itertools" in names and ".env" not in names and "settings" not in names
    text = (await host.call("read_file", branch="a", path=MORE))["content"]
    line = text[: text.index(TAKE_CALL)].count("\n") + 1
    column = TAKE_CALL.index("take") + 1
    page = await host.call("read_file", branch="a", path=MORE, offset=10, limit=20)
    assert page["content"] == text[10:30] and page["next_offset"] == 30
    await host.call("replace_in_file", branch="a", path=MORE, old=TAKE_CALL,
                    new=TAKE_CALL.replace("p\n", "p  # split\n"))  # fmt: skip
    await host.call("write_file", branch="a", path="more_itertools/extra.py",
                    content="import os\n\n\ndef twice(x):\n    return 2 * x\n")  # fmt: skip
    patch = ("--- a/more_itertools/extra.py\n+++ b/more_itertools/extra.py\n"
             "@@ -4,2 +4,2 @@\n def twice(x):\n-    return 2 * x\n+    return x + x\n")  # fmt: skip
    await host.call("apply_patch", branch="a", patch=patch)
    lints = await host.call("lint", branch="a", new_only=True)
    unused = next(r for r in lints["lints"] if r["code"] == "F401")
    assert unused["new"] is True and unused["severity"] == "warning"
    applied = await host.call("apply_fix", branch="a", fix=unused["fixes"][0]["id"])
    assert applied["fix"]["edits"][0]["path"] == "more_itertools/extra.py"
    found = await host.call("definition", branch="a", path=MORE, line=line, column=column)
    assert [x["path"] for x in found["locations"]] == ["more_itertools/recipes.py"]
    await host.call("references", branch="a", path=MORE, line=line, column=column)
    assert (await host.call("hover", branch="a", path=MORE, line=line, column=column))["hover"]
    assert (await host.call("hover", branch="a", path=MORE, line=2, column=1))["hover"] is None
    symbols = await host.call("symbols", branch="a", path="more_itertools/extra.py")
    assert [s["name"] for s in symbols["symbols"]] == ["twice"]
    await host.call("symbols", branch="a", query="chunked")
    ran = await host.call("run", branch="a", command="python -c 'import more_itertools.extra'")
    assert ran["result"]["ok"], ran["result"]["stderr"]
    cut = await host.call("run", branch="a", command="seq 100000", max_output=100)
    assert cut["result"]["stdout_truncated"] and len(cut["result"]["stdout"]) < 200
    await host.call("delete_file", branch="a", path="more_itertools/extra.py")
    assert (await host.call("diff", branch="a"))["paths"] == [MORE]
    await host.call("create_branch", name="b")
    await host.call("write_file", branch="b", path="NEW.txt", content="b\n")
    merged = await host.call("merge_check", a="a", b="b")
    assert merged["conflicts"] == [] and merged["files"] == ["NEW.txt", MORE]
    assert [b["name"] for b in (await host.call("list_branches"))["branches"]] == [
        "a", "b", "merge-a-b"]  # fmt: skip
    await host.call("drop_branch", branch="merge-a-b")


async def bad_calls(host: Host) -> None:
    for path in (".env", "settings", "more_itertools/.env"):
        said = await host.error("read_file", branch="a", path=path)
        assert "is refused" in said and "'.env'" in said and SECRET not in said, said
    assert "protect" in await host.error("lint", branch="a", paths=["settings"])
    assert "protect" in await host.error("symbols", branch="a", path=".env")
    assert "protected" in await host.error("write_file", branch="a", path=".env", content="x")
    cases = [
        ("read_file", {"branch": "a"}, "argument 'path' is required"),
        ("read_file", {"branch": "zz", "path": MORE}, "branch 'zz' does not exist"),
        ("read_file", {"branch": "a", "path": "../etc/passwd"}, "leaves the workspace"),
        ("read_file", {"branch": "a", "path": MORE, "limit": 0}, "limit"),
        ("read_file", {"branch": "a", "path": MORE, "lmit": 5}, "did you mean 'limit'"),
        ("list_files", {"branch": "a", "path": MORE}, "is a file"),
        ("replace_in_file", {"branch": "a", "path": MORE, "old": "zzz-none", "new": "x"},
         "does not occur"),
        ("apply_patch", {"branch": "a", "patch": "not a diff"}, "unified diff"),
        ("lint", {"branch": "a", "new_only": "yes"}, "true or false"),
        ("lint", {"branch": "a", "servers": ["pyrite"]}, "not among"),
        ("apply_fix", {"branch": "a", "fix": "99.1"}, "not offered"),
        ("hover", {"branch": "a", "path": MORE, "line": 10**6, "column": 1}, "past its end"),
        ("symbols", {"branch": "a"}, "either path"),
        ("run", {"branch": "a", "command": "true", "timeout": -1}, "timeout"),
        ("run", {"branch": "a", "command": "true", "max_output": 10**9}, "max_output"),
        ("merge_check", {"a": "a", "b": "b", "name": "a"}, "exists"),
        ("create_branch", {"name": "../x"}, "git"),
        ("drop_branch", {"branch": "zz"}, "does not exist"),
        ("accept", {"branch": "a"}, "--allow-accept"),
    ]  # fmt: skip
    for tool, arguments, said in cases:
        message = await host.error(tool, **arguments)
        assert said in message and re.match(r"[\w' .:(-]", message), (tool, message)


def test_a_host_calls_every_tool_on_a_real_library(library: Path, tmp_path: Path) -> None:
    (library / ".env").write_text(f"TOKEN={SECRET}\n")
    (library / "more_itertools/.env").write_text(f"TOKEN={SECRET}\n")
    (library / "settings").symlink_to(".env")
    before = snapshot(library)
    with http_server(library, tmp_path / "token", "--protect", ".env", defaults=True) as served:
        anyio.run(a_host, served.url, served.token)
    assert snapshot(library) == before
