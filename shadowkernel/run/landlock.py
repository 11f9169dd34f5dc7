"""Landlock: confining a run where bubblewrap cannot start (an unprivileged container).

Landlock is the kernel's unprivileged access control (Linux >= 5.13): a process restricts
itself, and every process it starts, with a ruleset it cannot undo. Docker's and Podman's
default seccomp profiles allow its three system calls, so it works where user namespaces are
refused. A run confined here gets:

- writes only beneath the paths given (its private copy or the shadow's mount, a private
  temporary directory, `writable=` paths) and to a few devices (/dev/null, /dev/zero,
  /dev/full, /dev/tty, /dev/pts); everything else refuses them with EACCES. Reads and
  execution stay as the machine allows (they are not handled);
- offline (ABI >= 4, Linux 6.7): TCP connect and bind refused everywhere, loopback included;
- always (ABI >= 6, Linux 6.12): abstract unix sockets and signals scoped to the run, so it
  can neither reach the machine's abstract sockets (D-Bus, X11, systemd's) nor signal its
  processes;
- `no_new_privs`, so no setuid program regains what the run gave up.

Caveats: what the machine's ABI lacks is not confined (the run's notes name the ABI); UDP and
unix sockets with a path stay reachable (Landlock has no rules for them yet); device ioctls are
not handled (the run has no controlling terminal).

The rules are applied by this very file, run as a helper just before the command:
`python -I -S -c SOURCE [--write PATH]... [--offline] [--fs] -- ARGV` (no site, no user
path: about 10 ms, and nothing the run's branch holds can change it). So the file imports the
standard library only. The system call numbers (444-446) are the same on every architecture.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (linux/landlock.h) that write, by the ABI that added them; reads and
# execution are left as the machine allows.
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (
    1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12,
)  # fmt: skip
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
FILE_RIGHTS = WRITE_FILE | TRUNCATE  # the only write rights a rule on a file may hold
DEVICE_NODES = MAKE_CHAR | MAKE_BLOCK  # handled, granted nowhere
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts")


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


@functools.cache
def abi() -> int:
    """The Landlock ABI this kernel offers to this process, 0 where it has none (an old
    kernel, Landlock off at boot, a seccomp profile refusing it)."""
    try:
        return _syscall(CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))  # fmt: skip
    except OSError:
        return 0


def write_rights(version: int) -> int:
    rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK
    rights |= MAKE_FIFO | MAKE_SYM | DEVICE_NODES
    return rights | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)


def ruleset(version: int, fs: bool, offline: bool) -> bytes:
    """struct landlock_ruleset_attr, as long as `version` knows it."""
    handled_fs = write_rights(version) if fs else 0
    net = NET_BIND_TCP | NET_CONNECT_TCP if offline and version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    fields = [handled_fs] + ([net] if version >= 4 else []) + ([scoped] if version >= 6 else [])
    return struct.pack(f"={len(fields)}Q", *fields)


def restrict(writable: list[str], fs: bool = True, offline: bool = True) -> int:
    """Confine this process (and what it starts) as the module docstring says; returns the
    ABI used. `fs=False` leaves the filesystem to another layer (bwrap) and only scopes."""
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available to this process")
    attr = ruleset(version, fs, offline)
    if attr == bytes(len(attr)):
        return version  # nothing this ABI can add
    fd = _syscall(CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        if fs:
            granted = write_rights(version) & ~DEVICE_NODES
            for path in writable:
                _allow(fd, path, granted)
            for path in DEVICES:
                _allow(fd, path, FILE_RIGHTS & write_rights(version))
        _no_new_privs()
        _syscall(RESTRICT_SELF, fd, ctypes.c_uint32(0))
    finally:
        os.close(fd)
    return version


def _allow(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a device this machine lacks
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = struct.pack("=Qi", rights, target)  # landlock_path_beneath_attr, packed
        _syscall(ADD_RULE, ruleset_fd, ctypes.c_int(RULE_PATH_BENEATH), rule, ctypes.c_uint32(0))
    finally:
        os.close(target)


def _no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


# -- the helper (run before the command) ---------------------------------------------------------


@functools.cache
def _source() -> str:
    with open(__file__, encoding="utf-8") as f:
        return f.read()


def helper(python: str, writable: list[str], fs: bool, offline: bool) -> list[str]:
    """argv prefix that confines what follows it: `helper(...) + argv`."""
    options = [f"--write={path}" for path in writable]
    options += ["--fs"] if fs else []
    options += ["--offline"] if offline else []
    return [python, "-I", "-S", "-c", _source(), *options, "--"]


def describe(version: int, fs: bool, offline: bool) -> str:
    """What a run confined at `version` got, for its notes."""
    parts = ["writes only in its own folders"] if fs else []
    if offline:
        parts.append("TCP connect and bind refused" if version >= 4
                     else "TCP not confined (needs ABI 4, Linux 6.7)")  # fmt: skip
    sockets = "abstract unix sockets and signals"
    parts.append(f"{sockets} scoped to the run" if version >= 6
                 else f"{sockets} not scoped (needs ABI 6, Linux 6.12)")  # fmt: skip
    return f"Landlock ABI {version}: " + ", ".join(parts)


def main(args: list[str]) -> None:
    split = args.index("--")
    options, argv = args[:split], args[split + 1 :]
    writable = [o.split("=", 1)[1] for o in options if o.startswith("--write=")]
    try:
        restrict(writable, fs="--fs" in options, offline="--offline" in options)
    except OSError as error:
        sys.stderr.write(f"shadowkernel: Landlock confinement failed: {error}\n")
        sys.exit(125)
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        sys.stderr.write(f"shadowkernel: {argv[0]}: {error.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
