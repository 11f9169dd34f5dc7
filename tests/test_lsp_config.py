"""Servers by configuration: the project's and the user's files, Claude Code's .lsp.json,
one registry for them and the built-in specs, and clear errors for bad configuration."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from shadowkernel.errors import ArgumentError, NotFound
from shadowkernel.lsp import LspPool, PullDiagnostics, PushDiagnostics
from shadowkernel.lsp.languages import language_id
from shadowkernel.lsp.registry import available_servers, known_specs, resolve_specs, split


@pytest.fixture(autouse=True)
def no_user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test has its own (empty) user configuration folder."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "shadowkernel" / "servers.toml"


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    root.mkdir(exist_ok=True)
    return root


def test_pyproject_table_adds_a_server(tmp_path: Path) -> None:
    root = project(tmp_path, {"pyproject.toml": """
[project]
name = "x"

[tool.shadowkernel.servers.my-go]
command = ["gopls", "-remote=auto"]
extensions = [".go"]
diagnostics = "pull"
initialization_options = {pullDiagnostics = true}
settings = {gopls = {staticcheck = true}}
pulls_settings = true
recheck_open = "resend"
"""})  # fmt: skip
    [spec] = resolve_specs(["my-go"], root)
    assert spec.argv == ("gopls", "-remote=auto")
    assert spec.patterns == ("*.go",) and spec.language_ids == {".go": "go"}
    assert isinstance(spec.diagnostics, PullDiagnostics) and spec.recheck_open == "resend"
    assert spec.initialization_options == {"pullDiagnostics": True}
    assert spec.settings == {"gopls": {"staticcheck": True}} and spec.pulls_settings


def test_a_table_named_like_a_builtin_changes_only_its_keys(tmp_path: Path) -> None:
    root = project(tmp_path, {"shadowkernel.toml": '[servers.clangd]\ncommand = "clangd -j=1"\n'})
    spec = known_specs(root)["clangd"]
    assert spec.argv == ("clangd", "-j=1")
    assert spec.recheck_open == "reopen" and spec.prepare is not None  # the rest is built-in
    assert isinstance(spec.diagnostics, PushDiagnostics) and "*.c" in spec.patterns


def test_jedi_language_server_lints_again_where_a_project_says_so(tmp_path: Path) -> None:
    """Built in, jedi navigates only; the two keys config.py names give its lints back."""
    assert not known_specs(tmp_path)["jedi-language-server"].diagnostics.lints
    table = '[servers.jedi-language-server]\ndiagnostics = "push"\ninitialization_options = {}\n'
    spec = known_specs(project(tmp_path, {"shadowkernel.toml": table}))["jedi-language-server"]
    assert spec.diagnostics == PushDiagnostics() and spec.initialization_options == {}


def test_claude_code_lsp_json_is_read_as_it_is(tmp_path: Path) -> None:
    servers = {"go": {"command": "gopls", "args": ["serve"], "extensionToLanguage": {".go": "go"},
                      "env": {"GOFLAGS": "-mod=mod"}, "initializationOptions": {"a": 1},
                      "startupTimeout": 5000, "transport": "stdio"},
               "c": {"command": "clangd", "extensionToLanguage": {".c": "c", ".h": "c"}}}  # fmt: skip
    for layout in (servers, {"lspServers": servers}):  # .lsp.json, or as a plugin.json has it
        root = project(tmp_path, {".lsp.json": json.dumps(layout)})
        go, c = resolve_specs(["go", "c"], root)
        assert go.argv == ("gopls", "serve") and go.patterns == ("*.go",)
        assert go.env == {"GOFLAGS": "-mod=mod"} and go.initialization_options == {"a": 1}
        assert c.patterns == ("*.c", "*.h") and language_id("x.h", c.language_ids) == "c"


def test_user_file_then_project_files_later_wins(tmp_path: Path, no_user_file: Path) -> None:
    no_user_file.parent.mkdir(parents=True)
    no_user_file.write_text('[servers.sh]\ncommand = ["bash-language-server", "start"]\n'
                            'languages = ["shell"]\nrequest_timeout = 5\n')  # fmt: skip
    root = project(tmp_path, {"shadowkernel.toml": "[servers.sh]\nrequest_timeout = 9\n"})
    assert known_specs(tmp_path / "elsewhere")["sh"].request_timeout == 5
    spec = known_specs(root)["sh"]
    assert spec.request_timeout == 9 and spec.argv == ("bash-language-server", "start")
    assert spec.patterns == ("*.sh", "*.bash")
    assert "sh" in available_servers(root)


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("shadowkernel.toml", "[servers.x]\ncomand = ['x']\n", "unknown key 'comand'"),
        ("shadowkernel.toml", "[servers.x]\ncommand = 3\nlanguages = ['c']\n", "'command' must be a list"),
        ("shadowkernel.toml", "[servers.x]\nlanguages = ['c']\n", "no command"),
        ("shadowkernel.toml", "[servers.x]\ncommand = ['x']\n", "give 'languages' or 'extensions'"),
        ("shadowkernel.toml", "[servers.x]\ncommand = ['x']\nextensions = ['c']\n", "with their dot"),
        ("shadowkernel.toml", "[servers.x]\ncommand = ['x']\nlanguages = ['c']\ndiagnostics = 'poll'\n",
         "diagnostics='poll'"),
        ("shadowkernel.toml", "[servers.clangd]\nrecheck_open = true\n", "'recheck_open' must be one of"),
        ("shadowkernel.toml", "servers = [1]\n", "'servers' must be a table"),
        ("shadowkernel.toml", "[servers.x\n", "not valid TOML"),
        ("pyproject.toml", "[tool.shadowkernel.servers.x]\ncommand = ['x']\nwatch = 'y'\nlanguages = ['c']\n",
         "'watch' must be a list"),
        (".lsp.json", '{"go": {"command": "gopls"}}', "no 'extensionToLanguage'"),
        (".lsp.json", '{"go": {"command": "gopls", "extensionToLanguage": {".go": "go"}, '
                      '"transport": "socket"}}', "only 'stdio'"),
        (".lsp.json", '{"go": {"command": "gopls", "extensionToLanguage": {}, "colour": 1}}',
         "unknown key 'colour'"),
        (".lsp.json", "{nope", "not valid JSON"),
    ],
)  # fmt: skip
def test_bad_configuration_names_the_file_and_the_key(tmp_path: Path, name: str, text: str,
                                                       says: str) -> None:  # fmt: skip
    root = project(tmp_path, {name: text})
    with pytest.raises(ArgumentError) as error:
        known_specs(root)
    assert str(root / name) in str(error.value) and says in str(error.value)


def test_checkers_are_split_from_servers_and_unknown_names_say_both(tmp_path: Path) -> None:
    assert split(["ruff", "mypy", "go vet", "pyright"], tmp_path) == (["ruff", "pyright"],
                                                                      ["mypy", "go vet"])  # fmt: skip
    with pytest.raises(NotFound, match="checkers: ruff, mypy"):
        resolve_specs(["nope"], tmp_path)


def test_a_configured_server_serves_a_pool(tmp_path: Path) -> None:
    """A server known only from .lsp.json lints for real (clangd, named otherwise)."""
    if not available_servers()["clangd"]:
        pytest.skip("clangd not installed (.ci/setup)")
    lsp_json = {"my-c": {"command": "clangd", "args": ["--log=error"],
                         "extensionToLanguage": {".c": "c", ".h": "c"}}}  # fmt: skip
    root = project(tmp_path, {".lsp.json": json.dumps(lsp_json),
                              "m.c": "int main(void) { return missing; }\n"})  # fmt: skip

    async def scenario() -> list[str]:
        async with LspPool(root, ["my-c"]) as pool:
            await pool.sync({"m.c": (root / "m.c").read_text()})
            return [lint.message for lint in await pool.lint()]

    assert any("missing" in message for message in asyncio.run(scenario()))


def test_the_readme_configuration_example_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    [example] = re.findall(r"```toml\n(.*?)```", readme, re.S)
    specs = known_specs(project(tmp_path, {"shadowkernel.toml": example}))
    assert specs["zls"].patterns == ("*.zig",) and specs["zls"].recheck_open == "resend"
    assert specs["clangd"].argv == ("clangd", "--clang-tidy") and specs["clangd"].prepare
