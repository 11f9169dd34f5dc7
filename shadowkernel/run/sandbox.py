"""The command line that starts a run inside its namespaces (pure), and what the machine allows.

A run starts as `unshare ... sh -c SCRIPT sh ARGV...`: `unshare` makes a private mount, PID
(and, without network, network) namespace; the small shell script then joins the run's pids
cgroup, brings loopback up, mounts the shadow over the user's own path (and an empty tmpfs over
the directory of kept overlay views), changes into the working directory and runs the command
as a child. A shell rather than a Python helper,
because the whole setup must fit in a few milliseconds (Python alone starts in 15-40 ms),
and every value reaches it quoted by `shlex.quote`, so no path can inject shell code.

The shell is PID 1 of the run's PID namespace: when the command exits, the shell exits and
the kernel kills whatever the command left behind; killing the shell (or `unshare`, through
`--kill-child`) kills the whole run, daemons included. As root the command runs without
CAP_SYS_ADMIN (no `umount` of the shadow to reach the user's folder underneath) and without
CAP_DAC_READ_SEARCH (no `open_by_handle_at` around the mounts).

Offline runs of root share one persistent network namespace with only loopback up
(`ip netns add shadowkernel-offline`, made on first use and kept): creating and tearing down a
namespace per run cost 5-15 ms here, joining one with `nsenter` about 1 ms. Runs end with
their processes, so nothing listens there between runs; concurrent offline runs can reach
each other's loopback servers.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass

DROPPED_CAPS = "-sys_admin,-dac_read_search,-sys_module"
OFFLINE_NETNS = "shadowkernel-offline"


@dataclass(frozen=True)
class Plan:
    argv: tuple[str, ...]
    cwd: str  # absolute, as the run sees it
    namespaces: bool  # False: run at the mount path, no private namespaces
    network: bool
    privileged: bool  # root: no user namespace needed
    mount: tuple[str, ...] = ()  # the mount command that puts the shadow at the user's path
    hide: str | None = None  # then an empty tmpfs goes over this directory (kept views)
    cgroup_procs: str | None = None  # join this pids cgroup before anything else
    drop_caps: bool = True
    netns: str | None = None  # an existing loopback-only network namespace to join


def command_line(plan: Plan) -> list[str]:
    """argv that starts the run described by `plan`."""
    tail = ["sh", "-c", setup_script(plan), "sh", *plan.argv]
    if not plan.namespaces:
        return tail
    flags = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork",
             "--kill-child", "--mount-proc"]  # fmt: skip
    if not plan.privileged:
        flags += ["--user", "--map-root-user"]
    if not plan.network and plan.netns:
        flags = ["nsenter", f"--net={plan.netns}", *flags]
    elif not plan.network:
        flags.append("--net")
    return flags + tail


def setup_script(plan: Plan) -> str:
    lines = ["set -e"]
    if plan.cgroup_procs:
        lines.append(f"echo 0 > {shlex.quote(plan.cgroup_procs)}")
    if plan.namespaces and not plan.network and not plan.netns:
        lines.append("ip link set lo up")
    if plan.mount:
        lines.append(shlex.join(plan.mount))
    if plan.hide:
        lines.append(f"mount -t tmpfs -o ro,size=4k shadowkernel-hidden {shlex.quote(plan.hide)}")
    lines.append(f"cd {shlex.quote(plan.cwd)}")
    lines.append("set +e")
    # Not `exec`: the shell stays PID 1 so the command's leftovers die when it exits.
    if plan.namespaces and plan.privileged and plan.drop_caps:
        lines.append(f'setpriv --bounding-set={DROPPED_CAPS} "$@"')
    else:
        lines.append('"$@"')
    return "\n".join(lines)


# -- what the machine allows (probed once) ------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    root: bool
    unshare: bool
    overlayfs: bool
    ip: bool
    setpriv: bool
    nsenter: bool

    @property
    def namespaces(self) -> bool:
        return self.unshare and self.ip and (self.root or _userns_allowed())


@functools.cache
def machine() -> Machine:
    return Machine(
        root=os.geteuid() == 0,
        unshare=shutil.which("unshare") is not None,
        overlayfs=_has_filesystem("overlay"),
        ip=shutil.which("ip") is not None,
        setpriv=shutil.which("setpriv") is not None,
        nsenter=shutil.which("nsenter") is not None,
    )


def offline_netns() -> str | None:
    """The shared loopback-only network namespace (made on first use), or None."""
    m = machine()
    if not (m.root and m.ip and m.nsenter):
        return None
    path = f"/run/netns/{OFFLINE_NETNS}"
    if not os.path.exists(path):
        subprocess.run(["ip", "netns", "add", OFFLINE_NETNS], capture_output=True)
    up = subprocess.run(["ip", "-n", OFFLINE_NETNS, "link", "set", "lo", "up"],
                        capture_output=True)  # fmt: skip
    return path if up.returncode == 0 else None


def _has_filesystem(name: str) -> bool:
    try:
        with open("/proc/filesystems") as f:
            return any(line.split()[-1] == name for line in f if line.strip())
    except OSError:
        return False


def _userns_allowed() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces") as f:
            return int(f.read()) > 0
    except (OSError, ValueError):
        return False
