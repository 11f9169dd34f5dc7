"""Rich display of what the magics return: lint tables, runs, locations, hovers.

Lint tables stay plain pandas DataFrames (so they can be filtered and joined); the kernel
registers an HTML formatter that recognises them by their columns and renders severity
colours and a new-vs-old marker. Runs (`RunResult`) get an HTML and a short text form.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from ..lsp.lints import COLUMNS as LINT_COLUMNS
from ..lsp.navigation import Hover, Location

SEVERITY_COLORS = {
    "error": "#d1242f",
    "warning": "#9a6700",
    "information": "#0969da",
    "info": "#0969da",
    "hint": "#57606a",
}
_CELL = "padding:1px 8px;text-align:left;vertical-align:top"


def is_lint_table(obj: Any) -> bool:
    return isinstance(obj, pd.DataFrame) and set(LINT_COLUMNS) <= set(obj.columns)


def lint_html(table: pd.DataFrame, max_rows: int = 500) -> str:
    """A lint table as HTML: one row per lint, severity coloured, `new` lints marked."""
    where = f"branch {table.attrs['branch']!r} v{table.attrs['version']}" \
        if "branch" in table.attrs else "lints"  # fmt: skip
    new = int(table["new"].fillna(False).sum())
    caption = f"{where}: {len(table)} lints, {new} new"
    if table.empty:
        return f"<div class='shadowkernel-lints'><b>{html.escape(caption)}</b></div>"
    head = "".join(f"<th style='{_CELL}'>{h}</th>" for h in
                   ("", "where", "severity", "code", "message", "source", "fixes"))  # fmt: skip
    rows = "".join(_lint_row(row) for row in table.head(max_rows).itertuples(index=False))
    more = f"<p>({len(table) - max_rows} more rows)</p>" if len(table) > max_rows else ""
    table_html = f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    return f"<div class='shadowkernel-lints'><b>{html.escape(caption)}</b>{table_html}{more}</div>"


def _lint_row(row: Any) -> str:
    color = SEVERITY_COLORS.get(str(row.severity), "#57606a")
    marker = _new_marker(row.new)
    message = str(row.message).split("\n", 1)[0]
    cells = (
        marker,
        f"<code>{html.escape(f'{row.path}:{row.line}:{row.column}')}</code>",
        f"<span style='color:{color};font-weight:bold'>{html.escape(str(row.severity))}</span>",
        html.escape(str(row.code or "")),
        html.escape(message),
        html.escape(str(row.source or "")),
        str(len(row.fixes or ())),
    )
    return "<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in cells) + "</tr>"


def _new_marker(flag: Any) -> str:
    if pd.isna(flag):
        return "<span title='not compared with the base'>?</span>"
    if flag:
        return "<span title='introduced by the branch' style='color:#d1242f'>● new</span>"
    return "<span title='already in the base' style='color:#8c959f'>○ old</span>"


# -- runs ---------------------------------------------------------------------------------------


def run_status(result: Any) -> str:
    if getattr(result, "timed_out", False):
        return "timed out (killed)"
    code = result.exit_code
    return "exit 0" if code == 0 else f"exit {code}" + (" (killed)" if code == -9 else "")


def _first(paths: Iterable[str], limit: int = 12) -> list[str]:
    """At most `limit` paths, sorted, then how many more: a build writes hundreds."""
    ordered = sorted(paths)
    more = [f"and {len(ordered) - limit} more"] if len(ordered) > limit else []
    return ordered[:limit] + more


# Characters of each stream a notebook shows (half from each end): a chatty run kept 4 MB of
# output per stream, twice (text and HTML), in the notebook; the result keeps all of it.
SHOWN = 20_000


def shown(text: str, stream: str) -> str:
    """`text` as a notebook shows it: whole up to SHOWN characters, else its two ends around
    a line saying how much is left out and where it is."""
    if len(text) <= SHOWN:
        return text
    half = SHOWN // 2
    return (f"{text[:half]}\n... {len(text) - SHOWN:,} characters not shown (the whole text: "
            f"the result's .{stream}) ...\n{text[-half:]}")  # fmt: skip


def run_text(result: Any) -> str:
    written = ", ".join(_first(result.written)) or "nothing"
    parts = [f"{run_status(result)} in {result.duration:.2f} s; wrote {written}"]
    if result.stdout:
        parts.append(shown(result.stdout, "stdout").rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + shown(result.stderr, "stderr").rstrip("\n"))
    parts += [f"note: {n}" for n in result.notes]
    return "\n".join(parts)


def run_html(result: Any) -> str:
    ok = result.exit_code == 0 and not result.timed_out
    color = "#1a7f37" if ok else "#d1242f"
    written = ", ".join(f"<code>{html.escape(p)}</code>" for p in _first(result.written))
    command = html.escape(" ".join(result.command[-1:]) if result.command else "")
    head = (f"<b style='color:{color}'>{html.escape(run_status(result))}</b> in "
            f"{result.duration:.2f} s ({html.escape(result.mode)}"
            f"{', network on' if result.network else ''}); "
            f"wrote {written or 'nothing'}")  # fmt: skip
    blocks = [_pre("stdout", result.stdout, "#f6f8fa"), _pre("stderr", result.stderr, "#fff8f8")]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return (f"<div class='shadowkernel-run' title='{command}'>{head}{''.join(blocks)}"
            f"{f'<ul>{notes}</ul>' if notes else ''}</div>")  # fmt: skip


def _pre(name: str, text: str, background: str) -> str:
    if not text:
        return ""
    body = html.escape(shown(text, name))
    return (f"<div><i>{name}</i><pre style='background:{background};padding:4px;margin:2px 0;"
            f"max-height:30em;overflow:auto'>{body}</pre></div>")  # fmt: skip


# -- navigation ---------------------------------------------------------------------------------


class Locations(list[Location]):
    """Definition or reference locations; a list that shows as a small table."""

    def __init__(self, items: Iterable[Location], what: str = "locations") -> None:
        super().__init__(items)
        self.what = what

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(f"{len(self)} {self.what}" + "".join(f"\n  {_where(x)}" for x in self))

    def _repr_html_(self) -> str:
        rows = "".join(f"<li><code>{html.escape(_where(x))}</code>"
                       f"{'' if x.in_workspace else ' (outside the workspace)'}</li>"
                       for x in self)  # fmt: skip
        return f"<div><b>{len(self)} {self.what}</b><ul>{rows}</ul></div>"


def _where(location: Location) -> str:
    return f"{location.path}:{location.line}:{location.column}"


class HoverText(str):
    """Hover text (markdown from the server)."""

    def __new__(cls, hover: Hover | None) -> HoverText:
        return super().__new__(cls, hover.text if hover else "")

    def _repr_markdown_(self) -> str:
        return hover_markdown(str(self)) or "*no hover information here*"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self) or "no hover information here")


# A line of only dashes or equals signs: servers (jedi, pylsp) mean a separator under the
# signature, but right below a line of text CommonMark reads it as a setext heading.
_UNDERLINE = re.compile(r"^ {0,3}(-{3,}|={3,})\s*$")


def hover_markdown(text: str) -> str:
    """The server's markdown, with separator lines kept separators (never headings);
    fenced code blocks are left as they are, so they render as code."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and _UNDERLINE.match(line) and out and out[-1].strip():
            out.append("")
            line = "---"
        out.append(line)
    return "\n".join(out)


