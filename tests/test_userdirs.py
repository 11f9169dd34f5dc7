"""The user's own folders: every one of shadowkernel's comes from `userdirs`, which honours an
absolute XDG value, ignores a relative one (as the spec says) and falls back under $HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from shadowkernel import userdirs
from shadowkernel.evals import pypi
from shadowkernel.lsp import config
from shadowkernel.mcp import transports
from shadowkernel.overlay import fastpath
from shadowkernel.workspace import statedir

CASES = [
    ("XDG_CACHE_HOME", userdirs.cache_home, ".cache"),
    ("XDG_STATE_HOME", userdirs.state_home, ".local/state"),
    ("XDG_CONFIG_HOME", userdirs.config_home, ".config"),
    ("XDG_RUNTIME_DIR", userdirs.runtime_home, ".cache"),
]


@pytest.mark.parametrize(("variable", "home", "default"), CASES)
def test_absolute_values_are_honoured_and_relative_ones_ignored(
    variable: str, home, default: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(variable, str(tmp_path / "xdg"))
    assert home() == tmp_path / "xdg/shadowkernel"
    monkeypatch.setenv(variable, "relative")
    assert home() == tmp_path / "home" / default / "shadowkernel"
    monkeypatch.delenv(variable)
    assert home() == tmp_path / "home" / default / "shadowkernel"


def test_every_user_folder_comes_from_userdirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, _, _ in CASES:
        monkeypatch.setenv(variable, str(tmp_path / variable))
    assert pypi.cache_dir() == tmp_path / "XDG_CACHE_HOME/shadowkernel/sdists"
    assert fastpath.wheel_cache().parents[1] == tmp_path / "XDG_CACHE_HOME/shadowkernel/pyfuse3"
    assert statedir.state_home() == str(tmp_path / "XDG_STATE_HOME/shadowkernel")
    assert config.user_file() == tmp_path / "XDG_CONFIG_HOME/shadowkernel/servers.toml"
    assert transports.default_token_file(8000) == str(
        tmp_path / "XDG_RUNTIME_DIR/shadowkernel/mcp-8000.token"
    )
