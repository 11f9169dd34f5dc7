"""Driving a real kernel through jupyter_client: start it, run code, collect what it sent."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager
from waiting import wait_for as wait_for  # re-exported for tests that import it from here

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "notebooks" / "sample_project"


@dataclass
class Outcome:
    """What one execute request produced."""

    reply: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.messages
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    @property
    def stderr(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.messages
            if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )

    @property
    def error(self) -> tuple[str, str] | None:
        for m in self.messages:
            if m["msg_type"] == "error":
                return m["content"]["ename"], m["content"]["evalue"]
        return None

    def data(
        self, mime: str = "text/plain", kinds: tuple[str, ...] = ("execute_result", "display_data")
    ) -> list[Any]:
        return [
            m["content"]["data"][mime]
            for m in self.messages
            if m["msg_type"] in kinds and mime in m["content"]["data"]
        ]

    @property
    def usage_error(self) -> str:
        """The one-line UsageError IPython printed (to stderr), or ''."""
        return self.stderr.strip() if self.stderr.startswith("UsageError:") else ""


class Kernel:
    def __init__(self, manager: KernelManager) -> None:
        self.manager = manager
        self.client = manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 120) -> Outcome:
        messages: list[dict[str, Any]] = []
        reply = self.client.execute_interactive(
            code, timeout=timeout, output_hook=messages.append, allow_stdin=False
        )
        return Outcome(reply, messages)

    def ok(self, code: str, timeout: float = 120) -> Outcome:
        outcome = self.run(code, timeout)
        assert outcome.status == "ok", (outcome.error, outcome.stderr)
        return outcome

    def usage_error(self, code: str) -> str:
        """Run code that must fail with a one-line UsageError; returns its message."""
        outcome = self.run(code)
        message = outcome.usage_error
        assert message, (
            f"expected a UsageError from {code!r}, got {outcome.error} {outcome.stderr!r}"
        )
        assert "\n" not in message and "Traceback" not in outcome.stderr
        return message

    def value(self, expression: str) -> str:
        """repr-ish text/plain of an expression, through user_expressions."""
        msg_id = self.client.execute("", silent=True, user_expressions={"x": expression})
        reply = self.client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=60)
        result = reply["content"]["user_expressions"]["x"]
        assert result["status"] == "ok", result
        return result["data"]["text/plain"]

    def iopub_until_idle(self, msg_id: str, timeout: float = 60) -> list[dict[str, Any]]:
        """The iopub messages of one request from here on, up to its kernel going idle."""
        messages = []
        while True:
            message = self.client.get_iopub_msg(timeout=timeout)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return messages
            messages.append(message)

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)


@contextmanager
def kernel(name: str = "shadowkernel", cwd: Path | None = None) -> Iterator[Kernel]:
    # Over unix sockets (Jupyter's "ipc" transport): with TCP the client picks free ports that
    # the kernel binds later, and a kernel or server another test starts meanwhile can take one
    # ("Address already in use", seen under load).
    with tempfile.TemporaryDirectory(prefix="sk-kernel-") as sockets:
        manager = KernelManager(kernel_name=name, transport="ipc", ip=f"{sockets}/k")
        manager.start_kernel(cwd=str(cwd or REPO))
        k = Kernel(manager)
        try:
            yield k
        finally:
            k.stop()


def copy_sample(target: Path) -> Path:
    shutil.copytree(SAMPLE, target)
    return target


def shadow_mounts() -> list[str]:
    """Mount points of fuse.shadowkernel mounts visible here."""
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if " fuse.shadowkernel " in line]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


RECEIVERS = ["the process", "another thread"]


def default_sigint() -> None:
    """For `preexec_fn`: SIGINT's default action, as in a terminal. A test worker may have it
    ignored (a background job's), and an ignored signal stays ignored across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(pid: int, receiver: str) -> None:
    """SIGINT to the process (Linux gives it to a thread of its choice, nearly always the
    main one), or to one of its other threads, as Linux may choose: the main thread's wait
    must end either way (Python runs handlers there only)."""
    if receiver == "the process":
        os.kill(pid, signal.SIGINT)
        return
    other = min(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    if ctypes.CDLL(None, use_errno=True).tgkill(pid, other, signal.SIGINT) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {other}, SIGINT)")