# -- registration -------------------------------------------------------------------------------


def register_formatters(shell: Any) -> Callable[[], None]:
    """Teach the shell's display system lint tables and run results. Returns the function
    that puts back the printers these replaced (`%unload_ext shadowkernel`)."""
    from ..run import RunResult
    from ..workspace import Diff

    formatters = shell.display_formatter.formatters
    as_html, as_text = formatters["text/html"], formatters["text/plain"]
    printers = [
        (as_html, pd.DataFrame, _dataframe_html),
        (as_html, RunResult, run_html),
        (as_text, RunResult, lambda r, p, cycle: p.text(run_text(r))),
        (as_text, Diff, lambda d, p, cycle: p.text(str(d) or "no changes")),
    ]
    # The exact entries replaced (for_type answers with a base class's printer too).
    replaced = [(f, typ, f.type_printers.get(typ)) for f, typ, _ in printers]
    for formatter, typ, printer in printers:
        formatter.for_type(typ, printer)

    def restore() -> None:
        for formatter, typ, old in replaced:
            if old is None:
                formatter.type_printers.pop(typ, None)
            else:
                formatter.type_printers[typ] = old

    return restore


def _dataframe_html(frame: pd.DataFrame) -> str | None:
    return lint_html(frame) if is_lint_table(frame) else frame._repr_html_()
