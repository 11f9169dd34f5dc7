"""A real JupyterLab and a real browser for the extension's tests.

JupyterLab runs as a subprocess on 127.0.0.1 with a random token, its runtime, config,
settings and workspace folders in a temporary directory (so nothing of the developer's
own setup leaks in or out), news and update checks off. The browser is Debian's
chromium driven by Playwright: `playwright install` cannot download here.

Nothing here sleeps for a fixed time: the server is polled until it answers, within a
deadline, and the browser waits for elements.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
from waiting import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
EXTENSION = "shadowkernel-timeline"

# User settings that keep JupyterLab quiet and offline during tests.
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}


@dataclass(frozen=True)
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def open_url(self, path: str) -> str:
        """The URL that opens `path` (relative to the root) in a fresh workspace."""
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"


def missing_requirements() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; .ci/setup does)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install playwright)"
    if shutil.which("jupyter", path=str(Path(sys.executable).parent)) is None:
        return "jupyter is not installed next to this Python"
    return None


def installed_extension_dir() -> Path | None:
    """Where the JupyterLab run by these tests finds the extension, if anywhere."""
    from jupyter_core.paths import jupyter_path

    for base in jupyter_path("labextensions"):
        candidate = Path(base) / EXTENSION
        if (candidate / "package.json").exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_settings(settings_dir: Path) -> None:
    for relative, values in SETTINGS.items():
        path = settings_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _answers(url: str, token: str, process: subprocess.Popen, log: Path) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{log.read_text()}")
    try:
        with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _wait_until_up(
    url: str, token: str, process: subprocess.Popen, log: Path, timeout: float
) -> None:
    try:
        wait_for(lambda: _answers(url, token, process, log), timeout, "JupyterLab to answer")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}:\n{log.read_text()}") from None


@contextmanager
def running_lab(root: Path, private: Path, timeout: float = 180) -> Iterator[Lab]:
    """JupyterLab serving `root`, with its own state under `private`."""
    port, token = _free_port(), secrets.token_hex(16)
    settings = private / "settings"
    _write_settings(settings)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(private / "runtime"),
        "JUPYTER_CONFIG_DIR": str(private / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(private / "workspaces"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    log = private / "jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, token, process, log, timeout)
        yield Lab(url=url, token=token, root=root, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_notebook(path: Path, cells: list, kernel: str = "python3") -> Path:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nbformat.write(nb, path)
    return path


def set_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme ("JupyterLab Light" or "JupyterLab Dark") and wait for it."""
    page.evaluate(
        "theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme
    )
    page.wait_for_function("theme => document.body.dataset.jpThemeName === theme", arg=theme)


def wait_for_idle_kernel(page, timeout_ms: float = 60_000) -> None:
    page.wait_for_function(
        """() => {
            const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
            return kernel?.status === 'idle' && kernel?.connectionStatus === 'connected';
        }""",
        timeout=timeout_ms,
    )


def screenshot(target, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    target.screenshot(path=str(path))
    return path
