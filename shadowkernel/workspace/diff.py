"""A branch's edits as a unified diff (git style), shown coloured in a notebook."""

from __future__ import annotations

import html
from collections.abc import Mapping

from ..paths import RelPath
from ..text.patches import render_diff
from ..text.positions import split_lines


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
    files: Mapping[RelPath, bytes | None], bases: Mapping[RelPath, bytes | None]
) -> Diff:
    """Every touched path of a version against its base (None: absent on that side)."""
    return Diff("".join(render_diff(p, bases.get(p), files[p]) for p in sorted(files)))
