"""Pure cores of shadowkernel.lsp: positions, URIs, framing, delta lints, the lint table,
checker output parsers, specs. No processes are started here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest
from lsprotocol import types as lsp

from shadowkernel.errors import ArgumentError, NotFound, ServerError
from shadowkernel.lsp import (
    COLUMNS,
    AutoDiagnostics,
    CodeActionFixes,
    Lint,
    LintReport,
    LspPool,
    NoDiagnostics,
    PullDiagnostics,
    PushDiagnostics,
    RuffDataFixes,
    ServerSpec,
    TsserverDiagnostics,
    lint_table,
    mark_new,
)
from shadowkernel.lsp.checkers import parse_cargo, parse_mypy, parse_ruff, parse_tsc
from shadowkernel.lsp.client import lookup_section
from shadowkernel.lsp.codec import structure
from shadowkernel.lsp.diagnostics import Publications, UnversionedPublish, tsserver_diagnostic
from shadowkernel.lsp.documents import (
    TextIndex,
    from_character,
    lines,
    matches,
    to_character,
    uri_to_path,
)
from shadowkernel.lsp.jsonrpc import ServerCrashed, content_length, encode, read_message
from shadowkernel.lsp.languages import EXTENSIONS, language_id, patterns
from shadowkernel.lsp.linemap import line_map
from shadowkernel.lsp.pool import _Behind, linters, select
from shadowkernel.lsp.registry import resolve_specs
from shadowkernel.lsp.specs import builtin_specs

# -- positions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "index", "utf16", "utf8"),
    [
        ("abc", 2, 2, 2),
        ("é=1", 1, 1, 2),  # 2 bytes in UTF-8, one UTF-16 unit
        ("😀x", 1, 2, 4),  # astral: a surrogate pair in UTF-16
        ("中文x", 2, 2, 6),
    ],
)
def test_character_offsets_per_encoding(line: str, index: int, utf16: int, utf8: int) -> None:
    assert to_character(line, index, "utf-16") == utf16
    assert to_character(line, index, "utf-8") == utf8
    assert to_character(line, index, "utf-32") == index
    assert from_character(line, utf16, "utf-16") == index
    assert from_character(line, utf8, "utf-8") == index


def test_offsets_clamp_to_the_line_and_round_up_inside_a_pair() -> None:
    assert from_character("ab", 99, "utf-16") == 2
    assert from_character("😀x", 1, "utf-16") == 1  # inside the pair -> next code point


def test_lines_split_only_on_lsp_line_breaks() -> None:
    assert lines("a\r\nb\rc\nd\x0ce\u2028f") == ["a", "b", "c", "d\x0ce\u2028f"]


def test_text_index_round_trip_is_one_based() -> None:
    index = TextIndex("x = 1\ny = '😀' + z\n")
    position = index.to_lsp(2, 11)  # the 'z': code point 11, UTF-16 unit 12 (0-based 11)
    assert position == lsp.Position(1, 11)
    assert index.from_lsp(position) == (2, 11)
    assert index.span(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 5))) == (1, 1, 1, 6)


def test_uri_to_path_inside_outside_and_percent_encoded(tmp_path: Path) -> None:
    roots = (tmp_path,)
    assert uri_to_path(roots, (tmp_path / "a b/c.py").as_uri()) == ("a b/c.py", True)
    assert uri_to_path(roots, "file:///usr/lib/x.pyi") == ("/usr/lib/x.pyi", False)


def test_language_ids_and_patterns() -> None:
    assert language_id("a/b.py") == "python"
    assert language_id("x.tsx") == "typescriptreact"
    assert language_id("README") == "plaintext"
    assert matches("pkg/mod.py", ("*.py",)) and not matches("notes.txt", ("*.py",))


def test_one_table_gives_patterns_and_language_ids() -> None:
    assert patterns(["typescript"]) == ("*.ts", "*.tsx", "*.mts", "*.cts")
    assert patterns(["python", "go"]) == ("*.py", "*.pyi", "*.go")
    assert patterns(["cobol"]) == ()
    for extension, kind in EXTENSIONS.items():  # every pattern's files get a real languageId
        assert matches(f"a{extension}", patterns([kind.language]))
        assert language_id(f"a{extension}") == kind.language_id != "plaintext"


# -- publishes, as the push mode waits for them ----------------------------------------------


def publish(uri: str, version: int | None, message: str) -> lsp.PublishDiagnosticsParams:
    span = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1))
    return lsp.PublishDiagnosticsParams(uri, [lsp.Diagnostic(span, message)], version)


def test_publications_answer_only_the_version_sent_or_a_later_one() -> None:
    async def scenario() -> list[object]:
        published = Publications()
        published.record(publish("file:///a.py", 1, "old"))
        waiting = asyncio.ensure_future(published.wait("file:///a.py", 2, timeout=5))
        await asyncio.sleep(0)  # one turn of the loop: the waiter registers
        published.record(publish("file:///a.py", None, "unversioned"))  # proves nothing
        published.record(publish("file:///b.py", 2, "other file"))
        pending = not waiting.done()  # a matching publish resolves it at once
        published.record(publish("file:///a.py", 2, "new"))
        new = [d.message for d in await waiting]
        again = [d.message for d in await published.wait("file:///a.py", 2, timeout=5)]
        published.forget("file:///a.py")
        with pytest.raises(TimeoutError):
            await published.wait("file:///a.py", 2, timeout=0.01)
        return [pending, new, again]

    assert asyncio.run(scenario()) == [True, ["new"], ["new"]]


def test_an_unversioned_publish_after_the_mark_is_reported_never_taken() -> None:
    async def scenario() -> list[object]:
        published = Publications()
        published.record(publish("file:///a.go", None, "before the text was sent"))
        mark = published.unversioned("file:///a.go")
        waiting = asyncio.ensure_future(published.wait("file:///a.go", 1, 5, mark))
        await asyncio.sleep(0)
        published.record(publish("file:///a.go", None, "after"))  # which text? unknown
        with pytest.raises(UnversionedPublish):
            await waiting
        with pytest.raises(UnversionedPublish):  # also when it came before the wait began
            await published.wait("file:///a.go", 1, 5, mark)
        lenient = asyncio.ensure_future(published.wait("file:///a.go", 1, 5))  # no mark
        await asyncio.sleep(0)
        published.record(publish("file:///a.go", None, "ignored"))
        published.record(publish("file:///a.go", 1, "versioned"))
        return [d.message for d in await lenient]

    assert asyncio.run(scenario()) == ["versioned"]


def test_c_files_have_their_language_id_and_a_server_map_wins() -> None:
    assert (language_id("src/a.c"), language_id("a.h"), language_id("a.cpp")) == ("c", "c", "cpp")
    assert language_id("a.h", {".h": "cpp"}) == "cpp" and language_id("a.zig") == "plaintext"


def test_publications_fail_their_waiters_when_the_server_dies() -> None:
    async def scenario() -> None:
        published = Publications()
        waiting = asyncio.ensure_future(published.wait("file:///a.py", 1, timeout=5))
        await asyncio.sleep(0)  # one turn of the loop: the waiter registers
        published.fail("ruff: the server exited with code 9")
        with pytest.raises(ServerCrashed, match="exited with code 9"):
            await waiting

    asyncio.run(scenario())


# -- JSON-RPC framing ----------------------------------------------------------------------


def test_framing_round_trip() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo 😀"}}
    data = encode(message)
    header, _, body = data.partition(b"\r\n\r\n")
    assert content_length(header + b"\r\n\r\n") == len(body)

    async def read() -> list[object]:
        reader = asyncio.StreamReader()
        reader.feed_data(data + data)
        reader.feed_eof()
        return [await read_message(reader), await read_message(reader), await read_message(reader)]

    assert asyncio.run(read()) == [message, message, None]


def test_header_without_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="Content-Length"):
        content_length(b"Content-Type: x\r\n\r\n")


def test_configuration_sections_are_looked_up_by_dotted_name() -> None:
    settings = {"python": {"analysis": {"mode": "x"}}}
    assert lookup_section(settings, "python.analysis") == {"mode": "x"}
    assert lookup_section(settings, "python.missing") is None
    assert lookup_section(settings, None) == settings


def test_ruff_initialize_result_decodes() -> None:
    # cattrs >= 25 cannot decode this notebook selector without our extra hook.
    raw = {
        "capabilities": {
            "notebookDocumentSync": {"notebookSelector": [{"cells": [{"language": "python"}]}]},
            "diagnosticProvider": {
                "identifier": "Ruff",
                "interFileDependencies": False,
                "workspaceDiagnostics": False,
            },
        }
    }
    result = structure("initialize", raw)
    assert result.capabilities.diagnostic_provider.identifier == "Ruff"


def test_tsserver_diagnostics_become_lsp_diagnostics() -> None:
    raw = {
        "start": {"line": 2, "offset": 5},
        "end": {"line": 2, "offset": 8},
        "text": "Cannot find name 'y'.",
        "code": 2304,
        "category": "error",
    }
    diagnostic = tsserver_diagnostic(raw)
    assert diagnostic.range == lsp.Range(lsp.Position(1, 4), lsp.Position(1, 7))
    assert (diagnostic.code, diagnostic.severity) == (2304, lsp.DiagnosticSeverity.Error)


# -- delta lints -------------------------------------------------------------------------------


def lint(path: str, line: int, code: str = "F821", message: str = "undefined") -> Lint:
    return Lint(path, line, 1, line, 2, "error", code, "ruff", message)  # type: ignore[arg-type]


def test_line_map_follows_insertions() -> None:
    assert line_map(b"a\nb\nc\n", b"x\na\nb\nc\n").pairs(4) == {2: 1, 3: 2, 4: 3}


def test_mark_new_matches_through_the_diff() -> None:
    base_text = "import os\nx = y\n"
    new_text = "# header\nimport os\nx = y\nz = w\n"
    base = [lint("m.py", 2, message="y")]
    lints = [lint("m.py", 3, message="y"), lint("m.py", 4, message="w")]
    flags = mark_new(lints, base, {"m.py": base_text}, {"m.py": new_text})  # type: ignore[dict-item]
    assert flags == [False, True]


def test_mark_new_touched_line_keeps_its_lint_and_counts_duplicates() -> None:
    base = [lint("m.py", 1)]
    # line 1 was touched but kept (whitespace, a comment): its lint is the base's
    for touched in ("a = q  \n", "a = q  # why\n", "a  =  q\n"):
        assert mark_new([lint("m.py", 1)], base, {"m.py": "a = q\n"}, {"m.py": touched}) == [False]  # type: ignore[dict-item]
    # replaced by another line: new
    assert mark_new([lint("m.py", 1)], base, {"m.py": "a = q\n"}, {"m.py": "zz = {}\n"}) == [True]  # type: ignore[dict-item]
    # unchanged file (absent from both mappings): lines map to themselves; one base lint
    # excuses one lint only
    assert mark_new([lint("u.py", 3), lint("u.py", 3)], [lint("u.py", 3)], {}, {}) == [False, True]


def test_mark_new_new_file_and_different_code() -> None:
    assert mark_new([lint("n.py", 1)], [], {}, {"n.py": "x\n"}) == [True]  # type: ignore[dict-item]
    assert mark_new([lint("u.py", 1, code="E1")], [lint("u.py", 1)], {}, {}) == [True]


def test_lint_table_columns_order_and_flags() -> None:
    lints = [lint("b.py", 2), lint("a.py", 5), lint("a.py", 1)]
    table = lint_table(lints, "agent-a", 3, [True, False, True])
    assert tuple(table.columns) == COLUMNS
    assert list(zip(table.path, table.line, strict=True)) == [("a.py", 1), ("a.py", 5), ("b.py", 2)]
    assert list(table.new) == [True, False, True]
    assert set(table.branch) == {"agent-a"} and set(table.version) == {3}
    assert len(table[table.new]) == 2


def test_lint_table_without_flags_and_empty() -> None:
    table = lint_table([lint("a.py", 1)])
    assert table.new.isna().all()
    empty = lint_table([])
    assert tuple(empty.columns) == COLUMNS and len(empty) == 0
    # a clean file's table keeps the object columns an empty table always had
    flagged = lint_table([], "agent-a", 3, [])
    for table_ in (empty, flagged):
        dtypes = {str(table_[c].dtype) for c in ("branch", "version", "path", "message")}
        assert dtypes == {"object"}
    assert flagged[flagged["new"].fillna(True)].empty
    with pytest.raises(ValueError, match="new_flags"):
        lint_table([lint("a.py", 1)], new_flags=[])
    assert isinstance(table, pd.DataFrame)


def test_a_lint_report_is_the_tables_rows_sorted_with_their_flags() -> None:
    lints = [lint("b.py", 2), lint("a.py", 5, "F401", "unused"), lint("a.py", 1)]
    report = LintReport.of("agent-a", 3, lints, [True, False, True])
    assert [(x.path, x.line) for x in report.lints] == [("a.py", 1), ("a.py", 5), ("b.py", 2)]
    assert report.new == (True, False, True) and len(report) == 3
    assert [(x.line, new) for x, new in report] == [(1, True), (5, False), (2, True)]
    fresh = report.only_new()
    assert [x.line for x in fresh.lints] == [1, 2] and fresh.new == (True, True)
    assert (fresh.branch, fresh.version) == ("agent-a", 3)
    table = report.table()
    assert table.equals(lint_table(lints, "agent-a", 3, [True, False, True]))
    assert table.attrs == {"branch": "agent-a", "version": 3}
    html = report._repr_html_()  # a notebook shows the report as its table
    assert "<table" in html and "unused" in html
    with pytest.raises(ArgumentError, match="2 new flags for 3 lints"):
        LintReport.of("agent-a", 3, lints, [True, False])


# -- checker parsers ----------------------------------------------------------------------------


def test_parse_ruff_json(tmp_path: Path) -> None:
    item = {"code": "F401", "filename": str(tmp_path / "pkg/a.py"), "message": "`os` unused",
            "location": {"row": 1, "column": 8}, "end_location": {"row": 1, "column": 10},
            "severity": "error", "fix": {"message": "Remove", "edits": [
                {"content": "", "location": {"row": 1, "column": 1},
                 "end_location": {"row": 2, "column": 1}}]}}  # fmt: skip
    [found] = parse_ruff(json.dumps([item]), [str(tmp_path)])
    assert (found.path, found.line, found.column, found.end_column) == ("pkg/a.py", 1, 8, 10)
    assert found.fixes[0].title == "Remove" and found.fixes[0].edits[0].end_line == 2


def test_parse_mypy_json_columns_become_one_based(tmp_path: Path) -> None:
    line = json.dumps({"file": "a.py", "line": 2, "column": 4, "end_line": 2, "end_column": 13,
                       "message": "Name \"u\" is not defined", "hint": None,
                       "code": "name-defined", "severity": "error"})  # fmt: skip
    [found] = parse_mypy("noise\n" + line + "\n", [str(tmp_path)])
    assert (found.line, found.column, found.end_column, found.code) == (2, 5, 14, "name-defined")


def test_parse_tsc_with_continuation_lines(tmp_path: Path) -> None:
    output = ("src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n"
              "  Extra detail.\nunrelated\n")  # fmt: skip
    [found] = parse_tsc(output, [str(tmp_path)])
    assert (found.path, found.line, found.column, found.code) == ("src/a.ts", 3, 7, "TS2322")
    assert found.message.endswith("Extra detail.")


def test_parse_cargo_primary_span(tmp_path: Path) -> None:
    message = {"reason": "compiler-message", "message": {
        "message": "unused variable: `x`", "level": "warning", "code": {"code": "unused_variables"},
        "spans": [{"file_name": "src/main.rs", "line_start": 2, "line_end": 2, "column_start": 9,
                   "column_end": 10, "is_primary": True}]}}  # fmt: skip
    lines_ = [json.dumps({"reason": "build-finished"}), json.dumps(message)]
    [found] = parse_cargo("\n".join(lines_), [str(tmp_path)])
    assert (found.path, found.line, found.column) == ("src/main.rs", 2, 9)
    assert found.severity == "warning"


# -- specs ----------------------------------------------------------------------------------------


def test_spec_from_jupyter_lsp_dict() -> None:
    spec = ServerSpec.from_dict("my-ls", {
        "argv": ["my-ls", "--stdio"], "languages": ["python"], "version": 2,
        "install": {"pip": "pip install my-ls"}, "requires_documents_on_disk": False,
        "workspace_configuration": {"my": {"flag": True}}})  # fmt: skip
    assert spec.patterns == ("*.py", "*.pyi") and not spec.reads_disk
    assert spec.settings == {"my": {"flag": True}}
    with pytest.raises(ServerError, match="pip install my-ls"):
        spec.command()


def test_resolve_specs_rejects_unknown_and_duplicates() -> None:
    assert [s.name for s in resolve_specs(["ruff", {"name": "x", "argv": ["x"]}])] == ["ruff", "x"]
    with pytest.raises(LookupError, match="unknown language server 'nope'"):
        resolve_specs(["nope"])
    with pytest.raises(ValueError, match="twice"):
        resolve_specs(["ruff", "ruff"])
    assert {"ruff", "pyright", "basedpyright", "ty", "pylsp", "jedi-language-server",
            "typescript-language-server", "tsgo", "gopls", "clangd",
            "bash-language-server"} <= set(builtin_specs())  # fmt: skip


def test_quirks_are_strategies_named_by_value_or_by_name() -> None:
    specs = builtin_specs()
    assert specs["pyright"].diagnostics == PullDiagnostics()
    assert specs["pylsp"].diagnostics == PushDiagnostics()
    assert specs["typescript-language-server"].diagnostics == TsserverDiagnostics()
    assert specs["gopls"].diagnostics == PushDiagnostics(resends=2)  # gopls 0.5: unversioned
    assert specs["clangd"].diagnostics == PushDiagnostics() and specs["clangd"].recheck_open
    assert AutoDiagnostics().name == "auto"
    assert specs["ruff"].quick_fixes == RuffDataFixes()
    assert specs["pyright"].quick_fixes == CodeActionFixes()
    named = ServerSpec.from_dict("x", {"argv": ["x"], "diagnostics": "push",
                                       "quick_fixes": "ruff-data"})  # fmt: skip
    assert (named.diagnostics, named.quick_fixes) == (PushDiagnostics(), RuffDataFixes())


def test_a_server_behind_hears_one_net_event_per_path() -> None:
    """What a server missed over several switches is told as one event per path, from what
    it knew of the file to what the disk shows; a file created and deleted unseen is not."""
    created, changed, deleted = (lsp.FileChangeType.Created, lsp.FileChangeType.Changed,
                                 lsp.FileChangeType.Deleted)  # fmt: skip
    behind = _Behind()
    behind.missed(["a.py"], ["lib.py"], [("lib.py", changed), ("new.py", created)])
    behind.missed([], ["lib.py"], [("lib.py", deleted), ("new.py", deleted), ("gone.py", deleted)])
    behind.missed(["b.py"], [], [("gone.py", created), ("late.py", created), ("late.py", changed)])
    assert behind.seen == {"a.py", "lib.py", "b.py"}
    assert dict(behind.net_events()) == {"lib.py": deleted, "gone.py": changed, "late.py": created}


def test_a_server_kept_for_navigation_is_never_asked_for_lints() -> None:
    jedi = builtin_specs()["jedi-language-server"]
    assert jedi.diagnostics == NoDiagnostics() and not jedi.diagnostics.lints
    assert jedi.initialization_options == {"diagnostics": {"enable": False}}  # none published
    specs = resolve_specs(["ruff", "jedi-language-server"])
    assert [s.name for s in linters(specs, None)] == ["ruff"]
    assert [s.name for s in linters(specs, ["ruff"])] == ["ruff"]
    with pytest.raises(ArgumentError, match="jedi-language-server: kept for navigation only"):
        linters(specs, ["ruff", "jedi-language-server"])
    with pytest.raises(NotFound, match="'pyright'"):
        linters(specs, ["pyright"])
    assert [s.name for s in select(specs, ["jedi-language-server"])] == ["jedi-language-server"]
    assert ServerSpec("x", ("x",), ("python",), diagnostics="none").diagnostics == NoDiagnostics()


def test_bad_spec_arguments_are_argument_errors_naming_what_to_give() -> None:
    with pytest.raises(ArgumentError, match="diagnostics='pulll': give one of auto, pull"):
        ServerSpec("x", ("x",), ("python",), diagnostics="pulll")
    with pytest.raises(ArgumentError, match="quick_fixes='ruff': give one of code-actions"):
        ServerSpec("x", ("x",), ("python",), quick_fixes="ruff")
    with pytest.raises(ArgumentError, match="argv is empty"):
        ServerSpec("x", (), ("python",))
    with pytest.raises(ArgumentError, match="'my-ls': no 'argv'"):
        resolve_specs([{"name": "my-ls", "languages": ["python"]}])
    with pytest.raises(
        ArgumentError, match=r"servers='ruff': give a list of servers, e.g. \['ruff'\]"
    ):
        resolve_specs("ruff")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="3 is not a server"):
        resolve_specs([3])  # type: ignore[list-item]


def test_positions_must_be_one_based(tmp_path: Path) -> None:
    pool = LspPool(tmp_path, ["ruff"])  # nothing starts: the position is checked first
    with pytest.raises(ArgumentError, match="line=0, column=1: positions are 1-based"):
        asyncio.run(pool.definition("m.py", 0, 1))


def test_framing_errors_are_server_errors() -> None:
    with pytest.raises(ServerError, match="valid Content-Length"):
        content_length(b"Content-Length: twelve\r\n\r\n")
