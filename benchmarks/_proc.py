"""What /proc says of a process, for the benchmarks that measure servers and sides."""

from __future__ import annotations

import os


def cpu_seconds(pid: int | None) -> float | None:
    """User plus system CPU time of a process so far, every thread (clock-tick resolution);
    None when it is gone or not given."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
