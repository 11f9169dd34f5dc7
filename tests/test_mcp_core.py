"""The MCP face's pure parts, directly: listings, JSON shapes, addresses, snippets, the token."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

from shadowkernel.agents import shapes
from shadowkernel.agents.tools import TOOL_NAMES, entries, stable
from shadowkernel.errors import ShadowError
from shadowkernel.lsp import Fix, Lint, LintReport
from shadowkernel.mcp import snippets
from shadowkernel.mcp.transports import BearerAuth, is_loopback, parse_address, write_token
from shadowkernel.paths import RelPath
from shadowkernel.text.ranges import TextEdit


def test_tool_names_are_the_issues() -> None:
    assert TOOL_NAMES == (
        "list_branches", "create_branch", "read_file", "list_files", "write_file",
        "replace_in_file", "apply_patch", "delete_file", "lint", "apply_fix", "definition",
        "references", "hover", "symbols", "run", "diff", "merge_check", "accept", "drop_branch",
        "commit_branch",
    )  # fmt: skip


def test_a_listing_lays_staged_files_over_the_users_folder() -> None:
    user = {"mod.py": "file", "old.py": "file", "sub": "dir", "link": "symlink"}
    files = {
        RelPath("pkg/new.py"): b"x",
        RelPath("pkg/old.py"): None,  # deleted
        RelPath("pkg/fresh/deep.py"): b"y",  # a new folder
        RelPath("pkg/sub/gone.py"): None,  # a deletion below leaves the folder
        RelPath("other/x.py"): b"z",  # not below pkg
    }
    listed = entries(user, files, RelPath("pkg"))
    assert [(e["name"], e["kind"]) for e in listed] == [
        ("fresh", "dir"), ("link", "symlink"), ("mod.py", "file"), ("new.py", "file"),
        ("sub", "dir")]  # fmt: skip
    assert listed[0]["path"] == "pkg/fresh"
    assert [e["path"] for e in entries(None, files, RelPath(""))] == ["other", "pkg"]


def test_lint_rows_are_plain_json_with_fix_ids() -> None:
    fix = Fix("Remove import", (TextEdit(RelPath("m.py"), 1, 1, 2, 1, ""),))
    lints = [Lint(RelPath("m.py"), 3, 1, 3, 2, "error", "F821", "Ruff", "undefined"),
             Lint(RelPath("m.py"), 1, 8, 1, 10, "warning", "F401", "Ruff", "unused", (fix,))]  # fmt: skip
    report = LintReport.of("a", 4, lints, [True, False])  # sorted: the F401 row first
    rows = shapes.lint_rows(report, {0: ["4.1"]})
    assert json.loads(json.dumps(rows)) == rows  # nothing but JSON types
    assert [r["new"] for r in rows] == [False, True]
    assert rows[0]["fixes"] == [{"id": "4.1", "title": "Remove import"}]
    assert rows[1]["fixes"] == [] and rows[1]["version"] == 4 and rows[1]["line"] == 3
    # The rows are the lint table's, column for column.
    table = report.table().drop(columns=["fixes"])
    assert [list(r)[:-1] for r in rows] == [list(table.columns)] * 2
    for row, record in zip(rows, table.to_dict(orient="records"), strict=True):
        assert {k: v for k, v in row.items() if k != "fixes"} == record
    edits = shapes.fix("4.1", fix)["edits"]
    assert edits == [{"path": "m.py", "line": 1, "column": 1, "end_line": 2, "end_column": 1,
                      "new_text": ""}]  # fmt: skip
    assert json.loads(json.dumps(edits)) == edits  # plain JSON, as the output schema says


def test_changed_paths_between_versions() -> None:
    before = {"a": b"1", "b": b"2"}
    assert shapes.changed(before, {"a": b"1", "b": b"3", "c": None}) == ["b", "c"]


def test_addresses() -> None:
    assert parse_address("8765") == ("127.0.0.1", 8765)
    assert parse_address(":0") == ("127.0.0.1", 0)
    assert parse_address("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_address("[::1]:9") == ("::1", 9)
    for bad in ("host:", "host:port", "1:70000", ""):
        with pytest.raises(ShadowError, match="HOST:PORT"):
            parse_address(bad)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_snippets_parse_in_their_own_formats() -> None:
    url, token = "http://127.0.0.1:1/mcp", "tok-en"
    codex = tomllib.loads(snippets.codex(url, token))["mcp_servers"]["shadowkernel"]
    assert codex == {"url": url, "bearer_token_env_var": snippets.TOKEN_VARIABLE}
    assert f"export {snippets.TOKEN_VARIABLE}={token}" in snippets.codex(url, token)
    generic = json.loads(snippets.generic(url, token))["mcpServers"]["shadowkernel"]
    assert generic["url"] == url and generic["headers"]["Authorization"] == f"Bearer {token}"
    assert f'--header "Authorization: Bearer {token}"' in snippets.claude_code(url, token)


def test_the_token_file_is_private(tmp_path: Path) -> None:
    path = write_token(str(tmp_path / "dir" / "t.token"), "secret")
    assert Path(path).read_text() == "secret\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_bearer_auth_refuses_before_the_app() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    async def ask(headers: list[tuple[bytes, bytes]], kind: str = "http") -> list[Any]:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        await BearerAuth(app, "t0k")({"type": kind, "headers": headers}, None, send)
        return sent

    refused = anyio.run(ask, [(b"authorization", b"Bearer wrong")])
    assert refused[0]["status"] == 401 and reached == []
    assert anyio.run(ask, [])[0]["status"] == 401
    assert anyio.run(ask, [(b"authorization", b"Bearer t0k")]) == [] and reached == ["http"]
    anyio.run(ask, [], "lifespan")  # startup/shutdown pass through
    assert reached == ["http", "lifespan"]


def test_the_cli_refuses_a_bad_address_before_opening_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shadowkernel.cli import main

    assert main(["mcp", str(tmp_path), "--http", "localhost:http"]) == 2
    assert "--http 'localhost:http': give HOST:PORT" in capsys.readouterr().err


def test_stable_answers_name_the_version_they_were_given_at() -> None:
    class Moving:  # a branch whose version moves while the first answer is computed
        name, version = "a", 3

    branch = Moving()

    def ask() -> str:
        if branch.version == 3:
            branch.version = 4  # another client staged meanwhile
            return "stale"
        return "fresh"

    assert stable(branch, ask) == (4, "fresh")
    Moving.version = 0
    always = Moving()

    def moving() -> None:
        always.version += 1

    with pytest.raises(ShadowError, match="kept changing"):
        stable(always, moving)


def test_mcp_help_describes_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    from shadowkernel.cli import main

    with pytest.raises(SystemExit) as done:
        main(["mcp", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "Serve SRC to MCP clients" in shown and "SIGTERM" in shown and "8 MiB" in shown
