"""`%load_ext shadowkernel`: the magics and display formatters in any IPython shell;
`%unload_ext shadowkernel` takes them back and closes the shadow.

This is the one implementation: `shadowkernel` and `shadowkernel.kernel` delegate to it, and
the shadowkernel kernel loads it through the shell's extension manager, so `%unload_ext`
works there too.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.magic import Magics

from .display import register_formatters
from .live import register_target
from .magics import MAGICS
from .session import Session

_sessions: dict[int, Session] = {}


@dataclass
class _Loaded:
    """What loading put into one shell, for unloading to take back."""

    magics: list[Magics]
    restore_formatters: Callable[[], None]


_loaded: dict[int, _Loaded] = {}


def session_of(shell: Any) -> Session:
    """The shell's session (one per shell), created on first use."""
    session = _sessions.get(id(shell))
    if session is None:
        session = _sessions[id(shell)] = Session(shell)
        atexit.register(session.shutdown)  # a plain IPython kernel exits without telling us
    return session


def load_ipython_extension(shell: Any) -> None:
    if id(shell) in _loaded:  # loaded under its other name (shadowkernel.kernel): once is enough
        return
    session = session_of(shell)
    magics: list[Magics] = [kind(shell, session) for kind in MAGICS]
    shell.register_magics(*magics)
    _loaded[id(shell)] = _Loaded(magics, register_formatters(shell))
    # The comm target stays registered after an unload: timelines already in the notebook
    # subscribe to it, and must hear that their shadow closed.
    register_target()
    shell.user_ns.setdefault("start_agent", session.start_agent)


def unload_ipython_extension(shell: Any) -> None:
    """Take back the magics, the formatters and `start_agent`; close the session's shadow
    (servers stopped, unmounted) and every workspace opened in code."""
    loaded = _loaded.pop(id(shell), None)
    if loaded is not None:
        for magics in loaded.magics:
            _unregister_magics(shell.magics_manager, magics)
        loaded.restore_formatters()
    session = _sessions.pop(id(shell), None)
    if session is not None:
        atexit.unregister(session.shutdown)
        if shell.user_ns.get("start_agent") == session.start_agent:
            del shell.user_ns["start_agent"]
        session.shutdown()


def _unregister_magics(manager: Any, magics: Magics) -> None:
    """IPython can register magics but not take them back: remove each name that still
    calls this object's method (another extension may have taken the name since)."""
    for kind, table in magics.magics.items():
        for name, method in table.items():
            if manager.magics[kind].get(name) == method:
                del manager.magics[kind][name]
    name = type(magics).__name__
    if manager.registry.get(name) is magics:
        del manager.registry[name]


def start_agent(target: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an agent in a daemon thread of the current shell's session (%timeline follows it)."""
    from IPython import get_ipython

    return session_of(get_ipython()).start_agent(target, *args, **kwargs)
