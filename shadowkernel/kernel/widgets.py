"""A small control panel: branch picker, lint filter, lint button, and a live status line.

The status line is refreshed by a daemon thread every `live.INTERVAL` seconds (widget state
updates reach the browser from any thread, unlike `update_display`); it stops when the shadow
closes or the panel is closed.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as w

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
        self.refresh()
        threading.Thread(target=self._follow, daemon=True, name="shadowkernel-status").start()

    def lints(self) -> Any:
        """The picked branch's lints, filtered as the controls say."""
        branch = self.session.branch(self.picker.value)
        table = branch.lint(new_only=self.new_only.value)
        return table[table["severity"].isin(self.severity.value)].reset_index(drop=True)

    def show_lints(self) -> None:
        # Set the outputs directly (not `with self.output`): works from any thread and any
        # message handler, a button click included.
        self.output.outputs = ()
        self.output.append_display_data(self.lints())

    def refresh(self) -> None:
        ws = self.session.workspace
        if ws is None or ws._closed:
            self.status.value = "<i>shadow closed</i>"
            return
        names = sorted(ws.branches)
        if list(self.picker.options) != names:
            self.picker.options = names
        self.status.value = f"<code>{html.escape(live.status_text(ws, self.session))}</code>"

    def _follow(self) -> None:
        while not self._stop.wait(live.INTERVAL):
            self.refresh()
            ws = self.session.workspace
            if ws is None or ws._closed:
                return

    def close(self) -> None:
        self._stop.set()
        super().close()
