"""The `shadowkernel` command.

    shadowkernel mount SRC MNT          # foreground; Ctrl-C unmounts

Each subcommand is a `cmd_*` function over the public API; a `ShadowError` becomes a one-line
message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from .errors import ShadowError


def cmd_mount(args: argparse.Namespace) -> int:
    from .overlay.shadow import Shadow

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with Shadow(args.source, args.mountpoint) as shadow:
        print(
            f"shadow of {shadow.source} mounted at {shadow.mountpoint}; Ctrl-C unmounts", flush=True
        )
        while not stop.wait(0.5):
            if not shadow.alive:
                print("the overlay process exited; the mount was detached", file=sys.stderr)
                return 1
    print("unmounted; the user's folder was not written", flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shadowkernel", description="A private, writable shadow of a project for AI agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    mount = sub.add_parser(
        "mount", help="mount a shadow of SRC at MNT (foreground; Ctrl-C unmounts)"
    )
    mount.add_argument("source", metavar="SRC", help="the user's project folder (never written)")
    mount.add_argument("mountpoint", metavar="MNT", help="an empty folder outside SRC")
    mount.set_defaults(run=cmd_mount)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except ShadowError as exc:
        print(f"shadowkernel {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
