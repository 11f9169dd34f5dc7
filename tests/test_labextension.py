"""The JupyterLab extension without a browser: its TypeScript unit tests, and its packaging.

The unit tests (labextension/test/*.test.ts, node's built-in runner) cover the pure layout
code: rows, scale, zoom and pan, ticks, tooltip and summary texts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

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


def test_built_extension_matches_the_source_version() -> None:
    """The build the wheel ships (and the dev venv links) is of this package.json."""
    built = BUILT / "package.json"
    if not built.exists():
        pytest.skip("shadowkernel/labextension is not built (bash .ci/setup builds it)")
    source = json.loads((LABEXTENSION / "package.json").read_text())
    meta = json.loads(built.read_text())
    assert (meta["name"], meta["version"]) == (source["name"], source["version"])
    assert meta["jupyterlab"]["mimeExtension"], "a MIME renderer extension"
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
