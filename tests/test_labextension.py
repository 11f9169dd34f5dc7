"""The JupyterLab extension without a browser: its TypeScript unit tests, its packaging, and
the lab `shadowkernel lab` starts.

The unit tests (labextension/test/*.test.ts, node's built-in runner) cover the pure code:
rows, scale, zoom and pan, ticks, tooltip, summary and request texts, the live merge of feed
messages and its resynchronisation, replay.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
from browser.lab import _free_port
from kernel_helpers import default_sigint
from waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
LABEXTENSION = REPO / "labextension"
BUILT = REPO / "shadowkernel" / "labextension"
SHARE = "share/jupyter/labextensions/shadowkernel-timeline"

needs_npm = pytest.mark.skipif(
    shutil.which("npm") is None or not (LABEXTENSION / "node_modules").is_dir(),
    reason="needs npm and labextension/node_modules (bash .ci/setup installs them)",
)


@needs_npm
def test_typescript_unit_tests_pass() -> None:
    result = subprocess.run(
        ["npm", "test"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=180
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    failed = re.search(r"^# fail (\d+)$", output, re.MULTILINE)
    assert passed and failed, f"no test summary from node's test runner:\n{output}"
    assert int(failed.group(1)) == 0, output
    assert int(passed.group(1)) >= 20, f"expected the whole suite to run:\n{output}"


def test_jupyterlab_lists_the_extension_as_compatible() -> None:
    """`jupyter labextension list` marks an extension whose @jupyterlab/* ranges exclude the
    installed JupyterLab's packages with X ("not compatible"); ours must say OK."""
    if not (BUILT / "package.json").exists():
        pytest.skip("shadowkernel/labextension is not built (bash .ci/setup builds it)")
    jupyter = Path(sys.executable).with_name("jupyter")
    listing = subprocess.run([str(jupyter), "labextension", "list", "--verbose"],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    output = re.sub(r"\x1b\[[0-9;]*m", "", listing.stdout + listing.stderr)  # colours, if any
    line = next((x for x in output.splitlines() if "shadowkernel-timeline" in x), "")
    assert re.search(r"enabled\s+.*OK", line), f"not listed as enabled and OK:\n{output}"
    assert "not compatible" not in output, output


def test_built_extension_matches_the_source_version() -> None:
    """The build the wheel ships (and the dev venv links) is of this package.json."""
    built = BUILT / "package.json"
    if not built.exists():
        pytest.skip("shadowkernel/labextension is not built (bash .ci/setup builds it)")
    source = json.loads((LABEXTENSION / "package.json").read_text())
    meta = json.loads(built.read_text())
    assert (meta["name"], meta["version"]) == (source["name"], source["version"])
    assert meta["jupyterlab"]["extension"], "a plugin (it reaches each notebook's kernel)"
    assert (BUILT / "static" / "style.js").exists()
    assert (BUILT / "install.json").exists()


@pytest.mark.slow
def test_wheel_installs_the_prebuilt_extension(tmp_path: Path) -> None:
    """`pip install shadowkernel` is all a user needs: the wheel puts the built extension
    where JupyterLab looks for prebuilt extensions."""
    uv = shutil.which("uv")
    if uv is None or not (BUILT / "static" / "style.js").exists():
        pytest.skip("needs uv and a built extension (bash .ci/setup provides both)")
    result = subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [wheel] = tmp_path.glob("shadowkernel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shared = [n.split(f"/data/{SHARE}/", 1)[1] for n in names if f"/data/{SHARE}/" in n]
    assert {"package.json", "install.json", "static/style.js"} <= set(shared), shared
    assert any(re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", n) for n in shared), shared
    assert not any("node_modules" in n for n in names)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_lab_command_starts_quiet_without_writing_the_users_config(tmp_path: Path) -> None:
    """`shadowkernel lab` disables JupyterLab's announcements (the "get notified about
    Jupyter news?" popup) through its own config folder, not the user's ~/.jupyter."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "JUPYTER_PLATFORM_DIRS": "1"}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_PATH"):
        env.pop(name, None)
    log = tmp_path / "lab.log"
    command = [str(Path(sys.executable).with_name("shadowkernel")), "lab",
               f"--port={_free_port()}", f"--notebooks={tmp_path}"]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   preexec_fn=default_sigint)  # fmt: skip
    try:
        url = wait_for(lambda: re.search(r"http://\S+/lab\?token=\w+", log.read_text()), 60,
                       "the URL shadowkernel lab prints").group(0)  # fmt: skip
        page = wait_for(lambda: _get(url), 180, "JupyterLab to answer")
    finally:
        process.send_signal(signal.SIGINT)  # as Ctrl-C: it stops its JupyterLab child too
        process.wait(timeout=30)
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                     page, re.DOTALL)  # fmt: skip
    assert data, page[:500]
    config = json.loads(html.unescape(data.group(1)))
    assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    assert config["news"] == {"disabled": True}
    assert not (home / ".jupyter").exists(), "the user's own Jupyter config was written"


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None
