"""What a run gives back, and the capped capture of its output (pure)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..overlay.store import Override
from ..paths import RelPath

DEFAULT_OUTPUT_CAP = 4 * 2**20


@dataclass(frozen=True)
class RunResult:
    """One finished run. `stdout`/`stderr` are text (undecodable bytes replaced); when a
    stream exceeded the cap, its head and tail are kept with a marker line between them and
    its `*_truncated` flag is set. `written` is the run's delta on the manifest it ran on
    (path -> override, None: back to the manifest's absence). `written_outside` lists the
    paths outside the project the run created, changed or deleted in its throwaway layers
    ($HOME, `writable=` paths; not /tmp or /var/tmp): none of it reached the machine.
    `out_of_memory`: the kernel killed processes of the run at its memory cap.
    `queue_seconds` is the wait before it started, apart from `setup_seconds` and `duration`."""

    command: tuple[str, ...]
    exit_code: int | None  # None: killed at the timeout or cancelled
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float
    timed_out: bool
    written: dict[RelPath, Override | None]
    mode: str  # "overlayfs" | "fuse" | "fuse-at-mountpoint" | "copy" (documents mode)
    path_transparent: bool
    network: bool
    notes: tuple[str, ...] = ()
    setup_seconds: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    cancelled: bool = False
    written_outside: tuple[str, ...] = ()
    out_of_memory: bool = False
    queue_seconds: float = 0.0  # waited for its turn (a run slot, the branch's earlier runs)

    @property
    def ok(self) -> bool:
        return (self.exit_code == 0 and not self.timed_out and not self.cancelled
                and not self.out_of_memory)  # fmt: skip

    def __repr__(self) -> str:
        # Short on purpose: the dataclass repr would dump every written blob's bytes.
        status = "timed out" if self.timed_out else "cancelled" if self.cancelled \
            else f"exit {self.exit_code}"  # fmt: skip
        command = " ".join(self.command)
        command = command if len(command) <= 60 else command[:59] + "…"
        return (f"<RunResult {command!r}: {status} in {self.duration:.2f} s, "
                f"{len(self.written)} path(s) written, stdout {len(self.stdout)} chars, "
                f"stderr {len(self.stderr)} chars>")  # fmt: skip


@dataclass
class Capture:
    """Keeps the first and last `cap // 2` bytes of a stream, counting everything."""

    cap: int
    head: bytearray = field(default_factory=bytearray)
    tail: deque[bytes] = field(default_factory=deque)
    tail_size: int = 0
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_size += len(chunk)
            self._trim()

    def _trim(self) -> None:
        keep = self.cap - self.cap // 2
        while self.tail and self.tail_size - len(self.tail[0]) >= keep:  # cap 0: keep none
            self.tail_size -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        tail = b"".join(self.tail)
        if not self.truncated:
            return (bytes(self.head) + tail).decode(errors="replace")
        tail = tail[len(tail) - (self.cap - self.cap // 2) :]
        omitted = self.total - len(self.head) - len(tail)
        marker = f"\n[... {omitted} bytes of output omitted (cap {self.cap} bytes) ...]\n"
        return bytes(self.head).decode(errors="replace") + marker + tail.decode(errors="replace")
