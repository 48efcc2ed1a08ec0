"""Stage 5: line and column of the nodes findings point at, as libcst's PositionProvider gives them, computed
only for the top-level statements that hold them."""

from __future__ import annotations

import ast
import gc
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from torchlint.source import pyast
from torchlint.source.walk import walk

try:  # libcst's code generation state: internal, so a libcst that moves it gets the public (slower) path
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = object  # type: ignore[assignment,misc]

_NEWLINE = re.compile(r"\r\n?|\n")  # what libcst counts as a line break


def positions(
    module: cst.Module, text: str, nodes: Sequence[cst.CSTNode], tops: Mapping[int, int] | None = None
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of `nodes`, as libcst's PositionProvider gives them. Generating code is the cost, so only the
    top-level statements that hold the nodes are generated, with token marks instead of the provider's
    per-token bookkeeping (`_MarkingCodegenState`), and shifted by the line where each statement starts; the
    whole-module provider is the fallback."""
    try:
        return _positions_by_statement(module, text, nodes, tops or {})
    except (_Unmapped, SyntaxError, ValueError, RecursionError, MemoryError, AttributeError, TypeError):
        # TypeError/AttributeError: a libcst whose code generation internals differ from the ones we mark.
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class _Unmapped(Exception):
    pass


def _positions_by_statement(module: cst.Module, text: str, nodes: Sequence[cst.CSTNode], tops: Mapping[int, int]) -> dict:
    by_id = {id(n): n for n in nodes}
    wanted = set(by_id)
    holder_set = {tops[i] for i in wanted if i in tops}
    unknown = {i for i in wanted if i not in tops}
    if unknown:  # nodes no event points at (a detached subexpression): look for them, likeliest places first
        order = sorted(holder_set) + [i for i in range(len(module.body)) if i not in holder_set]
        for index in order:
            found = {id(n) for n in walk(module.body[index], descend_scopes=True)} & unknown
            if found:
                holder_set.add(index)
                unknown -= found
                if not unknown:
                    break
    holders = sorted(holder_set)
    if not holders:
        raise _Unmapped
    # The line where each statement starts, from `ast`, whose statement lines are exact: one parse of the file,
    # where searching the file for each statement's text (and counting the line breaks before it) cost the whole
    # file per statement, quadratic in a long file with many findings.
    starts = _statement_lines_of(module, text)
    if starts is None:  # text CPython's parser refuses and libcst's takes: the whole-module provider
        raise _Unmapped
    out: dict = {}
    for index in holders:
        stmt = module.body[index]
        sub = cst.Module(body=[stmt], default_newline=module.default_newline, default_indent=module.default_indent)
        local, _ = _positions_and_code(sub, wanted | {id(stmt)})
        shift = starts[index] - local[id(stmt)].start.line
        for key, rng in local.items():
            if key in wanted:
                out[by_id[key]] = CodeRange(
                    CodePosition(rng.start.line + shift, rng.start.column), CodePosition(rng.end.line + shift, rng.end.column)
                )
    if len(out) != len(wanted):
        raise _Unmapped
    return out


@dataclass
class _MarkingCodegenState(CodegenState):
    """Plain code generation that notes, per node, the token indexes where it starts and ends — the same ranges
    libcst's PositionProvider computes (syntactic where a node records one, else whitespace-inclusive), without
    tracking line and column on every token, which makes the provider five times slower than code generation.
    Only the nodes asked for are turned into lines and columns, afterwards."""

    marks: dict[int, tuple[int, int]] = field(default_factory=dict)
    _starts: list[int] = field(default_factory=list)
    popped: list[str] = field(default_factory=list)

    def pop_trailing_newline(self) -> None:
        # The provider's positions still count the newline a file without one at its end loses here.
        if self.tokens:
            self.popped.append(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if id(node) not in self.marks:
            self.marks[id(node)] = (start, len(self.tokens) + len(self.popped))

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        return _Syntactic(self.marks, self.tokens, node, start_node, end_node)


class _Syntactic:
    """The hook around a node's syntactic part: its token indexes noted on the way out, as a plain object (a
    generator-based context manager costs several times more, and libcst enters one per node it writes)."""

    __slots__ = ("marks", "tokens", "node", "start_node", "end_node", "start")

    def __init__(self, marks: dict, tokens: list, node, start_node, end_node) -> None:
        self.marks, self.tokens, self.node, self.start_node, self.end_node = marks, tokens, node, start_node, end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = len(self.tokens)

    def __exit__(self, *exc) -> None:
        marks = self.marks
        marks[id(self.node)] = (
            marks[id(self.start_node)][0] if self.start_node is not None else self.start,
            marks[id(self.end_node)][1] if self.end_node is not None else len(self.tokens),
        )


def _positions_and_code(sub: cst.Module, wanted: set[int] | None = None) -> tuple[dict[int, CodeRange], str]:
    """The code of `sub` and the ranges of its nodes (those in `wanted`, or all), keyed by id()."""
    state = _MarkingCodegenState(default_indent=sub.default_indent, default_newline=sub.default_newline)
    sub._codegen(state)
    code = "".join(state.tokens)
    tokens = state.tokens + state.popped
    offsets = list(accumulate(map(len, tokens), initial=0))
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer("".join(tokens))]

    def position(token_index: int) -> CodePosition:
        offset = offsets[token_index]
        line = bisect_right(line_starts, offset)
        return CodePosition(line, offset - line_starts[line - 1])

    return {
        key: CodeRange(position(a), position(b))
        for key, (a, b) in state.marks.items()
        if wanted is None or key in wanted
    }, code


def _statement_lines_of(module: cst.Module, text: str) -> list[int] | None:
    """`_statement_lines` of the text, or None where CPython's parser does not take it."""
    # The cycle collector paused: it would walk the caller's libcst tree again and again while the ast is built
    # (most of the parse's time in a long file), to find cycles an ast does not have.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _statement_lines(module, pyast.parse(text.removeprefix("\ufeff")))  # CPython refuses a BOM in a str
    except (_Unmapped, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    finally:
        if enabled:
            gc.enable()


def _statement_lines(module: cst.Module, tree: ast.Module) -> list[int]:
    """The line where libcst's position of each top-level statement starts, from the `ast` of the same text:
    a libcst line of `a; b` is two ast statements, every other statement is one."""
    lines: list[int] = []
    i = 0
    for stmt in module.body:
        if i >= len(tree.body):
            raise _Unmapped
        # Not the first decorator's line: libcst's position of a decorated statement starts at `def`/`class`
        lines.append(tree.body[i].lineno)
        i += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
    if i != len(tree.body):
        raise _Unmapped
    return lines
