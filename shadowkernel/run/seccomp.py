"""The seccomp filter bubblewrap loads into every run (`bwrap --seccomp FD`), compiled here.

A classic BPF program (a few dozen instructions; no libseccomp, so pip-only installs get it
too): check the architecture, then refuse each system call of `DENIED` by number, answering
EPERM (ENOSYS where a library should fall back as if the kernel were older). Everything else
is allowed: the rest of the sandbox (namespaces, a read-only machine, no capabilities) does
the confining, the filter only takes away kernel surface a run never needs. Why each is
refused is said beside it, and in docs/fallback.md.

Allowed on purpose: `ptrace` and `process_vm_readv`/`writev` (debuggers, py-spy and pytest
plugins use them; in its own PID namespace a run can only reach its own processes).

Architectures: x86_64 (its i386 system calls checked by their own numbers, x32 refused),
aarch64 (arm32 refused); any other answers ENOSYS to everything, so an unknown machine
fails loudly rather than running unfiltered. `program()` gives the bytes bwrap reads.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import os
import platform
import struct
import tempfile
from collections.abc import Mapping

# A system call refused, with its errno and the reason; `flag`: refused only when the first
# argument holds this bit (a filter reads registers, not memory).
DENIED: dict[str, tuple[int, str]] = {
    "keyctl": (errno.EPERM, "kernel keyrings are not namespaced: the user's keys are shared"),
    "add_key": (errno.EPERM, "kernel keyrings are not namespaced"),
    "request_key": (errno.EPERM, "kernel keyrings are not namespaced"),
    "bpf": (errno.EPERM, "eBPF programs: a large kernel surface with a history of exploits"),
    "perf_event_open": (errno.EPERM, "performance counters: side channels and exploits"),
    "userfaultfd": (errno.EPERM, "pauses the kernel mid-copy: the tool of race exploits"),
    "io_uring_setup": (errno.ENOSYS, "io_uring: its history of exploits; libraries fall back"),
    "io_uring_enter": (errno.ENOSYS, "io_uring"),
    "io_uring_register": (errno.ENOSYS, "io_uring"),
    "kexec_load": (errno.EPERM, "replaces the running kernel"),
    "kexec_file_load": (errno.EPERM, "replaces the running kernel"),
    "init_module": (errno.EPERM, "loads code into the kernel"),
    "finit_module": (errno.EPERM, "loads code into the kernel"),
    "delete_module": (errno.EPERM, "unloads kernel modules"),
    "unshare": (
        errno.EPERM,
        "with CLONE_NEWUSER: a nested user namespace gives the run every "
        "capability over new namespaces, the start of most container escapes",
    ),  # fmt: skip
    "clone": (errno.EPERM, "with CLONE_NEWUSER, as unshare"),
    "clone3": (
        errno.ENOSYS,
        "its flags lie in memory a filter cannot read; glibc, Go and Rust "
        "fall back to clone on ENOSYS",
    ),  # fmt: skip
    "mount": (errno.EPERM, "the run's mounts are made for it; it has no capability to mount"),
    "umount2": (errno.EPERM, "as mount"),
    "pivot_root": (errno.EPERM, "as mount"),
    "open_tree": (errno.EPERM, "the new mount API, as mount"),
    "move_mount": (errno.EPERM, "as open_tree"),
    "fsopen": (errno.EPERM, "as open_tree"),
    "fsconfig": (errno.EPERM, "as open_tree"),
    "fsmount": (errno.EPERM, "as open_tree"),
    "fspick": (errno.EPERM, "as open_tree"),
    "open_by_handle_at": (
        errno.EPERM,
        "opens files by handle around the mount view (the 'shocker' container escape)",
    ),  # fmt: skip
    "syslog": (errno.EPERM, "the kernel log leaks kernel addresses"),
    "acct": (errno.EPERM, "machine-wide process accounting"),
    "swapon": (errno.EPERM, "machine-wide"),
    "swapoff": (errno.EPERM, "machine-wide"),
    "reboot": (errno.EPERM, "machine-wide"),
    "settimeofday": (errno.EPERM, "the machine's clock"),
    "clock_settime": (errno.EPERM, "the machine's clock"),
    "clock_adjtime": (errno.EPERM, "the machine's clock"),
}
CLONE_NEWUSER = 0x10000000
FLAGGED = {"unshare": CLONE_NEWUSER, "clone": CLONE_NEWUSER}

# System call numbers (asm/unistd_64.h, unistd_32.h, asm-generic/unistd.h), checked against
# the headers in tests/test_sandbox.py where they are installed.
NAMES = list(DENIED)
X86_64 = dict(zip(NAMES, [250, 248, 249, 321, 298, 323, 425, 426, 427, 246, 320, 175, 313,
                          176, 272, 56, 435, 165, 166, 155, 428, 429, 430, 431, 432, 433, 304,
                          103, 163, 167, 168, 169, 164, 227, 305], strict=True))  # fmt: skip
I386 = dict(zip(NAMES, [288, 286, 287, 357, 336, 374, 425, 426, 427, 283, None, 128, 350,
                        129, 310, 120, 435, 21, 52, 217, 428, 429, 430, 431, 432, 433, 342,
                        103, 51, 87, 115, 88, 79, 264, 343], strict=True))  # fmt: skip
I386_TIME64 = {"clock_settime": 404, "clock_adjtime": 405}  # 32-bit time_t's successors
AARCH64 = dict(zip(NAMES, [219, 217, 218, 280, 241, 282, 425, 426, 427, 104, 294, 105, 273,
                           106, 97, 220, 435, 40, 39, 41, 428, 429, 430, 431, 432, 433, 265,
                           116, 89, 224, 225, 142, 170, 112, 266], strict=True))  # fmt: skip

AUDIT_ARCH_X86_64, AUDIT_ARCH_I386 = 0xC000003E, 0x40000003
AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM = 0xC00000B7, 0x40000028
X32_BIT = 0x40000000

# Classic BPF (linux/filter.h, linux/seccomp.h).
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data; arg0's low half (LE)


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _refusals(numbers: Mapping[str, int | None]) -> list[bytes]:
    """After `ld nr`: refuse each listed call; the flagged ones only with their flag."""
    out: list[bytes] = []
    for name, number in numbers.items():
        if number is None:
            continue
        answer = RET_ERRNO | DENIED[name][0]
        if name in FLAGGED:  # nr == n? load arg0; flag set? refuse; else reload nr, go on
            out += [_ins(JEQ, number, 0, 4), _ins(LD_ABS_W, OFFSET_ARG0),
                    _ins(JSET, FLAGGED[name], 0, 1), _ins(RET, answer),
                    _ins(LD_ABS_W, OFFSET_NR)]  # fmt: skip
        else:
            out += [_ins(JEQ, number, 0, 1), _ins(RET, answer)]
    return out


def _arch_block(numbers: Mapping[str, int | None], x32: bool = False) -> list[bytes]:
    head = [_ins(LD_ABS_W, OFFSET_NR)]
    if x32:  # x32 system calls carry bit 30: refused whole (no program here needs them)
        head += [_ins(JGE, X32_BIT, 0, 1), _ins(RET, RET_ERRNO | errno.ENOSYS)]
    return [*head, *_refusals(numbers), _ins(RET, RET_ALLOW)]


def compile_filter(machine: str) -> bytes:
    """The program for `machine` (platform.machine()): arch check, then one block per arch."""
    if machine == "x86_64":
        blocks = [(AUDIT_ARCH_X86_64, _arch_block(X86_64, x32=True)),
                  (AUDIT_ARCH_I386, _arch_block({**I386, **I386_TIME64}))]  # fmt: skip
    elif machine in ("aarch64", "arm64"):
        blocks = [(AUDIT_ARCH_AARCH64, _arch_block(AARCH64))]
    else:
        blocks = []
    out = [_ins(LD_ABS_W, OFFSET_ARCH)]
    for arch, block in blocks:  # arch == this? fall into its block; else jump over it
        out += [_ins(JEQ, arch, 0, len(block)), *block]
    out.append(_ins(RET, RET_ERRNO | errno.ENOSYS))  # an architecture not listed
    return b"".join(out)


@functools.cache
def program() -> bytes:
    return compile_filter(platform.machine())


@functools.cache
def program_file() -> str:
    """A file holding `program()`, made once per process (0600, a fresh name: no other user
    can have put it there), read by the run's prefix into the descriptor bwrap takes."""
    fd, path = tempfile.mkstemp(prefix="shadowkernel-seccomp-", suffix=".bpf")
    with os.fdopen(fd, "wb") as f:
        f.write(program())
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
