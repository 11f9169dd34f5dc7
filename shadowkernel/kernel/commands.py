"""The notebook subcommands of `shadowkernel` (registered in cli.py).

shadowkernel install-kernel [--user | --sys-prefix]
shadowkernel lab [--port N]        # JupyterLab on notebooks/, 127.0.0.1, prints the URL
shadowkernel tour [--output FILE]  # runs notebooks/01_tour.ipynb headless, prints outcome
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import ShadowError
from . import kernelspec

PACKAGE = Path(__file__).resolve().parents[1]
# The demo notebooks: beside the package in a checkout, inside it in an installed wheel
# (pyproject's force-include), where `lab` serves a copy of them (see `served_notebooks`).
INSTALLED = PACKAGE / "notebooks"
NOTEBOOKS = PACKAGE.parent / "notebooks" if (PACKAGE.parent / "notebooks").is_dir() else INSTALLED
# An extra Jupyter config folder for `shadowkernel lab` only: its page_config disables the
# announcements plugin (the "get notified about Jupyter news?" popup and update checks), so
# a demo starts quiet without writing the user's own ~/.jupyter.
LAB_CONFIG = Path(__file__).resolve().parent / "lab_config"


def cmd_install_kernel(args: argparse.Namespace) -> int:
    prefix = sys.prefix if args.sys_prefix else None
    where = kernelspec.install(user=args.user, prefix=prefix)
    print(f"installed the {kernelspec.NAME!r} kernelspec in {where}")
    return 0


def ensure_kernelspec() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(kernelspec.NAME)
    except NoSuchKernel:
        print(f"installed the kernelspec in {kernelspec.install(prefix=sys.prefix)}")


def cmd_lab(args: argparse.Namespace) -> int:
    need_lab("lab", "jupyterlab")
    args.notebooks = served_notebooks(args.notebooks)
    ensure_kernelspec()
    token = secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--notebook-dir={args.notebooks}",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={args.port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--MappingKernelManager.default_kernel_name={kernelspec.NAME}",
        "--LabApp.news_url=None",  # None (not ""): no news fetched from the internet
    ]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    print(
        f"JupyterLab on {args.notebooks} with the shadowkernel kernel:\n"
        f"  http://127.0.0.1:{args.port}/lab?token={token}\n(Ctrl-C stops it)",
        flush=True,
    )
    process = subprocess.Popen(command, env=lab_environment())
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        return process.wait()


def need_lab(command: str, *modules: str) -> None:
    """ShadowError naming the extra to install when `modules` are missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ShadowError(f"shadowkernel {command} needs {' and '.join(missing)}: "
                          "pip install 'shadowkernel[lab]'")  # fmt: skip


def served_notebooks(folder: Path) -> Path:
    """The folder `lab` serves: the installed package's notebooks are copied once into
    ./shadowkernel-notebooks, so a user's saves (and the demos' runs) land in a folder of
    theirs, not in site-packages."""
    if folder.resolve() != INSTALLED.resolve():
        return folder
    copy = Path.cwd() / "shadowkernel-notebooks"
    if not copy.exists():
        import shutil

        shutil.copytree(INSTALLED, copy)
        print(f"copied the demo notebooks to {copy}")
    return copy


def lab_environment() -> dict[str, str]:
    """This environment with LAB_CONFIG first on JUPYTER_CONFIG_PATH."""
    extra = os.environ.get("JUPYTER_CONFIG_PATH")
    path = os.pathsep.join([str(LAB_CONFIG), *([extra] if extra else [])])
    return {**os.environ, "JUPYTER_CONFIG_PATH": path}


def cmd_tour(args: argparse.Namespace) -> int:
    need_lab("tour", "nbclient", "nbformat")
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    ensure_kernelspec()
    notebook = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=args.timeout,
        kernel_name=kernelspec.NAME,
        resources={"metadata": {"path": str(args.notebook.parent)}},
    )
    start = time.monotonic()
    failed = None
    try:
        client.execute()
    except CellExecutionError as error:
        failed = error
    nbformat.write(notebook, args.output)
    for line in outcome_lines(notebook):
        print(line)
    took = time.monotonic() - start
    if failed is not None:
        print(f"FAILED after {took:.0f} s: {failure_line(failed)}")
        return 1
    print(f"{args.notebook.name}: every cell ran in {took:.0f} s; executed copy: {args.output}")
    return 0


def failure_line(error: Any) -> str:
    """The error of a failed cell in one line, `UsageError: branch 'fix' exists: ...` (the
    error's text ends in a rule of dashes when the kernel sent no traceback)."""
    value = " ".join(str(error.evalue).split())
    return f"{error.ename}: {value}" if value else str(error.ename)


def outcome_lines(notebook: object, width: int = 100) -> list[str]:
    """A short text account of each executed code cell: its first line, then its outputs."""
    lines = []
    for cell in notebook.cells:  # type: ignore[attr-defined]
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        lines.append(f"[{cell.execution_count}] {cell.source.strip().splitlines()[0][:width]}")
        for output in cell.outputs:
            lines += [f"      {t[:width]}" for t in _output_text(output).splitlines()[:4]]
    return lines


def _output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def add_parsers(sub: argparse._SubParsersAction) -> None:
    install = sub.add_parser("install-kernel", help="install the shadowkernel kernelspec")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="in the user's Jupyter folder")
    where.add_argument("--sys-prefix", action="store_true", help="in this environment")
    install.set_defaults(run=cmd_install_kernel)

    lab = sub.add_parser("lab", help="start JupyterLab on notebooks/ with the shadowkernel kernel")
    lab.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default 8888)")
    lab.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="folder to serve")
    lab.set_defaults(run=cmd_lab)

    tour = sub.add_parser("tour", help="run notebooks/01_tour.ipynb headless, print its outcome")
    tour.add_argument("--notebook", type=Path, default=NOTEBOOKS / "01_tour.ipynb")
    tour.add_argument("--output", type=Path, default=Path("01_tour.executed.ipynb"),
                      help="where to save the executed notebook")  # fmt: skip
    tour.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    tour.set_defaults(run=cmd_tour)
