"""Rich display of what the magics return, without a kernel: hover markdown and runs."""

from __future__ import annotations

from shadowkernel.kernel.display import HoverText, hover_markdown, run_html, run_text
from shadowkernel.lsp.navigation import Hover
from shadowkernel.overlay.store import Blob, File
from shadowkernel.run import RunResult

# What jedi-language-server answers for a class: the signature, a separator, the full name.
JEDI = "class Item(sku: str, name: str, price: float)\n---\nFull name: inventory.stock.Item"


def test_a_separator_under_the_signature_is_not_a_heading() -> None:
    markdown = HoverText(Hover(JEDI))._repr_markdown_()
    assert markdown.splitlines() == [
        "class Item(sku: str, name: str, price: float)",
        "",
        "---",
        "Full name: inventory.stock.Item",
    ]
    assert hover_markdown("Title\n=====\nbody").splitlines()[1:3] == ["", "---"]


def test_code_blocks_stay_code() -> None:
    fenced = "```python\ndef f(x: int) -> str\n---\n```\ndocs"
    assert hover_markdown(fenced) == fenced
    assert HoverText(None)._repr_markdown_() == "*no hover information here*"


def result(written: dict) -> RunResult:
    return RunResult(("python", "-m", "compileall", "."), 0, "ok\n", "", False, False, 0.25,
                     False, written, "fuse", True, False)  # fmt: skip


def test_run_result_repr_is_short_and_dumps_no_blob() -> None:
    pyc = File(Blob("b1", 800, b"\x00\x01" * 400))
    written = {f"pkg/__pycache__/m{i}.pyc": pyc for i in range(30)}
    text = repr(result(written))
    assert "\\x00" not in text and text == ("<RunResult 'python -m compileall .': exit 0 in 0.25 s, 30 path(s) written, "
                    "stdout 3 chars, stderr 0 chars>")  # fmt: skip
    assert "and 18 more" in run_text(result(written))
    assert run_html(result(written)).count("<code>") == 13


def test_a_chatty_runs_display_shows_both_ends_and_where_the_rest_is() -> None:
    from shadowkernel.kernel.display import SHOWN

    lines = "".join(f"{i}\n" for i in range(1, 2_000_001))
    chatty = RunResult(("seq", "1", "2000000"), 0, lines, "", False, False, 1.0, False, {},
                       "fuse", True, False)  # fmt: skip
    text, page = run_text(chatty), run_html(chatty)
    assert len(text) < SHOWN + 500 and len(page) < SHOWN + 2_000
    assert text.split("\n")[1] == "1" and text.endswith("2000000")
    assert "characters not shown (the whole text: the result's .stdout)" in text
    assert chatty.stdout == lines  # the result keeps all of it
