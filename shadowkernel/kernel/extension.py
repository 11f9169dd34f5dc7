"""`%load_ext shadowkernel`: the magics and display formatters in any IPython shell."""

from __future__ import annotations

import atexit
from typing import Any

from .display import register_formatters
from .live import register_target
from .magics import MAGICS
from .session import Session

_sessions: dict[int, Session] = {}


def session_of(shell: Any) -> Session:
    """The shell's session (one per shell), created on first use."""
    session = _sessions.get(id(shell))
    if session is None:
        session = _sessions[id(shell)] = Session(shell)
        atexit.register(session.shutdown)  # a plain IPython kernel exits without telling us
    return session


def load_ipython_extension(shell: Any) -> None:
    session = session_of(shell)
    for magics in MAGICS:
        shell.register_magics(magics(shell, session))
    register_formatters(shell)
    register_target()
    shell.user_ns.setdefault("start_agent", session.start_agent)


def unload_ipython_extension(shell: Any) -> None:
    session = _sessions.pop(id(shell), None)
    if session is not None:
        session.shutdown()


def start_agent(target: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an agent in a daemon thread of the current shell's session (%timeline follows it)."""
    from IPython import get_ipython

    return session_of(get_ipython()).start_agent(target, *args, **kwargs)
