"""A branch's edits as a unified diff (git style), shown coloured in a notebook."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from ..paths import RelPath
from ..text.patches import render_diff
from ..text.positions import split_lines
from .scratch import Entry
from .staging import n_files


class Diff(str):
    """Unified diff text that shows coloured in a notebook."""

    def _repr_html_(self) -> str:
        colors = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}
        rows = []
        for line in split_lines(self):
            color = colors.get(line[:1], "") if not line.startswith(("+++", "---")) else ""
            style = f' style="background:{color}"' if color else ""
            rows.append(f"<div{style}>{html.escape(line) or '&nbsp;'}</div>")
        body = "".join(rows) or "<i>no changes</i>"
        return f'<pre style="font-size:12px;line-height:1.3">{body}</pre>'


def version_diff(
    files: Mapping[RelPath, bytes | None],
    bases: Mapping[RelPath, bytes | None],
    modes: Mapping[RelPath, int] | None = None,
    base_modes: Mapping[RelPath, int] | None = None,
    scratch: Sequence[Entry] = (),
) -> Diff:
    """Every touched path of a version against its base (None: absent on that side), with
    git's mode lines; then, when given, what runs left in the branch's scratch layer."""
    modes, base_modes = modes or {}, base_modes or {}
    text = "".join(
        render_diff(p, bases.get(p), files[p], old_mode=base_modes.get(p),
                    new_mode=modes.get(p, base_modes.get(p)))
        for p in sorted(files)
    )  # fmt: skip
    return Diff(text + scratch_section(scratch))


def scratch_section(entries: Sequence[Entry]) -> str:
    """What runs wrote without keep=True: later runs see it; lints, diff and accept do not."""
    if not entries:
        return ""
    rows = [f"# scratch: {n_files(len(entries))} written by runs, not staged (later runs see "
            "them; accept does not)\n"]  # fmt: skip
    for e in entries:
        size = "" if e.size is None else f" {e.size} bytes"
        mode = "" if e.mode is None else f" {e.mode:o}"
        rows.append(f"#   {e.kind} {e.path}{size}{mode}\n")
    return "".join(rows)
