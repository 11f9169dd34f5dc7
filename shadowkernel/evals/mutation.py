"""Small, realistic bugs made from a module's source (pure: text in, mutants out).

Each `Mutant` changes one span of one function body, the way a slip of the hand would:

- comparison: a flipped or shifted comparison (`<` -> `<=`, `==` -> `!=`, `in` -> `not in`)
- negation: a dropped `not`
- off-by-one: an integer literal in an index, slice, comparison or arithmetic, +1 or -1
- dropped-branch: an `if` block without `else` removed (a dropped guard or early return when
  it ends in `return`/`raise`), or an `else` block removed
- swapped-arguments: the first two positional arguments of a call swapped
- operator: a wrong arithmetic, bitwise, boolean or augmented-assignment operator

Only the span changes (the operator token, the literal, the lines of the dropped block), so
the rest of the file keeps its formatting and the inverse edit is a small search/replace.
Only single-line expressions are mutated; decorators, default values and docstrings never.

Caveats: nothing here knows whether a mutant is equivalent to the original or breaks half
the test suite; the suite generator decides that by running the tests.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from ..text import positions

COMPARISONS = {  # operator -> (its token in the source, the token it becomes)
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"), ast.In: ("in", "not in"), ast.NotIn: ("not in", "in"),
}  # fmt: skip
OPERATORS = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"), ast.Mod: ("%", "//"), ast.Pow: ("**", "*"),
    ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"), ast.BitXor: ("^", "|"),
    ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<"),
}  # fmt: skip
BOOLEANS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
KINDS = ("comparison", "negation", "off-by-one", "dropped-branch", "swapped-arguments",
         "operator")  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    path: str  # the module, relative to the project root
    function: str  # qualified name of the function holding the change (Class.method)
    body: tuple[int, int]  # the function body's first and last line (1-based)
    line: int  # where the change is
    kind: str  # one of KINDS
    description: str  # what changed, as a reviewer would say it
    start: int  # character offsets of the replaced span in the original text
    end: int
    replacement: str

    @property
    def id(self) -> str:
        stem = self.path.removesuffix(".py").replace("/", ".")
        return f"{stem}.{self.function}-{self.kind}-L{self.line}"

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]


def mutants(path: str, text: str) -> list[Mutant]:
    """Every mutant of every function in `text`, in source order (empty if it does not parse)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    source = Source(text)
    found = [m for fn, name in functions(tree) for m in _in_function(path, source, fn, name)]
    return sorted(found, key=lambda m: (m.start, m.end, m.kind, m.replacement))


def inverse(original: str, mutated: str, mutant: Mutant) -> tuple[str, str]:
    """(old, new) of a search/replace that turns `mutated` back into `original`: the changed
    whole lines, widened by neighbouring lines until `old` occurs once in `mutated`."""
    starts = positions.line_starts(original)
    first = bisect.bisect_right(starts, mutant.start) - 1  # 0-based lines of the change
    last = bisect.bisect_right(starts, mutant.end) - 1
    before = positions.split_lines(original, keepends=True)
    after = positions.split_lines(mutated, keepends=True)
    tail = len(before) - 1 - last  # lines after the change, the same in both texts
    lo, hi = first, len(after) - tail
    while True:
        old = "".join(after[lo:hi])
        if mutated.count(old) == 1 or (lo == 0 and hi >= len(after)):
            return old, "".join(before[lo : len(before) - (len(after) - hi)])
        lo, hi = max(lo - 1, 0), min(hi + 1, len(after))


