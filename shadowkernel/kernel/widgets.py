"""A small control panel: branch picker, lint filter, lint button, and a live status line.

The status line and the branch list are refreshed by a daemon thread every `live.INTERVAL`
seconds (widget state updates reach the browser from any thread, unlike `update_display`); it
stops when the shadow closes or the panel is closed. A lint brings the branch list up to date
first, so a branch made a moment ago can be picked and linted at once.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as w
from IPython.core.error import UsageError

from ..errors import ShadowError
from ..workspace import Workspace
from . import live
from .session import Session

SEVERITIES = ("error", "warning", "information", "hint")


class Panel(w.VBox):
    """`%shadow panel`: pick a branch, filter its lints, watch the shadow work."""

    def __init__(self, session: Session) -> None:
        self.session = session
        ws = session.require()
        self.picker = w.Dropdown(description="branch", options=sorted(ws.branches))
        self.severity = w.SelectMultiple(description="severity", options=SEVERITIES,
                                         value=SEVERITIES[:2], rows=4)  # fmt: skip
        self.new_only = w.Checkbox(description="new only", value=False, indent=False)
        self.button = w.Button(description="lint", icon="check")
        self.status = w.HTML()
        self.output = w.Output()
        self.button.on_click(lambda _: self.show_lints())
        controls = w.HBox([self.picker, self.severity, w.VBox([self.new_only, self.button])])
        super().__init__([controls, self.status, self.output])
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.refresh()
        threading.Thread(target=self._follow, daemon=True, name="shadowkernel-status").start()

    def lints(self) -> Any:
        """The picked branch's lints, filtered as the controls say. The branch list is brought
        up to date first: a branch made since the last refresh is linted, not refused."""
        ws = self._workspace()
        if ws is not None:
            self._list_branches(ws)
        if self.picker.value is None:
            raise UsageError("no branch to lint yet: create one with %branch new NAME")
        branch = self.session.branch(self.picker.value)
        table = branch.lint(new_only=self.new_only.value)
        return table[table["severity"].isin(self.severity.value)].reset_index(drop=True)

    def show_lints(self) -> None:
        # Set the outputs directly (not `with self.output`): works from any thread and any
        # message handler, a button click included.
        try:
            table = self.lints()
        except (UsageError, ShadowError) as error:  # a click has no cell to show an error in
            self.output.outputs = ()
            self.output.append_stderr(f"cannot lint: {error}\n")
            return
        self.output.outputs = ()
        self.output.append_display_data(table)

    def refresh(self) -> None:
        ws = self._workspace()
        if ws is None:
            self.status.value = "<i>shadow closed</i>"
            return
        self._list_branches(ws)
        self.status.value = f"<code>{html.escape(live.status_text(ws, self.session))}</code>"

    def _workspace(self) -> Workspace | None:
        """The open workspace (the session's, or one opened in code as `ws`), or None."""
        try:
            return self.session.require()
        except UsageError:
            return None

    def _list_branches(self, ws: Workspace) -> None:
        """The picker lists the workspace's branches and keeps the pick: left alone,
        ipywidgets jumps to the first option whenever the list changes, and picks none when
        the list was empty. Both the status thread and a click call this, hence the lock."""
        names = sorted(ws.branches)
        with self._lock, self.picker.hold_sync():  # one update for the front end
            picked = self.picker.value
            if list(self.picker.options) != names:
                self.picker.options = names
            keep = picked if picked in names else (names[0] if names else None)
            if self.picker.value != keep:
                self.picker.value = keep

    def _follow(self) -> None:
        while not self._stop.wait(live.INTERVAL):
            self.refresh()
            if self._workspace() is None:
                return

    def close(self) -> None:
        self._stop.set()
        super().close()