# -- walking the functions --------------------------------------------------------------------

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[Function, str]]:
    """Every function with its qualified name; nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, prefix + node.name
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        elif not isinstance(node, ast.expr):
            yield from functions(node, prefix)  # if/try/with blocks at module level


def body_lines(fn: Function) -> tuple[int, int]:
    body = fn.body[1:] if _has_docstring(fn) and len(fn.body) > 1 else fn.body
    return body[0].lineno, fn.end_lineno or body[-1].lineno


def own_nodes(fn: Function) -> Iterator[ast.AST]:
    """The nodes of `fn`'s body, not those of nested functions or classes (they have their
    own entry), nor the docstring."""
    body = fn.body[1:] if _has_docstring(fn) else fn.body
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        children = [c for c in ast.iter_child_nodes(node)
                    if not isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                                      | ast.Lambda)]  # fmt: skip
        stack.extend(reversed(children))


def _has_docstring(fn: Function) -> bool:
    first = fn.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
        isinstance(first.value.value, str)  # fmt: skip


def _in_function(path: str, source: Source, fn: Function, name: str) -> Iterator[Mutant]:
    body = body_lines(fn)
    for node in own_nodes(fn):
        for line, kind, description, start, end, replacement in _sites(source, node, fn):
            yield Mutant(path, name, body, line, kind, description, start, end, replacement)


Site = tuple[int, str, str, int, int, str]  # line, kind, description, start, end, replacement


def _sites(source: Source, node: ast.AST, fn: Function) -> Iterator[Site]:
    if isinstance(node, ast.Compare):
        yield from _comparisons(source, node)
    elif isinstance(node, ast.BinOp):
        yield from _operator(source, node, node.left, node.right, OPERATORS, _is_text(node))
    elif isinstance(node, ast.AugAssign):
        yield from _augmented(source, node)
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        yield from _operator(source, node, node.values[0], node.values[1], BOOLEANS, False)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield from _negation(source, node)
    elif isinstance(node, ast.Call):
        yield from _swapped(source, node)
    elif isinstance(node, ast.If):
        yield from _dropped(source, node, fn)
    for child in ast.iter_child_nodes(node):
        if isinstance(node, ast.Compare | ast.BinOp | ast.Subscript | ast.Slice):
            yield from _off_by_one(source, child)


# -- the mutation operators ---------------------------------------------------------------------


def _comparisons(source: Source, node: ast.Compare) -> Iterator[Site]:
    left: ast.expr = node.left
    for op, right in zip(node.ops, node.comparators, strict=True):
        token, new = COMPARISONS[type(op)]
        site = source.token_between(left, right, token)
        if site is not None:
            yield (node.lineno, "comparison", f"`{token}` became `{new}`", *site, new)
        left = right


def _operator(source: Source, node: ast.AST, left: ast.expr, right: ast.expr,
              table: dict, skip: bool) -> Iterator[Site]:  # fmt: skip
    op = getattr(node, "op", None)
    if skip or type(op) not in table:
        return
    token, new = table[type(op)]
    site = source.token_between(left, right, token)
    if site is not None:
        yield (left.lineno, "operator", f"`{token}` became `{new}`", *site, new)


def _augmented(source: Source, node: ast.AugAssign) -> Iterator[Site]:
    if type(node.op) not in OPERATORS or _is_text(node):
        return
    token, new = OPERATORS[type(node.op)]
    site = source.token_between(node.target, node.value, token + "=")
    if site is not None:
        yield (node.lineno, "operator", f"`{token}=` became `{new}=`", *site, new + "=")


def _negation(source: Source, node: ast.UnaryOp) -> Iterator[Site]:
    span = source.span(node)
    inner = source.span(node.operand)
    if span is None or inner is None or not source.text[span[0] : inner[0]].startswith("not"):
        return
    yield (node.lineno, "negation", "a `not` was dropped", span[0], inner[0], "")


def _off_by_one(source: Source, node: ast.AST) -> Iterator[Site]:
    if not (isinstance(node, ast.Constant) and type(node.value) is int):
        return
    span = source.span(node)
    if span is None or not source.text[span[0] : span[1]].isdigit():
        return
    for new in (node.value + 1, node.value - 1):
        if new >= 0:
            yield (node.lineno, "off-by-one", f"`{node.value}` became `{new}`", *span, str(new))


def _swapped(source: Source, node: ast.Call) -> Iterator[Site]:
    args = node.args
    if len(args) < 2 or any(isinstance(a, ast.Starred) for a in args[:2]):
        return
    first, second = source.span(args[0]), source.span(args[1])
    if first is None or second is None:
        return
    a, b = source.text[first[0] : first[1]], source.text[second[0] : second[1]]
    if a == b:
        return
    between = source.text[first[1] : second[0]]
    func = source.span(node.func)
    name = source.text[func[0] : func[1]] if func else "a call"
    yield (node.lineno, "swapped-arguments", f"the arguments `{a}` and `{b}` of `{name}` "
           "were swapped", first[0], second[1], b + between + a)  # fmt: skip


def _dropped(source: Source, node: ast.If, fn: Function) -> Iterator[Site]:
    if not node.orelse:
        if _only_statement(node, fn):
            return  # dropping it would leave an empty block; `pass` is not a realistic slip
        exits = isinstance(node.body[-1], ast.Return | ast.Raise)
        what = "guard with its early exit" if exits else "branch"
        yield (node.lineno, "dropped-branch", f"the `if` {what} at line {node.lineno} is gone",
               *source.lines_span(node.lineno, node.end_lineno or node.lineno), "")  # fmt: skip
        return
    else_line = source.else_line(node)
    if else_line is not None:
        yield (else_line, "dropped-branch", f"the `else` block at line {else_line} is gone",
               *source.lines_span(else_line, node.end_lineno or else_line), "")  # fmt: skip


def _only_statement(node: ast.stmt, fn: Function) -> bool:
    for parent in ast.walk(fn):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and node in block:
                return len(block) == 1
    return True


def _is_text(node: ast.AST) -> bool:
    """True for string formatting or concatenation, where a wrong operator is no slip."""
    parts = [getattr(node, "left", None), getattr(node, "right", None),
             getattr(node, "value", None)]  # fmt: skip
    return any(isinstance(p, ast.Constant) and isinstance(p.value, str | bytes) or
               isinstance(p, ast.JoinedStr) for p in parts)  # fmt: skip


# -- positions ------------------------------------------------------------------------------------


class Source:
    """A module's text with AST positions (UTF-8 byte columns) mapped to character offsets.
    Python breaks lines where LSP does (never at `\\f` or `\\u2028`), so the lines are LSP's."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = positions.split_lines(text, keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        prefix = self.lines[line - 1].encode()[:column].decode("utf-8", "replace")
        return self.starts[line - 1] + len(prefix)

    def span(self, node: ast.AST) -> tuple[int, int] | None:
        """Offsets of a single-line node, else None."""
        end_line = getattr(node, "end_lineno", None)
        if end_line is None or end_line != node.lineno:  # type: ignore[attr-defined]
            return None
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(end_line, node.end_col_offset))  # type: ignore[attr-defined]  # fmt: skip

    def token_between(self, left: ast.AST, right: ast.AST, token: str) -> tuple[int, int] | None:
        """Offsets of `token` in the gap between two single-line nodes on one line: the gap
        may hold only whitespace, parentheses and the token itself."""
        a, b = self.span(left), self.span(right)
        if a is None or b is None or left.lineno != right.lineno:  # type: ignore[attr-defined]
            return None
        gap = self.text[a[1] : b[0]]
        at = gap.find(token)
        if at < 0 or gap[:at].strip("() \t") or gap[at + len(token) :].strip("() \t"):
            return None
        return a[1] + at, a[1] + at + len(token)

    def lines_span(self, first: int, last: int) -> tuple[int, int]:
        return self.starts[first - 1], self.starts[last]

    def else_line(self, node: ast.If) -> int | None:
        """The line of the `else:` of `node` (not an `elif`), found by its indentation."""
        indent = self.lines[node.lineno - 1][: node.col_offset]
        for line in range(node.orelse[0].lineno - 1, node.body[-1].end_lineno or 0, -1):
            text = self.lines[line - 1]
            if text.startswith(indent + "else") and text[len(indent) + 4 :].lstrip().startswith(
                    ":"):  # fmt: skip
                return line
        return None
